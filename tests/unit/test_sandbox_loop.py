"""The loop's shared configuration file: what `sandbox.loop` writes, `core.config`
reads back exactly, and every piece gets its own command line and log."""

from __future__ import annotations

import sys

from core.config import load
from sandbox import cluster, loop
from tests.polling import wait_until


def test_loop_config_file_reads_back_as_the_sandbox_with_quick_intervals(tmp_path):
    state = cluster.plan_layout(tmp_path / "sb", brokers=3, log_dirs=2, racks=3,
                                mode="zk", kafka="3.9")
    prepared = loop.prepare(state, tmp_path / "loop", overrides={"detect": {
        "skew_window_seconds": 7.5}}, policy=str(tmp_path / "policy.toml"))
    config = load(prepared.config_path, env={}, use_fallbacks=False)
    assert config.cluster.bootstrap_servers == state.bootstrap_servers
    assert config.cluster.zookeeper_connect == state.zookeeper_connect
    assert config.cluster.exporter_urls == tuple(f"{b.node_id}={b.exporter_url}"
                                                 for b in state.brokers)
    assert config.detect.skew_window_seconds == 7.5
    assert config.stream.checkpoint_dir == tmp_path / "loop" / "checkpoints"
    assert config.serve.http_port == prepared.config["serve"]["http_port"]
    assert config.serve.api_token == prepared.api_token
    assert config.policy == tmp_path / "policy.toml"


def test_every_piece_runs_selfheal_with_the_loop_config_and_a_unique_marker(tmp_path):
    state = cluster.plan_layout(tmp_path / "sb", brokers=1, log_dirs=1, racks=0, mode="kraft")
    prepared = loop.prepare(state, tmp_path / "loop")
    # KRaft: every piece but the ZooKeeper watcher
    assert list(prepared.pieces) == [n for n in loop.PIECES if n != "collect-zk"]
    markers = {p.marker for p in prepared.pieces.values()}
    assert len(markers) == len(prepared.pieces)
    for name, piece in prepared.pieces.items():
        assert piece.argv[-len(loop.PIECES[name]):] == list(loop.PIECES[name])
        assert str(prepared.config_path) in piece.argv
        assert not piece.running()


def test_a_zookeeper_sandbox_runs_every_piece(tmp_path):
    state = cluster.plan_layout(tmp_path / "sb", brokers=1, log_dirs=1, racks=0, mode="zk",
                                kafka="3.9")
    assert list(loop.prepare(state, tmp_path / "loop").pieces) == list(loop.PIECES)


def test_metrics_targets_are_the_fixed_ports_and_what_started_pieces_printed(tmp_path):
    state = cluster.plan_layout(tmp_path / "sb", brokers=1, log_dirs=1, racks=0,
                                mode="zk", kafka="3.9")
    prepared = loop.prepare(state, tmp_path / "loop", overrides={
        "collect": {"zk_http_port": 40123}})
    pieces = prepared.pieces
    for piece in pieces.values():
        piece.log.parent.mkdir(parents=True, exist_ok=True)
    pieces["collect-metrics"].log.write_text(
        "10:00:00 [collect metrics] own metrics at http://127.0.0.1:41001/metrics\n")
    # restarted: the last start's address counts
    pieces["stream"].log.write_text(
        "10:00:01 [stream] metrics on http://127.0.0.1:41002/metrics\nbatch lines\n"
        "10:05:00 [stream] metrics on http://127.0.0.1:41003/metrics\n")
    pieces["collect-snapshots"].log.write_text("10:00:00 [collect snapshots] starting\n")
    for name in ("collect-metrics", "collect-zk", "collect-snapshots", "stream", "serve"):
        pieces[name].pid = 1  # started (the method reads logs and the configuration only)
    assert prepared.metrics_targets() == {
        "collect-metrics": "127.0.0.1:41001",
        "collect-zk": "127.0.0.1:40123",  # fixed in the configuration
        "stream": "127.0.0.1:41003",
        "serve": f"127.0.0.1:{prepared.config['serve']['http_port']}",
    }  # collect-snapshots printed nothing yet: no target
    pieces["serve"].pid = None  # never started: no target, even with a fixed port
    assert "serve" not in prepared.metrics_targets()



STAND_IN = """
import pathlib, signal, sys, time
name, log, others = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])

def term(*_):
    with log.open("a") as out:
        out.write(f"{name} got SIGTERM\\n")
    if name == "stream":  # leaves only once every other piece was told to stop too
        deadline = time.monotonic() + 30
        while log.read_text().count("SIGTERM") <= others and time.monotonic() < deadline:
            time.sleep(0.05)
        with log.open("a") as out:
            out.write("stream left\\n")
    sys.exit(0)

signal.signal(signal.SIGTERM, term)
with log.open("a") as out:
    out.write(f"{name} up\\n")
time.sleep(120)
"""


def test_stop_all_signals_every_piece_before_waiting_for_one_slow_to_leave(tmp_path):
    state = cluster.plan_layout(tmp_path / "sb", brokers=1, log_dirs=1, racks=0, mode="kraft")
    prepared = loop.prepare(state, tmp_path / "loop")
    log = tmp_path / "stand-ins.log"
    log.touch()
    # Stand-ins with the pieces' command lines (their markers); the job's clean stop
    # takes as long as the others take to be told.
    others = len(prepared.pieces) - 1
    for name, piece in prepared.pieces.items():
        at = piece.argv.index("--config")
        piece.argv = [sys.executable, "-c", STAND_IN, name, str(log), str(others),
                      *piece.argv[at:]]
        prepared.start(name)
    wait_until(lambda: log.read_text().count(" up") == len(prepared.pieces),
               "every stand-in started", 30)
    prepared.stop_all()
    assert [n for n, p in prepared.pieces.items() if p.running()] == []
    lines = log.read_text().splitlines()
    assert lines[-1] == "stream left", lines
    assert sum(line.endswith("got SIGTERM") for line in lines) == len(prepared.pieces)
