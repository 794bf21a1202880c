"""`selfheal`: one command for every piece of kafka-selfheal (the top layer).

Each sub-command lives next to the code it drives and exposes ``register(subparsers)``;
this module only wires them together, so ``selfheal --help`` stays fast (heavy imports
such as pyspark happen inside the handlers). When the sandbox is installed beside the
product, its defaults are plugged in here (`sandbox.defaults.install`); the product's own
packages never import it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from core.errors import CliError

# (module, what it adds). Modules are imported on start-up; they must keep their own
# heavy imports inside their handlers.
SUBCOMMANDS: tuple[str, ...] = (
    "sandbox.cli",
    "sandbox.demo",
    "remediation.plan.cli",
    "streams.collect.cli",  # selfheal collect metrics|zk|snapshots
    "streams.cli",  # selfheal stream
    "remediation.service.cli",  # selfheal serve
    "remediation.executor.cli",  # selfheal execute
    "sandbox.airflow_cli",  # selfheal airflow up|down|status
)




def install_sandbox_defaults() -> bool:
    """Plug the sandbox's defaults in when it is installed; False when it is not."""
    try:
        from sandbox.defaults import install
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("sandbox"):
            raise
        return False
    install()
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="selfheal",
        description="Self-healing for Apache Kafka JBOD storage and rack placement.",
    )
    parser.add_argument(
        "--config", metavar="PATH", dest="global_config",
        help="the configuration file (TOML, see core/selfheal.example.toml); "
             "default $SELFHEAL_CONFIG, else built-in defaults aimed at the running sandbox")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in SUBCOMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a piece not built yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    install_sandbox_defaults()
    parser = build_parser()
    args = parser.parse_args(argv)
    # dest differs from "config": a sub-command's own --config default must not erase it.
    if args.global_config is not None:
        if not os.path.isfile(args.global_config):
            print(f"selfheal: --config {args.global_config}: no such file", file=sys.stderr)
            return 2
        # Every handler reads its configuration through core.config.load(), which
        # takes the file from the environment; this makes --config mean the same everywhere.
        os.environ["SELFHEAL_CONFIG"] = os.path.abspath(args.global_config)
    try:
        result = args.func(args)
    except CliError as exc:
        print(f"selfheal {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
