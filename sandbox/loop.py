"""The whole self-healing loop on the sandbox, as real processes: the three collectors,
the streaming job and `selfheal serve`, each a `selfheal` command started detached with
one shared configuration file (on a secured sandbox, that file plus the piece's own
[cluster.security]: each runs as its principal, with only its ACLs), and stopped by PID.

The demo and the end-to-end tests drive it; an operator runs the same commands by hand
(`selfheal --config selfheal.toml collect zk`, ...). Every port is picked free, so two
loops never collide.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox import grants, jvm, processes, prometheus
from sandbox.state import SandboxState

# name -> the `selfheal` sub-command that runs it
PIECES: dict[str, tuple[str, ...]] = {
    "collect-metrics": ("collect", "metrics"),
    "collect-zk": ("collect", "zk"),
    "collect-snapshots": ("collect", "snapshots"),
    "stream": ("stream",),
    "serve": ("serve",),
}


def pieces_for(state: SandboxState) -> tuple[str, ...]:
    """Every piece that applies to the sandbox: no ZooKeeper watcher in KRaft mode."""
    return tuple(n for n in PIECES if not (n == "collect-zk" and state.mode == "kraft"))


# What a piece whose metrics port is 0 prints once it picked one (collectors, the job).
_METRICS_AT = re.compile(r"\[(?:collect \w+|stream)\] (?:own metrics at|metrics on) "
                         r"http://([\w.:-]+)/metrics")


class LoopError(RuntimeError):
    """A piece of the loop did not start or died; the message carries its log's tail."""


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))  # a TOML basic string is a JSON string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} to TOML")


def render_toml(top: Mapping[str, Any], sections: Mapping[str, Mapping[str, Any]]) -> str:
    """A flat TOML document: top-level keys, then one table per section."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in top.items() if v is not None]
    for name, values in sections.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"


SCRAPE_INTERVAL_S = 10.0  # the loop's broker-metrics scrape (loop_config says why)


def loop_config(state: SandboxState, work_dir: Path,
                overrides: Mapping[str, Mapping[str, Any]] | None = None,
                policy: str | None = None) -> dict[str, dict[str, Any]]:
    """The configuration the loop's processes share: the sandbox, quick intervals for a
    demo, state under ``work_dir``, free ports, fresh secrets."""
    sections: dict[str, dict[str, Any]] = {
        "cluster": {
            "bootstrap_servers": state.bootstrap_servers,
            "zookeeper_connect": state.zookeeper_connect,
            "mode": state.mode,
            "cluster_id": state.cluster_id,
            # <broker id>=<url>: every sandbox broker runs on 127.0.0.1, so the host alone
            # cannot say whose exporter a URL is.
            "exporter_urls": [f"{b.node_id}={b.exporter_url}" for b in state.brokers
                              if b.exporter_url],
            "action_signing_key": state.action_signing_key,
        },
        # Small chunks: the sandbox's snapshots (tens of KB) cross the bus in several, as
        # a fleet's do, so every loop test reads chunked snapshots. A scrape every 10 s
        # (the product's default), not 2 or 5: the job runs a micro-batch whenever records
        # came, each ~2 CPU s however few, so on a quiet sandbox the job took 1.0 core at a
        # 2 s scrape, 0.5 at 5 s, 0.24 at 10 s, and two loops run at once in `make test`;
        # a failed dir still reaches the job at once (its ZooKeeper event, the snapshot
        # that triggers, the snapshot collector's 2 s log-dir probe).
        "collect": {"scrape_interval_seconds": SCRAPE_INTERVAL_S,
                    "snapshot_interval_seconds": 15.0, "snapshot_chunk_bytes": 8192},
        # A fresh checkpoint reads its topics from the start: the snapshot the collector
        # takes while Spark is still starting (~20 s) is not missed. A micro-batch every
        # 2 s, not 1: on a 2-core laptop each batch costs about a second of CPU, and at
        # 1 s the job took 1.5 cores of a quiet sandbox (1.1 at 2 s) for ~1 s of latency.
        "stream": {"checkpoint_dir": work_dir / "checkpoints", "trigger_interval_seconds": 2.0,
                   "starting_offsets": "earliest"},
        "serve": {
            "sqlite_path": work_dir / "actions.sqlite",
            "http_port": processes.free_port(),
            "link_secret": secrets.token_hex(32),
            "api_token": secrets.token_hex(16),
        },
    }
    for section, values in (overrides or {}).items():
        sections.setdefault(section, {}).update(values)
    if policy is not None:
        sections[""] = {"policy": policy}
    return sections


@dataclasses.dataclass
class Piece:
    name: str
    argv: list[str]
    log: Path
    pid: int | None = None

    @property
    def marker(self) -> str:
        # "--config <path> <sub-command...>" is unique per loop (options may follow it)
        at = self.argv.index("--config")
        return " ".join(self.argv[at:at + 2 + len(PIECES[self.name])])

    def running(self) -> bool:
        return processes.is_running(self.pid, self.marker)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log yet)"


@dataclasses.dataclass
class Loop:
    work_dir: Path
    config_path: Path
    config: dict[str, dict[str, Any]]
    pieces: dict[str, Piece]

    def start(self, name: str) -> Piece:
        piece = self.pieces[name]
        if piece.running():
            return piece
        # the job's Spark driver maps the class-data archive of its kind (sandbox/cds.py)
        env = jvm.small_machine_env(os.environ, share_classes=name == "stream")
        piece.pid = processes.spawn(piece.argv, piece.log, self.work_dir, env=env)
        return piece

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 60.0) -> bool:
        piece = self.pieces[name]
        return processes.stop(piece.pid, piece.marker, timeout=timeout, sig=sig)

    def restart(self, name: str) -> Piece:
        self.stop(name)
        return self.start(name)

    def stop_all(self, timeout: float = 60.0) -> None:
        """Every piece at once: SIGTERM to all, then each waited for (SIGKILL after
        ``timeout`` s). They share only the bus, so none waits on another to stop; one
        after the other, the job's and serve's clean stops added up in every test."""
        signalled = [p for p in reversed(list(self.pieces.values()))
                     if processes.send(p.pid, p.marker, signal.SIGTERM)]
        for piece in signalled:
            processes.wait_gone(piece.pid, piece.marker, timeout)

    def check_alive(self) -> None:
        """Raise LoopError naming every started piece that died, with its log's tail."""
        dead = [p for p in self.pieces.values() if p.pid is not None and not p.running()]
        if dead:
            raise LoopError("\n\n".join(
                f"{p.name} (pid {p.pid}) is not running; its log {p.log} ends:\n{p.log_tail()}"
                for p in dead))

    def topic(self, name: str) -> str:
        """A bus topic's full name under this loop's prefix: ``topic("actions")``."""
        return str(self.config.get("bus", {}).get("topic_prefix", "selfheal.")) + name

    def metrics_targets(self) -> dict[str, str]:
        """Where each started piece serves /metrics (``{name: "host:port"}``): the port
        fixed in the configuration, or the one the piece picked and printed in its log
        (no port is picked here, so none can be taken by another process meanwhile)."""
        found = {name: address
                 for name, address in prometheus.loop_targets(self.config).items()
                 if name in self.pieces and self.pieces[name].pid is not None}
        for name, piece in self.pieces.items():
            if name in found or piece.pid is None:
                continue
            try:
                printed = _METRICS_AT.findall(piece.log.read_text(errors="replace"))
            except FileNotFoundError:
                continue
            if printed:  # the last start's
                found[name] = printed[-1]
        return found

    @property
    def serve_url(self) -> str:
        return f"http://127.0.0.1:{self.config['serve']['http_port']}"

    @property
    def api_token(self) -> str:
        return str(self.config["serve"]["api_token"])


