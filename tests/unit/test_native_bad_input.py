"""Bad snapshots through the compiled path and the reference (issue 33's acceptance):
truncated JSON, a 60,000-deep array, a wrong type deep inside, a replica on a broker the
snapshot does not list, a NaN size, an id past 64 bits, a 2 GB file. Each is refused
with the same line on both paths (SELFHEAL_NATIVE=1 and 0), by the whole CLI in a fresh
process (`plan leaders`, which reads through the compiled reader into columns): exit
code 2, no signal, the line on stderr, and a peak RSS that shows nothing was read whole.
The compiled reader itself refuses each (None), so the walker words it."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schemas import snapshot
from schemas.snapshot import SnapshotError, load_snapshot
from schemas.snapshot_columns import read_columns
from tests.unit.plan_snapshots import random_cluster

# Python with the planners imported peaks near 60-90 MiB; a bad snapshot of ~100 KiB
# (or one refused unread) must not take it far past that.
PEAK_BOUND = 256 << 20


def cluster() -> dict[str, Any]:
    return random_cluster(random.Random(5), brokers=6, racks=2, partitions=300, max_rf=3)


def edited(change: Any) -> str:
    document = cluster()
    change(document)
    return json.dumps(document)


def deep_inside(document: dict[str, Any], value: Any) -> None:
    document["partitions"][250]["replicas"][0]["size_bytes"] = value


def unknown_broker(document: dict[str, Any]) -> None:
    document["partitions"][250]["replicas"][0]["broker"] = 999


def nested(text: str) -> str:
    return text.replace('"partitions": [', '"partitions": [' + "[" * 60_000 + "]" * 60_000 + ",")


CASES = {
    "truncated": (lambda: json.dumps(cluster())[:40_000], "$: invalid JSON at line 1 column"),
    "60,000 deep": (lambda: nested(json.dumps(cluster())), "$: nested too deep to be a snapshot"),
    "wrong type deep inside": (
        lambda: edited(lambda d: deep_inside(d, "12")),
        'partitions[250].replicas[0].size_bytes: expected an integer, got "12"',
    ),
    "unknown broker": (
        lambda: edited(unknown_broker),
        "partitions[250].replicas[0].broker: broker 999 is not in brokers",
    ),
    "leader past 64 bits": (
        lambda: edited(lambda d: d["partitions"][250].update(leader=2**70)),
        "partitions[250].leader: broker 1180591620717411303424 is not a replica of t0-50",
    ),
    "replica past 64 bits": (
        lambda: edited(lambda d: d["partitions"][250]["replicas"][0].update(broker=2**70)),
        "partitions[250].replicas[0].broker: broker 1180591620717411303424 is not in brokers",
    ),
    "NaN size": (
        lambda: edited(lambda d: deep_inside(d, float("nan"))),
        "partitions[250].replicas[0].size_bytes: expected an integer, got NaN",
    ),
}


# The CLI, saying its own peak RSS on the way out: VmHWM is the process's since its exec
# (wait4's figure would start from this test process's, copied at fork).
CLI = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    status = open('/proc/self/status').read()\n"
    "    print('peak-kib', status.split('VmHWM:')[1].split()[0], file=sys.stderr)\n"
    "atexit.register(peak)\n"
    "sys.argv[0] = 'selfheal'\n"
    "runpy.run_module('selfheal.cli', run_name='__main__')\n"
)


def refusal(path: Path, native: str) -> tuple[str, int, int]:
    """(stderr, exit code, peak RSS bytes) of `selfheal plan leaders` on `path`."""
    env = {**os.environ, "SELFHEAL_NATIVE": native}
    command = [sys.executable, "-c", CLI, "plan", "leaders", "--snapshot", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    err, _, peak = done.stderr.rstrip().rpartition("peak-kib ")
    return err, done.returncode, int(peak) * 1024


def both_refuse(path: Path, expected: str) -> None:
    seen = []
    for native in ("1", "0"):
        err, code, peak = refusal(path, native)
        assert code == 2, err  # refused, not a crash (a signal is negative)
        assert f"selfheal plan: {path}: {expected}" in err
        assert peak < PEAK_BOUND
        seen.append(err)
    assert seen[0] == seen[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_snapshot_is_refused_alike_by_both_paths(case, tmp_path, monkeypatch):
    make, expected = CASES[case]
    text = make()
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    assert read_columns(text.encode()) is None
    messages = []
    for native, columns in (("1", True), ("1", False), ("0", False)):
        monkeypatch.setenv("SELFHEAL_NATIVE", native)
        with pytest.raises(SnapshotError) as refused:
            snapshot.parse_snapshot(text.encode() if columns else text, columns)
        messages.append(str(refused.value))
    assert messages[0] == messages[1] == messages[2]
    assert messages[0].startswith(expected)
    path = tmp_path / "bad.json"
    path.write_text(text)
    both_refuse(path, expected)


def test_a_2_gb_file_is_refused_unread(tmp_path):
    # Sparse: 2 GB long, no block written (the disk needs none of it).
    assert shutil.disk_usage(tmp_path).free > 1 << 30
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(2_000_000_000)
    assert path.stat().st_blocks == 0  # nothing on disk: truly sparse
    both_refuse(path, "$: 2,000,000,000 bytes or more, past the 1,073,741,824 bytes a snapshot")


def test_a_stream_past_the_limit_is_refused_after_reading_one_byte_more(monkeypatch):
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 1000)
    asked: list[int] = []

    class Endless(io.RawIOBase):
        def read(self, n: int = -1) -> bytes:
            asked.append(n)
            return b" " * n

    with pytest.raises(SnapshotError, match=r"^\$: 1,001 bytes or more, past the 1,000 bytes"):
        load_snapshot(Endless())
    assert asked == [1001]
