"""Reading a snapshot back: an unkeyed record is matched to its cluster by its document,
and one that is not JSON or not UTF-8 is simply not the snapshot sought."""

from __future__ import annotations

import pytest

from streams.snapshot_reader import _same_cluster


class Message:
    def __init__(self, value: bytes | None, key: bytes | None = None) -> None:
        self._value, self._key = value, key

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def test_a_keyed_record_is_matched_by_its_key():
    assert _same_cluster(Message(b"not even JSON", b"c1"), "c1")
    assert not _same_cluster(Message(b'{"cluster_id": "c1"}', b"c2"), "c1")


def test_an_unkeyed_record_is_matched_by_its_cluster_id():
    assert _same_cluster(Message(b'{"cluster_id": "c1", "brokers": []}'), "c1")
    assert not _same_cluster(Message(b'{"cluster_id": "c2"}'), "c1")


@pytest.mark.parametrize("value", [b'{"cluster_id": "\xff\xfe"}', b"[" * 60_000, b"\x00",
                                   b'{"cluster_id": 7}', None])
def test_poison_without_a_key_is_not_the_snapshot_and_raises_nothing(value):
    assert not _same_cluster(Message(value), "c1")
