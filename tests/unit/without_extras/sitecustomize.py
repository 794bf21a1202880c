"""Put on PYTHONPATH, this makes a process behave as a core install of kafka-selfheal
(`pip install .`, no extras): the extras' packages cannot be imported."""

import importlib.abc
import sys

EXTRAS = ("pyspark", "great_expectations", "pandas", "pyarrow", "airflow", "grafanalib")


class _NoExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRAS:
            raise ModuleNotFoundError(f"No module named {name!r} (a core install has no "
                                      "extras)", name=name)
        return None


sys.meta_path.insert(0, _NoExtras())
