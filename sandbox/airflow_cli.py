"""`selfheal airflow up|down|status`: a real local Airflow 3 running the selfheal DAGs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.errors import CliError


def _progress(message: str) -> None:
    print(f"[airflow] {message}", file=sys.stderr, flush=True)


def _work_dir(args: argparse.Namespace) -> Path:
    from sandbox.state import default_work_dir

    return Path(args.work_dir).expanduser().resolve() if args.work_dir else default_work_dir()


def _up(args: argparse.Namespace) -> int:
    from sandbox import airflow
    from sandbox.state import SandboxNotRunning, load

    try:
        state = load(_work_dir(args))
    except SandboxNotRunning as exc:
        raise CliError(f"{exc}; Airflow lives in the sandbox's work dir", code=1) from None
    extra = {}
    if args.serve_url:
        conn = {"conn_type": "http", "host": args.serve_url.rstrip("/")}
        if args.serve_token:
            conn["password"] = args.serve_token
        extra["AIRFLOW_CONN_SELFHEAL_SERVE"] = json.dumps(conn)
    try:
        flow = airflow.up(state.work_dir, extra, progress=_progress)
    except airflow.AirflowError as exc:
        raise CliError(str(exc), code=1) from None
    print(flow.url)
    return 0


def _down(args: argparse.Namespace) -> int:
    from sandbox import airflow

    stopped = airflow.down(_work_dir(args))
    _progress("airflow stopped" if stopped else "airflow was not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    from sandbox import airflow

    flow = airflow.find(_work_dir(args))
    if flow is None:
        print("airflow is not running")
        return 1
    print(json.dumps({"url": flow.url, "home": str(flow.home), "pids": flow.pids,
                      "running": flow.running(), "rss_mib": flow.rss_bytes() >> 20,
                      "pss_mib": flow.pss_bytes() >> 20,
                      "started_in_s": flow.started_in_s}, indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "airflow", help="a local Airflow 3 running the selfheal DAGs on the sandbox",
        description="up: scheduler (LocalExecutor), DAG processor and API server on SQLite, "
        "AIRFLOW_HOME in the sandbox's work dir, bound to 127.0.0.1 on a free port; prints "
        "the URL (user admin, password in $AIRFLOW_HOME/simple_auth_manager_passwords."
        "json.generated). down: stop them by PID. The tasks inherit this environment "
        "(SELFHEAL_CONFIG, SELFHEAL_*, AIRFLOW_CONN_*).")
    p.add_argument("--work-dir", type=Path, default=None,
                   help="the sandbox's work dir (default $SELFHEAL_SANDBOX_DIR or "
                        "~/.local/state/kafka-selfheal/sandbox)")
    sub = p.add_subparsers(dest="airflow_action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start Airflow and wait until the DAGs are parsed")
    up.add_argument("--serve-url", metavar="URL",
                    help="selfheal serve's URL for the DAGs (the connection selfheal_serve); "
                         "default: [serve] http_host:http_port of the selfheal config")
    up.add_argument("--serve-token", metavar="TOKEN", help="serve's [serve] api_token")
    up.set_defaults(func=_up)
    sub.add_parser("down", help="stop Airflow by PID").set_defaults(func=_down)
    sub.add_parser("status", help="URL, PIDs, memory").set_defaults(func=_status)
