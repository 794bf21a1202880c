"""A sub-command for tests/unit/test_cli.py: prints what the configuration says."""

from __future__ import annotations

from typing import Any


def register(subparsers: Any) -> None:
    sub = subparsers.add_parser("probe", help="print the configured disk skew threshold")
    sub.add_argument("--config", help="a sub-command's own --config, as `serve` has")
    sub.set_defaults(func=_probe)


def _probe(args: Any) -> int:
    from core.config import load

    print(load(args.config, use_fallbacks=False).detect.disk_skew_threshold)
    return 0
