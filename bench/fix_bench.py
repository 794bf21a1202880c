"""A failure's fix at fleet size, in process (no Spark): what the job's driver spends.

The reference fleet (bench/synthetic.FULL: 1,000 brokers, 300,000 replicas); one dir of
the second broker fails and its delta is made as the collector makes it. Each path runs
in a child process of its own (`SELFHEAL_NATIVE=1`: the kept snapshot is the compiled
core's columns, the delta applied in the core; `0`: records, the delta applied in
Python): CPU s to decode the kept snapshot (the keeper's read-ahead, off the batches'
path), the memory it holds (RSS growth), CPU s of `Proposer.actions` for the failure
(the kept snapshot + the delta, the model, the plan), and whether both paths give the
same actions. Figures are printed, never asserted. `python -m bench.fix_bench`.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import statistics
import time
from typing import Any

ROUNDS = 3


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _run(native: str, raw: bytes, delta: bytes, broker: int, path: str, out: Any) -> None:
    os.environ["SELFHEAL_NATIVE"] = native
    from streams.detect_types import FIX_OFFLINE, LOGDIR_EVENT, Decision, SnapshotRef
    from streams.keeper import decode
    from streams.propose import Proposer

    ref = SnapshotRef("bench.cluster-snapshots", 0, 1, 0)
    decision = Decision(type=FIX_OFFLINE, cluster_id="bench", event_time=0,
                        trigger_kind=LOGDIR_EVENT, broker=broker, log_dir=path,
                        snapshot=ref, offline_dirs=((broker, path),),
                        delta=SnapshotRef("bench.cluster-snapshots", 0, 2, 1),
                        reason="bench")
    decodes, plans, held = [], [], []
    digest = ""
    for _ in range(ROUNDS):
        before, started = _rss_mib(), time.process_time()
        kept = decode(raw)
        decodes.append(time.process_time() - started)
        held.append(_rss_mib() - before)
        proposer = Proposer(lambda r, c: raw, read_delta=lambda r, c: delta)
        proposer.keeper._hold("bench", ref, kept)  # as the read-ahead leaves it
        started = time.process_time()
        actions = proposer.actions(decision, "2026-11-29T00:00:00Z")
        plans.append(time.process_time() - started)
        digest = hashlib.sha256(json.dumps([a.to_dict() for a in actions]).encode()).hexdigest()
        del kept, proposer, actions
    # The first round's growth: later rounds reuse what the last one freed.
    out.put((statistics.median(decodes), held[0], statistics.median(plans),
             digest, type(decode(raw).partitions).__name__))


def main() -> None:
    import msgspec

    from bench import synthetic
    from schemas.snapshot_delta import make_delta

    base = synthetic.generate(**synthetic.FULL, failed_dir_every=0, seed=7)
    broker = base["brokers"][1]["id"]
    path = base["brokers"][1]["log_dirs"][1]["path"]
    after = {**base, "taken_at": "2026-11-29T00:00:01Z", "brokers": [
        {**b, "log_dirs": [{**d, "online": False, "total_bytes": None, "usable_bytes": None}
                           if d["path"] == path else d for d in b["log_dirs"]]}
        if b["id"] == broker else b for b in base["brokers"]]}
    raw = msgspec.json.encode(base)
    delta = msgspec.json.encode(make_delta(after, {broker}, base["taken_at"], "bench"))
    replicas = sum(len(p["replicas"]) for p in base["partitions"])
    del base, after
    print(f"fix at fleet size: {replicas:,} replicas, snapshot {len(raw) / 1e6:.1f} MB, delta "
          f"{len(delta) / 1e6:.2f} MB; load {os.getloadavg()[0]:.1f}; median of {ROUNDS}")
    ctx = multiprocessing.get_context("spawn")
    digests = []
    for native, label in (("1", "native (columns)"), ("0", "reference (records)")):
        out: Any = ctx.Queue()
        child = ctx.Process(target=_run, args=(native, raw, delta, broker, path, out))
        child.start()
        decoded, held, plan, digest, kind = out.get(timeout=600)
        child.join(60)
        digests.append(digest)
        print(f"  {label}: kept as {kind}; decode {decoded:.2f} CPU s, holds {held:.0f} MiB; "
              f"fix planned {plan:.2f} CPU s")
    print(f"  actions identical on both paths: {digests[0] == digests[1]}; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
