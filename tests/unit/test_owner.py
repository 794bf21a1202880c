"""State per cluster: keyed defaults, markers that refuse another cluster's checkpoint or
store with what to do, and the fresh-checkpoint test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.config import load
from core.owner import (
    MARKER,
    Owner,
    OwnerError,
    claim_checkpoint,
    claim_store,
    keyed_checkpoint_root,
    keyed_store,
    safe_name,
)
from remediation.executor.store import ActionStore
from streams.starting import is_fresh

HERE = Owner("prod-eu-1", "bus-id-A", "k1:9092")


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "kafka-selfheal"


def test_default_checkpoints_and_stores_get_a_folder_and_file_per_cluster_and_bus(
        state_home: Path) -> None:
    config = load(env={}, use_fallbacks=False)
    other = Owner("sandbox-2", "bus-id-B", "127.0.0.1:1")
    assert keyed_checkpoint_root(config, HERE) == state_home / "checkpoints/prod-eu-1/bus-id-A"
    assert keyed_checkpoint_root(config, other) != keyed_checkpoint_root(config, HERE)
    assert keyed_store(config, "prod-eu-1") == state_home / "actions/prod-eu-1.sqlite"
    assert keyed_store(config, "sandbox-2") != keyed_store(config, "prod-eu-1")


def test_configured_paths_are_used_as_they_are(state_home: Path, tmp_path: Path) -> None:
    config = load(env={"SELFHEAL_STREAM_CHECKPOINT_DIR": str(tmp_path / "cp"),
                       "SELFHEAL_SERVE_SQLITE_PATH": str(tmp_path / "a.sqlite")},
                  use_fallbacks=False)
    assert keyed_checkpoint_root(config, HERE) == tmp_path / "cp"
    assert keyed_store(config, "prod-eu-1") == tmp_path / "a.sqlite"


def test_a_cluster_id_that_is_no_file_name_still_names_one_folder() -> None:
    assert safe_name("../../etc/passwd") == "_.._etc_passwd"
    assert "/" not in safe_name("a/b c")


def test_a_checkpoint_is_claimed_once_and_kept_by_its_own_cluster(tmp_path: Path) -> None:
    cp = tmp_path / "detect"
    claim_checkpoint(cp, HERE)
    assert json.loads((cp / MARKER).read_text())["cluster"] == "prod-eu-1"
    claim_checkpoint(cp, HERE)  # again: fine
    moved = Owner("prod-eu-1", "bus-id-A", "k2:9092")  # same bus at a new address
    claim_checkpoint(cp, moved)
    assert json.loads((cp / MARKER).read_text())["bus_servers"] == "k2:9092"
    assert not list(cp.glob("*.tmp"))  # written whole, by rename


def test_another_clusters_checkpoint_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    cp = tmp_path / "detect"
    claim_checkpoint(cp, HERE)
    with pytest.raises(OwnerError) as refused:
        claim_checkpoint(cp, Owner("sandbox-2", "bus-id-A", "k1:9092"))
    message = str(refused.value)
    assert "belongs to cluster prod-eu-1, this is cluster sandbox-2" in message
    assert "--checkpoint" in message and f"delete {cp}" in message


def test_a_checkpoint_of_a_recreated_bus_is_refused(tmp_path: Path) -> None:
    cp = tmp_path / "detect"
    claim_checkpoint(cp, HERE)
    with pytest.raises(OwnerError, match="bus was recreated or replaced"):
        claim_checkpoint(cp, Owner("prod-eu-1", "bus-id-NEW", "k1:9092"))


def test_a_store_records_its_cluster_and_refuses_another(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite"
    with ActionStore(path) as store:
        claim_store(store, path, "prod-eu-1")
        claim_store(store, path, "prod-eu-1")
        with pytest.raises(OwnerError) as refused:
            claim_store(store, path, "sandbox-2")
    assert "belongs to cluster prod-eu-1" in str(refused.value)
    assert "--sqlite" in str(refused.value)


def test_a_checkpoint_is_fresh_until_spark_planned_a_batch(tmp_path: Path) -> None:
    cp = tmp_path / "detect"
    assert is_fresh(cp)
    claim_checkpoint(cp, HERE)
    (cp / "offsets").mkdir()
    assert is_fresh(cp)
    (cp / "offsets" / "0").write_text("v1\n{}\n")
    assert not is_fresh(cp)
