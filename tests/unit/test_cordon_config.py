"""`cordoned.log.dirs` arithmetic (remediation/executor/cordon.py): ours is added to what
is there, and the undo takes away ours only and puts the operator's value back exactly."""

from __future__ import annotations

from remediation.executor.cordon import KEY, CordonConfig, with_dir, without_dir


def synonyms(dynamic: str | None = None, default: str | None = None,
             static: str | None = None) -> list[dict]:
    found = [("DYNAMIC_BROKER_CONFIG", dynamic), ("DYNAMIC_DEFAULT_BROKER_CONFIG", default),
             ("STATIC_BROKER_CONFIG", static)]
    return [{"name": KEY, "value": v, "source": s} for s, v in found if v is not None]


def undo_after_cordon(found: CordonConfig, path: str) -> dict:
    """Cordon `path` on a broker showing `found`, then undo on the result."""
    change = with_dir(found, path)
    after = CordonConfig(change[KEY], found.below)
    return without_dir(after, path, found.dynamic)


def test_our_dir_is_added_after_the_static_entries_not_instead_of_them() -> None:
    found = CordonConfig.from_synonyms(synonyms(static="/a"))
    assert found.dynamic is None and found.below == "/a"
    assert with_dir(found, "/b") == {KEY: "/a,/b"}


def test_the_undo_deletes_our_dynamic_value_when_the_broker_had_none() -> None:
    assert undo_after_cordon(CordonConfig.from_synonyms(synonyms(static="/a")), "/b") == {
        KEY: None}
    assert undo_after_cordon(CordonConfig(None), "/b") == {KEY: None}


def test_the_undo_restores_an_operators_dynamic_value_exactly() -> None:
    found = CordonConfig.from_synonyms(synonyms(dynamic="/x,/a", static="/z"))
    assert found.effective == ["/x", "/a"]
    assert with_dir(found, "/b") == {KEY: "/x,/a,/b"}
    assert undo_after_cordon(found, "/b") == {KEY: "/x,/a"}


def test_a_dir_the_operator_added_meanwhile_stays_after_our_undo() -> None:
    now = CordonConfig("/a,/b,/c", "/a")  # we added /b, the operator /c afterwards
    assert without_dir(now, "/b", None) == {KEY: "/a,/c"}


def test_a_dir_cordoned_already_or_under_star_is_left_to_its_owner() -> None:
    assert with_dir(CordonConfig("/b"), "/b") == {}
    assert with_dir(CordonConfig(None, "*"), "/b") == {}
    assert without_dir(CordonConfig(None, "*"), "/b", None) == {}


def test_an_undo_after_someone_lifted_the_cordon_changes_nothing() -> None:
    assert without_dir(CordonConfig("/a", None), "/b", None) == {}
