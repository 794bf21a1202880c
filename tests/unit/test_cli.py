"""The `selfheal` entry point: global options that every sub-command shares."""

from __future__ import annotations

from selfheal import cli


def test_config_option_points_every_handler_at_the_file(tmp_path, monkeypatch, capsys):
    config = tmp_path / "selfheal.toml"
    config.write_text("[detect]\ndisk_skew_threshold = 1.3\n")
    monkeypatch.setenv("SELFHEAL_CONFIG", "")  # recorded, so main()'s change is undone
    monkeypatch.setattr(cli, "SUBCOMMANDS", ("tests.unit.cli_probe",))
    assert cli.main(["probe"]) == 0
    assert capsys.readouterr().out.strip() == "1.1"
    assert cli.main(["--config", str(config), "probe"]) == 0
    assert capsys.readouterr().out.strip() == "1.3"


def test_missing_config_file_is_named_and_exits_2(tmp_path, capsys):
    missing = tmp_path / "nope.toml"
    assert cli.main(["--config", str(missing), "plan", "offline", "--snapshot", "x.json"]) == 2
    assert f"--config {missing}: no such file" in capsys.readouterr().err
