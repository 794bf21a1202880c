"""The job's reader of a snapshot or of a failure's delta record: a passing error on the
way (the snapshots partition's leader moving off the dir that failed) is waited out, not
taken for a record that is gone."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from schemas import snapshot_chunks as chunking
from streams.snapshot_reader import SnapshotMissing, SnapshotReader


class _Error:
    def __init__(self, fatal: bool) -> None:
        self._fatal = fatal

    def fatal(self) -> bool:
        return self._fatal

    def __str__(self) -> str:
        return "Broker: Not leader for partition"


class _Msg:
    def __init__(self, offset: int, value: bytes | None = None, error: _Error | None = None):
        self._offset, self._value, self._error = offset, value, error

    def error(self) -> _Error | None:
        return self._error

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value


class _Consumer:
    def __init__(self, answers: list[_Msg | None]) -> None:
        self.answers = answers

    def assign(self, _partitions) -> None:
        pass

    def poll(self, _timeout: float):
        return self.answers.pop(0) if self.answers else None


def _reader(answers: list[_Msg | None]) -> SnapshotReader:
    reader = SnapshotReader(config=None, timeout=5.0)  # type: ignore[arg-type]
    reader._consumer = _Consumer(answers)
    return reader


REF = SimpleNamespace(topic="selfheal.cluster-snapshots", partition=0, offset=9)


def test_a_passing_error_before_the_delta_is_waited_out(monkeypatch):
    monkeypatch.setattr(chunking, "kind_of", lambda v: chunking.DELTA)
    reader = _reader([_Msg(9, error=_Error(fatal=False)), None, _Msg(9, b"delta")])
    assert reader.delta(REF, "c") == b"delta"


def test_a_fatal_error_ends_the_wait_and_is_named(monkeypatch):
    monkeypatch.setattr(chunking, "kind_of", lambda v: chunking.DELTA)
    reader = _reader([_Msg(9, error=_Error(fatal=True)), _Msg(9, b"delta")])
    with pytest.raises(SnapshotMissing, match="last error Broker: Not leader"):
        reader.delta(REF, "c")


def test_a_record_not_at_the_offset_is_a_delta_that_is_gone(monkeypatch):
    monkeypatch.setattr(chunking, "kind_of", lambda v: chunking.DELTA)
    reader = _reader([_Msg(12, b"later")])
    with pytest.raises(SnapshotMissing, match="compacted away"):
        reader.delta(REF, "c")


def test_the_snapshot_read_waits_out_a_passing_error_too(monkeypatch):
    monkeypatch.setattr(chunking, "kind_of", lambda v: "snapshot")
    monkeypatch.setattr("streams.snapshot_reader._same_cluster", lambda msg, c: True)
    reader = _reader([_Msg(9, error=_Error(fatal=False)), _Msg(9, b"doc")])
    assert reader(REF, "c") == b"doc"


def test_a_snapshot_read_ended_by_a_fatal_error_names_it(monkeypatch):
    monkeypatch.setattr(chunking, "kind_of", lambda v: "snapshot")
    reader = _reader([_Msg(9, error=_Error(fatal=True)), _Msg(9, b"doc")])
    with pytest.raises(SnapshotMissing, match="at or after .*last error Broker: Not leader"):
        reader(REF, "c")
