"""The configuration reference and the example files are what the code declares."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from core.config import SECTIONS, load
from remediation.executor.policy import Policy, load_policy
from selfheal import config_reference as ref


@pytest.mark.parametrize("path", sorted(ref.outputs()), ids=lambda p: p.name)
def test_the_committed_file_is_what_the_definitions_generate(path):
    assert path.read_text(encoding="utf-8") == ref.outputs()[path], (
        f"{path.relative_to(ref.ROOT)} is stale: run `make config-reference`")


def test_the_check_mode_names_a_stale_file(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "config-reference.md"
    stale.write_text("old\n")
    monkeypatch.setattr(ref, "outputs", lambda: {stale: "new\n"})
    monkeypatch.setattr(ref, "ROOT", tmp_path)
    assert ref.main(["--check"]) == 1
    assert "config-reference.md is stale: run `make config-reference`" in capsys.readouterr().out


def test_every_config_key_is_in_the_reference_with_its_variable_and_default():
    text = ref.reference()
    for section, cls in SECTIONS.items():
        assert f"### `[{section}]`" in text
        for f in dataclasses.fields(cls):
            var = f"SELFHEAL_{section.upper().replace('.', '_')}_{f.name.upper()}"
            row = next(line for line in text.splitlines() if line.startswith(f"| `{f.name}` |")
                       and f"`{var}`" in line)
            if f.default not in (dataclasses.MISSING, None):
                assert f"`{ref._toml(f.default)}`" in row, row


def test_the_example_files_load_to_the_defaults():
    doc = tomllib.loads(ref.config_example())
    tables = {f"{name}.{sub}" for name, body in doc.items() for sub, value in body.items()
              if isinstance(value, dict)}  # [cluster.security] and the like
    assert set(doc) | tables == set(SECTIONS)
    loaded = load(ref.CONFIG_EXAMPLE, env={}, use_fallbacks=False)
    defaults = load(env={}, use_fallbacks=False)
    for section in SECTIONS:
        attr = section.replace(".", "_")
        assert getattr(loaded, attr) == getattr(defaults, attr), section
    assert loaded.policy is None
    assert load_policy(ref.POLICY_EXAMPLE) == Policy()


def test_every_policy_key_has_a_meaning():
    keys = list(ref.policy_keys())
    assert {k.section for k in keys} == {"actions", "limits", "breaker"}
    assert all(k.doc for k in keys)
    assert {k.name for k in keys if k.section == "actions"} == set(Policy().modes)
