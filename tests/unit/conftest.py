"""Unit tests build the sandbox's JVM commands without starting them: none may claim a
kind's class-data recording (sandbox/cds.py) that a real start then goes without."""

from __future__ import annotations

import pytest

from sandbox import cds


@pytest.fixture(autouse=True)
def _no_class_data_sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cds.DIR_ENV, "off")
