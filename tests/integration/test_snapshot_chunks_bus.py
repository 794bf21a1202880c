"""A chunked snapshot read back from the real bus (streams/snapshot_reader.py): its chunks
are found by digest among other clusters' records and poison, however far back; one that
is missing makes the snapshot missing, never half a snapshot."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from bench import synthetic
from core.bus import ensure_topics, producer
from schemas import snapshot_chunks as chunking
from schemas.snapshot import parse_snapshot
from streams.detect_types import SnapshotRef
from streams.snapshot_reader import SnapshotMissing, SnapshotReader

pytestmark = pytest.mark.integration


def _bus(sandbox, prefix: str):
    from core.config import load

    config = load(path=None, env={"SELFHEAL_SANDBOX_DIR": sandbox.work_dir,
                                  "SELFHEAL_BUS_TOPIC_PREFIX": prefix})
    ensure_topics(config)
    return config


def _send(config, records: list[tuple[bytes | None, bytes | None]]) -> list[int]:
    """Produce (key, value) records in order to the snapshot topic; their offsets."""
    offsets: list[int] = []
    errors: list[str] = []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        offsets.append(msg.offset())

    send = producer(config)
    for key, value in records:
        send.produce(config.topic("cluster-snapshots"), value, key, on_delivery=delivered)
    assert send.flush(30) == 0
    assert not errors
    return offsets


def _snapshot(cluster: str, seed: int = 0) -> dict:
    return {**synthetic.generate(brokers=6, partitions=300, seed=seed), "cluster_id": cluster}


def test_chunks_among_other_records_and_far_back_are_found_and_assembled(sandbox):
    config = _bus(sandbox, f"chk{uuid.uuid4().hex[:6]}.")
    doc = _snapshot("c1")
    chunks, manifest = chunking.split(doc, "snap-1", 8 << 10)
    other, _ = chunking.split(_snapshot("c2", seed=3), "snap-2", 8 << 10)
    assert len(chunks) > 4
    # (the topic is compacted: the broker refuses an unkeyed record, so none is here)
    noise = [(b"c2", b"\xff\xfe"), (b"c1", None), (b"c1/chunk/0", b"[" * 1000)]
    records = ([(chunking.chunk_key("c1", 0), chunks[0])]
               + [(b"c2/chunk/0", c) for c in other] * 10  # far more than the first look
               + noise
               + [(chunking.chunk_key("c1", s), c) for s, c in enumerate(chunks) if s]
               + [(b"c1", manifest)])
    offsets = _send(config, records)
    reader = SnapshotReader(config, timeout=30)
    try:
        value = reader(SnapshotRef(config.topic("cluster-snapshots"), 0, offsets[-1], 0), "c1")
    finally:
        reader.close()
    assert msgspec.json.decode(value) == msgspec.json.decode(msgspec.json.encode(doc))
    assert parse_snapshot(value).cluster_id == "c1"


def test_a_snapshot_missing_a_chunk_is_missing_and_says_which(sandbox):
    config = _bus(sandbox, f"chk{uuid.uuid4().hex[:6]}.")
    chunks, manifest = chunking.split(_snapshot("c1"), "snap-1", 8 << 10)
    tampered = chunks[2].replace(b'"leader":', b'"leader":"x","y":', 1)
    records = [(chunking.chunk_key("c1", s), tampered if s == 2 else c)
               for s, c in enumerate(chunks)] + [(b"c1", manifest)]
    offsets = _send(config, records)
    reader = SnapshotReader(config, timeout=20)
    try:
        with pytest.raises(SnapshotMissing, match=rf"incomplete: chunk 2 of {len(chunks)} "):
            reader(SnapshotRef(config.topic("cluster-snapshots"), 0, offsets[-1], 0), "c1")
    finally:
        reader.close()


def test_the_latest_snapshot_on_the_bus_is_written_whole_for_the_planners(sandbox, tmp_path):
    from tests.conftest import run_cli

    prefix = f"chk{uuid.uuid4().hex[:6]}."
    config = _bus(sandbox, prefix)
    old = _snapshot(sandbox.cluster_id, seed=1)
    new = {**_snapshot(sandbox.cluster_id, seed=2), "taken_at": "2026-11-23T00:00:00Z"}
    records = []
    for name, doc in (("old", old), ("new", new)):
        chunks, manifest = chunking.split(doc, name, 8 << 10)
        records += [(chunking.chunk_key(sandbox.cluster_id, s), c) for s, c in enumerate(chunks)]
        records.append((sandbox.cluster_id.encode(), manifest))
    _send(config, records)
    out = tmp_path / "latest.json"
    env_prefix = ["--config", str(_config_file(tmp_path, sandbox, prefix))]
    done = run_cli([*env_prefix, "collect", "snapshots", "--from-bus", "--out", str(out)],
                   sandbox, timeout=120)
    assert done.returncode == 0, done.stderr
    assert msgspec.json.decode(out.read_bytes()) == msgspec.json.decode(
        msgspec.json.encode(new))
    assert f"taken at 2026-11-23T00:00:00Z (from {prefix}cluster-snapshots)" in done.stderr
    plan = run_cli([*env_prefix, "plan", "offline", "--snapshot", str(out)], sandbox)
    assert plan.returncode == 0, plan.stderr

    alone = run_cli([*env_prefix, "collect", "snapshots", "--from-bus"], sandbox)
    assert alone.returncode == 2 and "--from-bus goes with --out FILE" in alone.stderr


def _config_file(tmp_path, sandbox, prefix: str):
    path = tmp_path / "selfheal.toml"
    path.write_text(f'[bus]\ntopic_prefix = "{prefix}"\n')
    return path
