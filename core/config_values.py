"""How configuration values are read and checked: the file's tables and the `SELFHEAL_*`
variables, each value turned into its key's type, then the key's own check. The keys
themselves are declared in `core/config.py`."""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Check = Callable[[Any], str | None]
ENV_PREFIX = "SELFHEAL_"
CONFIG_ENV = "SELFHEAL_CONFIG"
POLICY_ENV = "SELFHEAL_POLICY"


def env_var(section: str, key: str) -> str:
    """The environment variable that overrides ``[section] key``."""
    return f"{ENV_PREFIX}{section.upper().replace('.', '_')}_{key.upper()}"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key and its source."""


def field(default: Any = None, check: Check | None = None, *, doc: str,
          secret: bool = False, example: str | None = None,
          factory: Callable[[], Any] | None = None, shown: str | None = None) -> Any:
    """One key: `doc` is its meaning for the reference; `example` a value for an unset
    key's commented line; `shown` the default as a reader sees it (a computed path);
    `secret` keeps the value out of reprs and errors."""
    meta = {"check": check, "doc": doc, "secret": secret, "example": example,
            "shown": shown}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta, repr=not secret)
    return dataclasses.field(default=default, metadata=meta, repr=not secret)


def _shown(raw: Any, secret: bool) -> str:
    """A refused value as an error shows it: never a secret's text."""
    return f"a value of {len(str(raw))} characters" if secret else repr(raw)


def positive(value: Any) -> str | None:
    return None if value > 0 else "must be > 0"


def at_least(low: float) -> Check:
    return lambda value: None if value >= low else f"must be >= {low}"


def one_of(*choices: str) -> Check:
    return lambda value: None if value in choices else f"must be one of {', '.join(choices)}"


def port(value: Any) -> str | None:
    return None if 0 <= value <= 65535 else "must be a port, 0-65535 (0 picks a free one)"


# host:port or PROTOCOL://host:port, comma-separated, as Kafka clients take them.
_SERVER = re.compile(r"^([A-Za-z_]+://)?[^\s,:/]+:\d{1,5}$")


def servers(value: Any) -> str | None:
    if all(_SERVER.match(s.strip()) for s in value.split(",")):
        return None
    return "must be host:port[,host:port...]"


def topic_prefix(value: Any) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9._-]*", value)
    return None if ok else "may hold only letters, digits, '.', '_' and '-' (Kafka topic names)"


def optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def signing_key(value: Any) -> str | None:
    if len(value) < 32:
        return ("must be at least 32 characters of random text, e.g. the output of "
                "`python3 -c 'import secrets; print(secrets.token_hex(32))'`")
    return None


def url(value: Any) -> str | None:
    ok = re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value)
    return None if ok else "must be an http(s) URL such as https://selfheal.example.com"


def base_type(hint: Any) -> Any:
    """``X | None`` -> X."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner
    return hint


def coerce(raw: Any, hint: Any, key: str, where: str, from_env: bool,
           relative_to: Path | None, secret: bool = False) -> Any:
    """Turn a TOML value or an environment string into the field's type."""
    optional = type(None) in typing.get_args(hint)
    kind = base_type(hint)

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{key} {where}: expected {expected}, got {_shown(raw, secret)}")

    if from_env and raw == "" and optional:
        return None  # an empty variable unsets a value the file gave
    if kind is str:
        if not isinstance(raw, str):
            raise bad("a string")
        return raw
    if kind is bool:
        if from_env and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        if not isinstance(raw, bool):
            raise bad("true or false")
        return raw
    if kind in (int, float):
        expected = "an integer" if kind is int else "a number"
        if from_env:
            try:
                return kind(raw)
            except ValueError:
                raise bad(expected) from None
        if isinstance(raw, bool) or not isinstance(raw, int if kind is int else (int, float)):
            raise bad(expected)
        return kind(raw)
    if kind is Path:
        if not isinstance(raw, str) or not raw:
            raise bad("a path")
        path = Path(raw).expanduser()
        # Relative paths in a file mean "next to the file", so a config dir can move.
        return relative_to / path if relative_to is not None and not path.is_absolute() else path
    if typing.get_origin(kind) is tuple:
        items = raw.split(",") if isinstance(raw, str) else raw
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise bad("a list of strings (or one comma-separated string)")
        return tuple(i.strip() for i in items if i.strip())
    raise TypeError(f"config field {key} has unsupported type {hint}")


class Builder:
    """Collects values section by section, remembering which keys were set explicitly."""

    def __init__(self, sections: Mapping[str, type]) -> None:
        self.sections = sections
        self.values: dict[str, dict[str, Any]] = {name: {} for name in sections}
        self.policy: Path | None = None
        self.sources: list[str] = []

    def set(self, section: str, key: str, raw: Any, where: str, from_env: bool,
            relative_to: Path | None = None) -> None:
        cls = self.sections[section]
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if key not in fields:
            raise ConfigError(f"unknown key {section}.{key} {where}; known: "
                              + ", ".join(fields))
        hints = typing.get_type_hints(cls)
        full = f"{section}.{key}"
        secret = bool(fields[key].metadata.get("secret"))  # never echoed in an error
        value = coerce(raw, hints[key], full, where, from_env, relative_to, secret)
        check = fields[key].metadata.get("check")
        problem = check(value) if check and value is not None else None
        if problem:
            raise ConfigError(f"{full} {where}: {problem}, got {_shown(raw, secret)}")
        self.values[section][key] = value

    def is_set(self, section: str, key: str) -> bool:
        return key in self.values[section]


def read_file(builder: Builder, path: Path) -> None:
    where = f"in {path}"
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; fix ${CONFIG_ENV} or the "
                          "--config path, or leave both unset for the defaults") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    for name, body in doc.items():
        if name == "policy":
            builder.policy = coerce(body, Path | None, "policy", where, False, path.parent)
        elif name in builder.sections:
            if not isinstance(body, dict):
                raise ConfigError(f"{name} {where}: expected a [{name}] table")
            for key, raw in body.items():
                if f"{name}.{key}" in builder.sections and isinstance(raw, dict):
                    for sub, value in raw.items():  # [cluster.security] and the like
                        builder.set(f"{name}.{key}", sub, value, where, False, path.parent)
                else:
                    builder.set(name, key, raw, where, False, path.parent)
        else:
            raise ConfigError(f"unknown section or key {name!r} {where}; known: "
                              + ", ".join([*builder.sections, "policy"]))
    builder.sources.append(str(path))


def read_env(builder: Builder, env: Mapping[str, str]) -> None:
    used = False
    for var, raw in sorted(env.items()):
        if var == POLICY_ENV:
            builder.policy = None if raw == "" else Path(raw).expanduser()
            used = True
            continue
        # SELFHEAL_CLUSTER_SECURITY_* belongs to [cluster.security], not to [cluster]
        for section in sorted(builder.sections, key=len, reverse=True):
            head = env_var(section, "")
            if var.startswith(head):
                key = var[len(head):].lower()
                builder.set(section, key, raw, f"from {var}", True)
                used = True
                break
    if used:
        builder.sources.append("environment")
