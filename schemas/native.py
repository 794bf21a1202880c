"""The compiled planning core (native/, a Rust crate built by `make` into the venv).

Its loader sits in the lowest layer because the snapshot's reader uses it too. The
reader and the planners call it for their hot loops when it is there; the pure-Python code stays
the reference and the fallback, and the two give byte-identical plans (tests run both).
`SELFHEAL_NATIVE=0` turns it off; a machine without cargo never has it.
"""

from __future__ import annotations

import os
from types import ModuleType


def core() -> ModuleType | None:
    """The compiled module, or None when absent or turned off (read on every call, so
    tests and the bench can switch paths in one process)."""
    if os.environ.get("SELFHEAL_NATIVE", "1") == "0":
        return None
    try:
        import selfheal_native  # built by `make`; untyped either way (pyproject's mypy overrides)
    except ImportError:
        return None
    return selfheal_native
