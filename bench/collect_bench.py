"""Collector figures: exporter text -> wire records, per broker size.

A broker's scrape grows with its partitions (one kafka_log_size sample each), so this
times what `selfheal collect metrics` does with one scrape before producing: parse the
text with prometheus-client's parser, build the records, encode them (the first of each
metric validated against the schema), and compares with validating every record.
"""

from __future__ import annotations

import time

from core import clock
from streams.collect.exporter import parse_exporter_text, wire_values


def exporter_text(partitions: int, dirs: int = 4) -> str:
    """What a broker with ``partitions`` replicas over ``dirs`` log dirs exports."""
    lines = ["# TYPE kafka_log_log_directory_offline gauge"]
    lines += [f'kafka_log_log_directory_offline{{log_dir="/data/d{d}"}} 0.0'
              for d in range(dirs)]
    lines += ["# TYPE kafka_log_offline_log_directory_count gauge",
              "kafka_log_offline_log_directory_count 0.0",
              "# TYPE kafka_server_under_replicated_partitions gauge",
              "kafka_server_under_replicated_partitions 0.0",
              "# TYPE kafka_log_size gauge"]
    lines += [f'kafka_log_size{{partition="{p % 50}",topic="topic-{p // 50}"}} {p * 1024}.0'
              for p in range(partitions)]
    # JVM noise the collector reads past
    lines += ["# TYPE jvm_memory_bytes_used gauge"]
    lines += [f'jvm_memory_bytes_used{{area="a{i}"}} 1.0' for i in range(50)]
    return "\n".join(lines) + "\n"


def _best(func, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    print("collect metrics: one scrape -> wire records (best of 5)")
    print(f"  {'samples':>8}{'parse':>10}{'+encode':>10}{'records/s':>12}"
          f"{'all validated':>16}")
    for partitions in (100, 1_000, 10_000):
        text = exporter_text(partitions)
        now = clock.text()

        def parse(text: str = text, now: str = now) -> list:
            return parse_exporter_text(text, "bench", 1, "rack1", now).records

        records = parse()
        parse_s = _best(parse)
        total_s = _best(lambda: wire_values(parse()))
        strict_s = _best(lambda: [r.to_json() for r in parse()], repeat=2)
        print(f"  {len(records):>8}{parse_s * 1e3:>8.1f}ms{total_s * 1e3:>8.1f}ms"
              f"{len(records) / total_s:>12,.0f}{strict_s * 1e3:>14.1f}ms")


if __name__ == "__main__":
    main()
