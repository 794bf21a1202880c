"""Remediation: the actions kafka-selfheal proposed and ran, approvals waiting, the
executor's progress and health, and what holds it back (the circuit breaker)."""

from __future__ import annotations

from grafanalib.core import Dashboard

from dashboards.panels import CLUSTER, Panel, alert_annotation, dashboard, q

UID = "selfheal-remediation"
C = CLUSTER
SERVE = f'job="selfheal",process="serve",{C}'


def panels() -> list[Panel]:
    """Every panel, in layout order."""
    return [
        Panel("Awaiting approval",
              (q(f'max(selfheal_actions{{state="awaiting_approval",{C}}}) or vector(0)'),),
              kind="stat", width=6, height=4),
        Panel("Executing",
              (q(f'max(selfheal_actions{{state=~"approved|executing|verifying",{C}}}) '
                 "or vector(0)"),), kind="stat", width=6, height=4),
        Panel("Open operator pages", (q(f"max(selfheal_operator_pages{{{C}}})"),),
              kind="stat", width=6, height=4),
        Panel("Active executor", (q(f"sum(selfheal_executor_leader{{{C}}})"),), kind="stat",
              width=6, height=4, description="Exactly 1 serve holds the executor lock"),
        Panel("Actions by state",
              (q(f"max by (state) (selfheal_actions{{{C}}})", "{{state}}"),)),
        Panel("Actions proposed by type",
              (q(f"sum by (type) (increase(selfheal_stream_actions_total{{{C}}}"
                 "[$__rate_interval]))", "{{type}}"),)),
        Panel("Reassignments in flight",
              (q(f"cluster:kafka_reassigning_partitions:sum{{{C}}}", "partitions"),)),
        Panel("Reassignment traffic",
              (q(f"sum(broker:kafka_reassignment_bytes_in:rate1m{{{C}}})", "in"),
               q(f"sum(broker:kafka_reassignment_bytes_out:rate1m{{{C}}})", "out")),
              unit="Bps"),
        Panel("Executor pass duration",
              (q(f"max by (instance) (selfheal_executor_tick_seconds{{{SERVE}}})",
                 "{{instance}}"),), unit="s"),
        Panel("Executor errors (retried cluster calls)",
              (q(f"sum by (instance) (rate(selfheal_executor_errors_total{{{SERVE}}}"
                 "[$__rate_interval]))", "{{instance}}"),), unit="ops"),
        Panel("Circuit breaker: offline dirs share and brokers down",
              (q(f"max(selfheal:log_dirs_offline:ratio{{{C}}})", "offline dirs share"),
               q(f"count(selfheal_broker_alive{{{C}}} == 0) or vector(0)", "brokers down")),
              fault=" > 0",
              description="The breaker holds every action above 25% of dirs or 1 broker "
              "(policy [breaker] defaults)"),
        Panel("Stalled actions (no bytes moved for the stall time)",
              (q(f"max(selfheal_actions_stalled{{{SERVE}}}) or vector(0)", "stalled"),),
              width=12, description="Executing, targets alive, nothing copied for [serve] "
              "stall_seconds: a source gone or a throttle at nothing; the audit says since "
              "when"),
        Panel("Action records read by serve",
              (q(f"sum by (outcome) (rate(selfheal_intake_records_total{{{SERVE}}}"
                 "[$__rate_interval]))", "{{outcome}}"),), unit="ops"),
    ]


def build() -> Dashboard:
    return dashboard(
        "kafka-selfheal remediation", UID,
        "Actions by type and state, approvals, executor progress; kafka-selfheal", panels(),
        annotations=[
            alert_annotation("Alerts", f'ALERTS{{alertstate="firing",{C}}}', "red"),
            alert_annotation("Actions succeeded",
                             f'changes(selfheal_actions{{state="succeeded",{C}}}[1m]) > 0',
                             "green"),
        ],
    )