def prepare(state: SandboxState, work_dir: Path, names: Iterable[str] | None = None,
            overrides: Mapping[str, Mapping[str, Any]] | None = None,
            policy: str | None = None,
            args: Mapping[str, Sequence[str]] | None = None) -> Loop:
    """Write the loop's configuration under ``work_dir``; start nothing yet. ``args``
    adds options to a piece's command (``{"stream": ["--master", url]}``); ``names``
    defaults to every piece that applies to the sandbox (`pieces_for`)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    config = loop_config(state, work_dir, overrides, policy)
    top = config.pop("", {})
    config_path = work_dir / "selfheal.toml"
    config_path.write_text(render_toml(top, config))
    pieces = {}
    for name in pieces_for(state) if names is None else names:
        path = config_path
        if state.security is not None:  # each piece as its own principal, with its ACLs
            path = _principal_config(state, work_dir, top, config, grants.PRINCIPAL[name])
        argv = [sys.executable, "-m", "selfheal.cli", "--config", str(path),
                *PIECES[name], *(args or {}).get(name, ())]
        pieces[name] = Piece(name, argv, work_dir / "logs" / f"{name}.log")
    return Loop(work_dir, config_path, config, pieces)


def _principal_config(state: SandboxState, work_dir: Path, top: Mapping[str, Any],
                      config: Mapping[str, Mapping[str, Any]], principal: str) -> Path:
    """The loop's configuration plus ``principal``'s [cluster.security]."""
    assert state.security is not None
    path = work_dir / f"selfheal.{principal}.toml"
    path.write_text(render_toml(top, {**config, **grants.sections(state, principal)}))
    return path


def create_bus_topics(state: SandboxState, the_loop: Loop) -> None:
    """On a secured sandbox, the bus topics made beforehand as `selfheal-serve`, the one
    principal granted Create: the collectors and the job may not create them."""
    from core.bus import ensure_topics
    from core.config import load

    path = _principal_config(state, the_loop.work_dir, {}, the_loop.config, "selfheal-serve")
    ensure_topics(load(path, env={}, use_fallbacks=False))


def start(state: SandboxState, work_dir: Path, names: Iterable[str] | None = None,
          overrides: Mapping[str, Mapping[str, Any]] | None = None,
          policy: str | None = None, settle: float = 1.0,
          args: Mapping[str, Sequence[str]] | None = None) -> Loop:
    """Prepare and start the named pieces; raise LoopError if one dies at once."""
    loop = prepare(state, work_dir, names, overrides, policy, args)
    if state.security is not None:
        create_bus_topics(state, loop)
    for name in loop.pieces:
        loop.start(name)
    time.sleep(settle)
    try:
        loop.check_alive()
    except LoopError:
        loop.stop_all()
        raise
    return loop
