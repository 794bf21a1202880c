"""The bench's synthetic cluster, small: valid by the schema, and every planner's
guarantees hold on it through the real CLI."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import jsonschema

from bench import synthetic
from core.model import ClusterModel
from schemas.snapshot import snapshot_from_dict
from schemas.snapshot_types import SCHEMA_PATH

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")
SMALL = {"brokers": 30, "partitions": 600, "failed_dir_every": 10, "dead_brokers": 1, "racks": 5}


def plan(command: str, path: Path, *extra: str) -> dict:
    done = subprocess.run(
        [SELFHEAL, "plan", command, "--snapshot", str(path), *extra],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_synthetic_cluster_is_a_valid_snapshot():
    doc = synthetic.generate(**SMALL)
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    m = ClusterModel(snapshot_from_dict(doc))
    assert len(m.offline_dirs) == 3 and len(m.alive) == 29
    assert m.partitions_with_offline_replicas


def test_every_planner_keeps_its_guarantees_on_the_synthetic_cluster(tmp_path):
    path = synthetic.write(tmp_path / "s.json", **SMALL)
    m = ClusterModel.load(path)
    index = m.partition_index()

    offline = plan("offline", path)
    repaired = {(p["topic"], p["partition"]) for p in offline["partitions"]}
    reported = {(u["topic"], u["partition"]) for u in offline["unrecoverable"]}
    broken = {
        (m.partitions[i].topic, m.partitions[i].partition)
        for i in m.partitions_with_offline_replicas
    }
    assert repaired | reported == broken
    for p in offline["partitions"]:
        assert len(set(p["replicas"])) == len(
            m.partitions[index[(p["topic"], p["partition"])]].replicas
        )
        assert all(b in m.alive for b in p["replicas"])
        assert len({m.rack_of[b] for b in p["replicas"]}) == 3  # RF 3 over 5 racks

    disks = plan("disks", path)
    assert {s["broker"] for s in disks["skipped"]} >= m.brokers_with_offline_dir
    for p in disks["partitions"]:
        assert p["replicas"] == [
            r.broker for r in m.partitions[index[(p["topic"], p["partition"])]].replicas
        ]

    leaders = plan("leaders", path)
    elected = {(e["topic"], e["partition"]) for e in leaders["election"]["partitions"]}
    first = {
        (p["topic"], p["partition"]): p["replicas"][0]
        for p in leaders["reassignment"]["partitions"]
    }
    after = Counter(
        (
            first.get((p.topic, p.partition), p.replicas[0].broker)
            if (p.topic, p.partition) in elected
            else p.leader
        )
        for p in m.partitions
    )
    counts = [after[b] for b in m.alive]
    assert max(counts) - min(counts) <= 1
