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

# The command each module adds, in `selfheal --help` order. Modules are imported on
# start-up; they must keep their own heavy imports inside their handlers. A run that
# names its command imports that command's module alone: the others cost ~0.1 s (urllib,
# ssl, logging), a fifth of what `selfheal plan` may take at 300k replicas. Help and
# unknown commands still see them all.
COMMAND_MODULES: dict[str, str] = {
    "sandbox": "sandbox.cli",
    "demo": "sandbox.demo",
    "plan": "remediation.plan.cli",
    "collect": "streams.collect.cli",  # selfheal collect metrics|zk|snapshots
    "stream": "streams.cli",  # selfheal stream
    "serve": "remediation.service.cli",  # selfheal serve
    "execute": "remediation.executor.cli",  # selfheal execute
    "airflow": "sandbox.airflow_cli",  # selfheal airflow up|down|status
    "doctor": "selfheal.doctor",  # selfheal doctor: the preflight
}
SUBCOMMANDS: tuple[str, ...] = tuple(COMMAND_MODULES.values())
# Commands that read no configuration: the sandbox's defaults (core.config and the
# sandbox state, ~0.05 s of imports) would go unused.
WITHOUT_CONFIG = frozenset({"plan"})


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


def command_of(argv: list[str]) -> str | None:
    """The command `argv` names, when nothing before it but --config could change the
    parser (--help there, say, lists every command): None otherwise."""
    k = 0
    while k < len(argv):
        token = argv[k]
        if token.startswith("--") and len(token) > 2 and "--config".startswith(
            token.split("=", 1)[0]
        ):  # argparse takes any prefix of a long option
            k += 1 if "=" in token else 2
            continue
        return token if token in COMMAND_MODULES else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with `command` only that command's (the one being run)."""
    parser = argparse.ArgumentParser(
        prog="selfheal",
        description="Self-healing for Apache Kafka JBOD storage and rack placement.",
    )
    parser.add_argument(
        "--config", metavar="PATH", dest="global_config",
        help="the configuration file (TOML, see core/selfheal.example.toml); "
             "default $SELFHEAL_CONFIG, else built-in defaults aimed at the running sandbox")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = SUBCOMMANDS if command is None else (COMMAND_MODULES[command],)
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a piece not built yet
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    command = command_of(sys.argv[1:] if argv is None else argv)
    if command not in WITHOUT_CONFIG:
        install_sandbox_defaults()
    parser = build_parser(command)
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
