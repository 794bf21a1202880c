"""`cordoned.log.dirs` arithmetic: add our dir, and later take only our dir away.

The broker's effective value may come from its own dynamic config, the cluster-wide
dynamic default, or `server.properties`. IncrementalAlterConfigs' APPEND would start from
the dynamic value (or Kafka's built-in default) and drop the file's entries, so the
executor reads the effective value with its synonyms (`CordonConfig`), SETs the whole
list plus our dir, and journals the broker's own dynamic value as it found it. The undo
removes our dir only; when the broker had no dynamic value of its own and what is left
equals what lies below it, the dynamic value is deleted again, so the broker is back
exactly where the operator left it. An operator's `*` (every dir) is theirs: we add
nothing to it and take nothing from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KEY = "cordoned.log.dirs"
ALL = "*"
_BROKER_OWN = "DYNAMIC_BROKER_CONFIG"


def parts(value: str | None) -> list[str]:
    """The dirs of a list value, in order ('' and None: none)."""
    return [p.strip() for p in (value or "").split(",") if p.strip()]


@dataclass(frozen=True, slots=True)
class CordonConfig:
    """One broker's `cordoned.log.dirs`: its own dynamic value (None when unset) and the
    value beneath it (the cluster default, `server.properties` or Kafka's default)."""

    dynamic: str | None
    below: str | None = None

    @classmethod
    def from_synonyms(cls, synonyms: Sequence[Mapping[str, Any]]) -> CordonConfig:
        """From DescribeConfigs' synonyms (highest precedence first, each with a
        `source` name as kafka-python gives it)."""
        dynamic = next((s["value"] for s in synonyms if s["source"] == _BROKER_OWN), None)
        below = next((s["value"] for s in synonyms if s["source"] != _BROKER_OWN), None)
        return cls(dynamic, below)

    @property
    def effective(self) -> list[str]:
        return parts(self.dynamic if self.dynamic is not None else self.below)

    def cordoned(self, path: str) -> bool:
        dirs = self.effective
        return ALL in dirs or path in dirs


def with_dir(config: CordonConfig, path: str) -> dict[str, str | None]:
    """The alteration that cordons `path` ({} when it is cordoned already: then the
    cordon is the operator's, not ours)."""
    if config.cordoned(path):
        return {}
    return {KEY: ",".join([*config.effective, path])}


def without_dir(config: CordonConfig, path: str,
                dynamic_before: str | None) -> dict[str, str | None]:
    """The alteration that lifts our cordon of `path` ({} when `path` is not listed:
    someone lifted it already, or it sits under an operator's `*`). `dynamic_before` is
    the broker's own dynamic value when we cordoned; None value: delete the key."""
    dirs = config.effective
    if path not in dirs:
        return {}
    rest = [p for p in dirs if p != path]
    if dynamic_before is None and rest == parts(config.below):
        return {KEY: None}
    return {KEY: ",".join(rest)}
