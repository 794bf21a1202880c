"""Run every `bench/*_bench.py` module's `main()`, in name order."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def main() -> int:
    names = sorted(p.stem for p in Path(__file__).parent.glob("*_bench.py"))
    for name in names:
        print(f"== bench.{name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
