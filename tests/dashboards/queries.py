"""The dashboards' queries as Grafana would send them, run on a real Prometheus."""

from __future__ import annotations

from dashboards import build
from sandbox import prometheus


def concrete(expr: str, cluster: str) -> str:
    """A panel's query as Grafana would send it for one cluster and a 2 s scrape."""
    return expr.replace("$cluster", cluster).replace("$__rate_interval", "1m")


def run_panels(prom: prometheus.Prometheus, cluster: str
               ) -> tuple[dict[tuple[str, str], int], list[str]]:
    """Every panel's every query: ``{(dashboard, title): series returned}`` and errors."""
    returned: dict[tuple[str, str], int] = {}
    errors = []
    for name, module in build.MODULES.items():
        for panel in module.panels():
            count = 0
            for query in panel.queries:
                try:
                    count += len(prom.query(concrete(query.expr, cluster)))
                except prometheus.PrometheusError as exc:
                    errors.append(f"{name} / {panel.title}: {query.expr}: {exc}")
            returned[(name, panel.title)] = count
    return returned, errors
