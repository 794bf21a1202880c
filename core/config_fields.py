"""The building blocks of the config's key definitions: checks and ``_field``.

Apart from core/config.py so that core/security.py can define its sections with them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], str | None]


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and its source."""


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be > 0"


def _at_least(low: float) -> Check:
    return lambda value: None if value >= low else f"must be >= {low}"


def _one_of(*choices: str) -> Check:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def _port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else "must be a port, 0-65535 (0 picks a free one)"


# host:port or PROTOCOL://host:port, comma-separated, as Kafka clients take them.
_SERVER = re.compile(r"^([A-Za-z_]+://)?[^\s,:/]+:\d{1,5}$")


def _servers(value: Any) -> str | None:
    if all(_SERVER.match(s.strip()) for s in value.split(",")):
        return None
    return "must be host:port[,host:port...]"


def _topic_prefix(value: Any) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9._-]*", value)
    return None if ok else "may hold only letters, digits, '.', '_' and '-' (Kafka topic names)"


def _opt(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _field(default: Any = None, check: Check | None = None, *, secret: bool = False) -> Any:
    return dataclasses.field(default=default, metadata={"check": check}, repr=not secret)


def _key(value: Any) -> str | None:
    if len(value) < 32:
        return ("must be at least 32 characters of random text, e.g. the output of "
                "`python3 -c 'import secrets; print(secrets.token_hex(32))'`")
    return None


def _url(value: Any) -> str | None:
    ok = re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value)
    return None if ok else "must be an http(s) URL such as https://selfheal.example.com"
