"""Pipeline: the collectors (age of the last good round, errors, records produced), the
detection job (input rate, batch duration, dead letters) and fault -> action latency."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.panels import CLUSTER, Panel, dashboard, q

UID = "selfheal-pipeline"
C = CLUSTER
RATE = "[$__rate_interval]"


def panels() -> list[Panel]:
    """Every panel, in layout order."""
    return [
        Panel("selfheal processes up",
              (q(f'max by (process) (up{{job="selfheal",{C}}})', "{{process}}"),),
              kind="state", width=24, height=5),
        Panel("Collector: seconds since the last good round",
              (q(f"selfheal:collect_last_success_age:seconds{{{C}}}", "{{collector}}"),),
              unit="s", description="SelfhealPipelineStalled fires above 60 s"),
        Panel("Collector rounds by result",
              (q(f"sum by (collector, result) (rate(selfheal_collect_scrapes_total{{{C}}}"
                 f"{RATE}))", "{{collector}} {{result}}"),), unit="ops"),
        Panel("Collector errors by reason",
              (q(f"sum by (collector, reason) (rate(selfheal_collect_errors_total{{{C}}}"
                 f"{RATE}))", "{{collector}} {{reason}}"),), unit="ops"),
        Panel("Records produced by topic",
              (q(f"sum by (topic) (rate(selfheal_collect_records_produced_total{{{C}}}"
                 f"{RATE}))", "{{topic}}"),), unit="ops"),
        Panel("Exporter targets up",
              (q(f"max by (target) (selfheal_collect_target_up{{{C}}})", "{{target}}"),)),
        Panel("Collector round duration (p95)",
              (q(f"histogram_quantile(0.95, sum by (collector, le) (rate("
                 f"selfheal_collect_scrape_duration_seconds_bucket{{{C}}}{RATE})))",
                 "{{collector}}"),), unit="s"),
        Panel("Job input rate",
              (q(f"sum(selfheal_stream_input_rows_per_second{{{C}}})", "input rows/s"),
               q(f"sum(selfheal_stream_processed_rows_per_second{{{C}}})",
                 "processed rows/s")), unit="ops"),
        Panel("Job micro-batch duration",
              (q(f"histogram_quantile(0.5, sum by (le) (rate("
                 f"selfheal_stream_batch_duration_seconds_bucket{{{C}}}{RATE})))", "p50"),
               q(f"histogram_quantile(0.99, sum by (le) (rate("
                 f"selfheal_stream_batch_duration_seconds_bucket{{{C}}}{RATE})))", "p99")),
              unit="s"),
        Panel("Job time by micro-batch phase",
              (q(f"sum by (phase) (rate(selfheal_stream_batch_phase_seconds_total{{{C}}}"
                 f"{RATE}))", "{{phase}}"),), unit="percentunit",
              description="Share of the job's time in each phase of its micro-batches. "
                          "latestOffset: waiting for the bus's end offsets; addBatch: "
                          "the batch itself (runbook SelfhealPipelineStalled)"),
        Panel("Dead letters by source topic",
              (q(f"selfheal:stream_dead_letters:rate5m{{{C}}}", "{{topic}}"),), unit="ops"),
        Panel("Fault -> action latency",
              (q(f"selfheal:stream_detection_latency_seconds:p50{{{C}}}", "p50 {{type}}"),
               q(f"selfheal:stream_detection_latency_seconds:p99{{{C}}}", "p99 {{type}}")),
              unit="s", description="Action creation time minus its trigger's event time"),
        Panel("Late rows dropped and state size",
              (q(f"sum(rate(selfheal_stream_rows_dropped_by_watermark_total{{{C}}}{RATE}))",
                 "dropped late rows/s"),
               q(f"sum(selfheal_stream_state_rows{{{C}}})", "state rows")),
              description="Dropped late rows should stay 0"),
    ]


def build() -> Dashboard:
    return dashboard("kafka-selfheal pipeline", UID,
                     "Collectors, the detection job, dead letters, detection latency; "
                     "kafka-selfheal", panels())
