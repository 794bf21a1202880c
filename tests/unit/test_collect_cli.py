"""`selfheal collect ...` refuses what it cannot run, before connecting to anything."""

from __future__ import annotations

import pytest

from selfheal import cli


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No config file and no sandbox: only what each test sets."""
    empty = tmp_path / "no-sandbox"
    empty.mkdir()
    monkeypatch.setenv("SELFHEAL_SANDBOX_DIR", str(empty))
    monkeypatch.setenv("SELFHEAL_CONFIG", "")
    return monkeypatch


def test_zk_in_kraft_mode_points_at_the_snapshot_collector(env, capsys):
    env.setenv("SELFHEAL_CLUSTER_MODE", "kraft")
    assert cli.main(["collect", "zk"]) == 2
    err = capsys.readouterr().err
    assert "KRaft mode" in err and "selfheal collect snapshots" in err


def test_zk_without_zookeeper_says_which_key_to_set(env, capsys):
    env.setenv("SELFHEAL_CLUSTER_MODE", "zk")
    assert cli.main(["collect", "zk", "--once"]) == 2
    assert "set [cluster] zookeeper_connect" in capsys.readouterr().err


def test_a_zookeeper_named_for_a_kraft_cluster_is_refused_in_one_line(env, capsys):
    env.setenv("SELFHEAL_CLUSTER_ZOOKEEPER_CONNECT", "zk-1:2181")  # mode: kraft, the default
    assert cli.main(["collect", "snapshots", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no ZooKeeper" in err
    assert "remove zookeeper_connect" in err and 'mode = "zk"' in err


def test_snapshots_without_a_cluster_says_how_to_name_one(env, capsys):
    assert cli.main(["collect", "snapshots", "--once"]) == 2
    assert "no Kafka cluster configured" in capsys.readouterr().err


def test_a_bad_exporter_url_entry_is_named(env, capsys):
    env.setenv("SELFHEAL_CLUSTER_EXPORTER_URLS", "one=http://kafka-1:7071/metrics")
    assert cli.main(["collect", "metrics", "--once"]) == 2
    assert "'one' is not a broker id" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["collect", "metrics", "--interval", "0"], "--interval must be > 0"),
    (["collect", "snapshots", "--probe-interval", "-1"], "--probe-interval must be > 0"),
    (["collect", "zk", "--metrics-port", "70000"], "--metrics-port must be 0-65535"),
])
def test_bad_flags_are_refused(env, capsys, argv, message):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
