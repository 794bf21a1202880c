"""What every kafka-selfheal dashboard shares: the variables, the panel shapes, the layout.

Each dashboard is a grafanalib `Dashboard` with two variables: ``datasource`` (any
Prometheus) and ``cluster`` (the ``cluster`` target label, multi-select). Every query
filters on ``cluster=~"$cluster"`` and names its data source through the variable, so one
JSON file serves every Grafana and every cluster. Panels are laid out left to right in
the order they are given; a panel's id is its position, so the JSON is stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grafanalib import core as g

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
CLUSTER = 'cluster=~"$cluster"'
GRID_WIDTH = 24


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    """One panel: a title, its queries, and how to draw them.

    ``fault`` is a comparison the first query meets while a log dir is failed (" > 0",
    " == 0"): the integration test fails a dir on the sandbox and asserts that
    ``(<query>)<fault>`` returns data for every panel that names one.
    """

    title: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"  # timeseries | stat | state | table
    unit: str = "short"
    description: str = ""
    width: int = 12
    height: int = 8
    fault: str = ""
    mappings: tuple[dict, ...] = field(default_factory=tuple)


def q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


def _targets(panel: Panel) -> list[g.Target]:
    ref = "ABCDEFGHIJ"
    return [
        g.Target(expr=query.expr, legendFormat=query.legend, refId=ref[i],
                 datasource=DATASOURCE, instant=panel.kind in ("stat", "table"))
        for i, query in enumerate(panel.queries)
    ]


def _grafana_panel(panel: Panel, panel_id: int, pos: g.GridPos) -> g.Panel:
    common = {"title": panel.title, "dataSource": DATASOURCE, "targets": _targets(panel),
              "gridPos": pos, "id": panel_id, "description": panel.description or None}
    if panel.kind == "stat":
        return g.Stat(**common, format=panel.unit, reduceCalc="lastNotNull", graphMode="area",
                      mappings=list(panel.mappings))
    if panel.kind == "state":
        return g.StateTimeline(**common, mappings=list(panel.mappings))
    if panel.kind == "table":
        return g.Table(**common, unit=panel.unit)
    return g.TimeSeries(**common, unit=panel.unit)


def layout(panels: list[Panel]) -> list[g.Panel]:
    """Grafana panels, placed in rows of up to 24 units, in the given order."""
    out: list[g.Panel] = []
    x = y = row_height = 0
    for i, panel in enumerate(panels, start=1):
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        out.append(_grafana_panel(panel, i, g.GridPos(h=panel.height, w=panel.width, x=x, y=y)))
        x += panel.width
        row_height = max(row_height, panel.height)
    return out


def templating() -> g.Templating:
    return g.Templating(list=[
        g.Template(name="datasource", label="Data source", query="prometheus",
                   type="datasource", default="Prometheus"),
        g.Template(name="cluster", label="Cluster", dataSource=DATASOURCE,
                   query='label_values(up{job=~"kafka|selfheal"}, cluster)',
                   includeAll=True, multi=True, allValue=".*", refresh=2, sort=1),
    ])


def dashboard(title: str, uid: str, description: str, panels: list[Panel],
              annotations: list[dict] | None = None) -> g.Dashboard:
    """A dashboard with the shared variables, tags and refresh."""
    return g.Dashboard(
        title=title, uid=uid, description=description, tags=["kafka", "kafka-selfheal"],
        panels=layout(panels), templating=templating(), refresh="10s",
        time=g.Time("now-1h", "now"), timezone="browser",
        annotations=g.Annotations(list=annotations or []), schemaVersion=37,
    )


def alert_annotation(name: str, expr: str, color: str) -> dict:
    """An annotation drawn where ``expr`` (a Prometheus query) has a value."""
    return {"name": name, "datasource": DATASOURCE, "enable": True, "iconColor": color,
            "expr": expr, "step": "10s", "titleFormat": "{{alertname}}",
            "textFormat": "{{broker}} {{log_dir}}", "useValueForTime": False}


ONLINE_OFFLINE = (
    {"type": "value", "options": {
        "0": {"text": "online", "color": "green", "index": 0},
        "1": {"text": "OFFLINE", "color": "red", "index": 1}}},
)
OFFLINE_ONLINE = (
    {"type": "value", "options": {
        "1": {"text": "online", "color": "green", "index": 0},
        "0": {"text": "OFFLINE", "color": "red", "index": 1}}},
)
