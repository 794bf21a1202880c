"""A real local Airflow 3 running the selfheal DAGs (`selfheal airflow up|down`).

Airflow's own pieces, each a process of its own: the scheduler (LocalExecutor, two
parallel tasks), the DAG processor and the API server (UI, REST API and the execution
API the tasks talk to), on SQLite. No triggerer: the DAGs wait with reschedule-mode
sensors, so none is needed, and it would cost another ~150 MiB. `airflow standalone` is
the same set plus a triggerer, and it cannot be told to leave it out.

AIRFLOW_HOME is ``<sandbox>/airflow``; the API server binds 127.0.0.1 on a free port. Each
process is started in its own session and stopped by PID (then its session's
stragglers, LocalExecutor workers and parsers); a PID is trusted only while
/proc/PID/environ carries this AIRFLOW_HOME, or, for the API server, whose new process
title ("airflow api_server -- host:127.0.0.1 port:N") overwrites its command line and
environment, while its title names its port.
The tasks inherit this command's environment (SELFHEAL_*, AIRFLOW_CONN_*), so with
nothing set they find the sandbox and the serve configured in $SELFHEAL_CONFIG.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandbox import processes

DAGS_FOLDER = Path(__file__).resolve().parents[1] / "airflow" / "dags"
POOL = "kafka_reassignment"
ADMIN = "admin"
COMPONENTS = ("scheduler", "dag-processor", "api-server")
Progress = Callable[[str], None]


class AirflowError(RuntimeError):
    """Airflow could not be started or answered an error; says what to do."""


def _quiet(message: str) -> None:
    pass


def folder(work_dir: str | Path) -> Path:
    """AIRFLOW_HOME of the sandbox in ``work_dir``."""
    return Path(work_dir) / "airflow"


def airflow_command() -> list[str]:
    """The `airflow` CLI of this Python environment."""
    exe = Path(sys.executable).with_name("airflow")
    if not exe.exists():
        raise AirflowError(
            f"{exe} does not exist: install Airflow with the project's extra "
            "(pip install -e '.[airflow]'; `make test` does it)")
    return [str(exe)]


@dataclasses.dataclass
class Airflow:
    home: Path
    port: int
    pids: dict[str, int]
    password: str
    started_in_s: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def running(self) -> dict[str, bool]:
        return {name: self.owns(pid) for name, pid in self.pids.items()}

    def owns(self, pid: int | None) -> bool:
        """Is ``pid`` one of this Airflow's processes? The API server's new title
        overwrites its environment too ("airflow api_server -- host:... port:N"), so it
        is known by its port."""
        return is_ours(pid, self.home) or _title_has(pid, f"port:{self.port}")

    def rss_bytes(self) -> int:
        """Resident memory of every process in the components' sessions."""
        return sum(processes.rss_bytes(p) for pid in self.pids.values()
                   for p in _session_members(pid))

    def pss_bytes(self) -> int:
        """Proportional memory (shared pages split between their users) of the same set."""
        total = 0
        for pid in self.pids.values():
            for p in _session_members(pid):
                try:
                    text = Path(f"/proc/{p}/smaps_rollup").read_text()
                except OSError:
                    continue
                total += sum(int(line.split()[1]) * 1024 for line in text.splitlines()
                             if line.startswith("Pss:"))
        return total

    def save(self) -> None:
        doc = {"port": self.port, "pids": self.pids, "started_in_s": self.started_in_s}
        (self.home / "airflow.json").write_text(json.dumps(doc, indent=2) + "\n")

    # --- the REST API -------------------------------------------------------------

    def token(self) -> str:
        """A JWT for the admin user (SimpleAuthManager's generated password)."""
        body = json.dumps({"username": ADMIN, "password": self.password}).encode()
        req = urllib.request.Request(f"{self.url}/auth/token", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return str(json.load(resp)["access_token"])

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        """Call /api/v2<path>; AirflowError with Airflow's answer on an HTTP error."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.url}/api/v2{path}", data=data, method=method,
            headers={"Authorization": f"Bearer {token or self.token()}",
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            raise AirflowError(f"{method} /api/v2{path}: HTTP {exc.code}: "
                               f"{exc.read().decode(errors='replace')[:1000]}") from None

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as resp:
            return dict(json.load(resp))


def environment(home: Path, port: int, jwt_secret: str,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every Airflow process of the sandbox runs with."""
    env = {**os.environ, **(extra or {})}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__AUTH_MANAGER":
            "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    })
    env.setdefault("SELFHEAL_AIRFLOW_DATA_DIR", str(home / "selfheal-runs"))
    return env


def prepare(home: Path, env: Mapping[str, str], progress: Progress = _quiet) -> None:
    """Create or migrate the SQLite metadata database and the `kafka_reassignment` pool
    (one slot: one submitting task at a time across every DAG)."""
    home.mkdir(parents=True, exist_ok=True)
    progress(f"airflow db migrate ({home})")
    _run([*airflow_command(), "db", "migrate"], env, home / "migrate.log")
    _run([*airflow_command(), "pools", "set", POOL, "1",
          "one task at a time submits moves to Kafka (through selfheal serve)"],
         env, home / "migrate.log")


def _run(cmd: list[str], env: Mapping[str, str], log: Path) -> None:
    with open(log, "ab") as out:
        done = subprocess.run(cmd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, timeout=600)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise AirflowError(f"{' '.join(cmd[1:])} failed ({done.returncode}):\n{tail}")


def find(work_dir: str | Path) -> Airflow | None:
    """The sandbox's Airflow when its processes run, else None."""
    home = folder(work_dir)
    try:
        doc = json.loads((home / "airflow.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    found = Airflow(home, int(doc["port"]), {k: int(v) for k, v in doc["pids"].items()},
                    _password(home), float(doc.get("started_in_s", 0.0)))
    return found if any(found.running().values()) else None


def _password(home: Path) -> str:
    path = home / "simple_auth_manager_passwords.json.generated"
    try:
        return str(json.loads(path.read_text())[ADMIN])
    except (FileNotFoundError, ValueError, KeyError):
        return ""


def up(work_dir: str | Path, extra_env: Mapping[str, str] | None = None,
       progress: Progress = _quiet, timeout: float = 240.0) -> Airflow:
    """Start the sandbox's Airflow (or return the one that runs) and wait until the
    scheduler and the DAG processor report healthy and the selfheal DAGs are parsed."""
    running = find(work_dir)
    if running is not None:
        return running
    home = folder(work_dir)
    began = time.monotonic()
    port = processes.free_port()
    secret_file = home / "jwt_secret"
    home.mkdir(parents=True, exist_ok=True)
    if not secret_file.exists():
        secret_file.write_text(secrets.token_hex(32))
    env = environment(home, port, secret_file.read_text().strip(), extra_env)
    prepare(home, env, progress)
    pids: dict[str, int] = {}
    for name in COMPONENTS:
        cmd = [*airflow_command(), name]
        if name == "api-server":
            cmd += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
        pids[name] = _spawn(cmd, home / f"{name}.log", home, env)
        progress(f"{name} started (pid {pids[name]})")
    flow = Airflow(home, port, pids, "")
    flow.save()
    try:
        _wait_ready(flow, began + timeout)
    except AirflowError:
        stop(flow)
        raise
    flow.started_in_s = round(time.monotonic() - began, 1)
    flow.save()
    progress(f"airflow ready at {flow.url} in {flow.started_in_s:.0f} s (user {ADMIN}, "
             f"password in {home / 'simple_auth_manager_passwords.json.generated'})")
    return flow


def _spawn(cmd: list[str], log_file: Path, cwd: Path, env: Mapping[str, str]) -> int:
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def _wait_ready(flow: Airflow, deadline: float) -> None:
    last: Any = None
    while time.monotonic() < deadline:
        # Our own fresh children: alive is enough (until it execs, a child still carries
        # this process's environment, without AIRFLOW_HOME).
        dead = [n for n, pid in flow.pids.items() if not processes.is_running(pid, "")]
        if dead:
            raise AirflowError(f"airflow {', '.join(dead)} exited while starting:\n"
                               + _tails(flow, dead))
        try:
            health = flow.health()
            last = health
            if not flow.password:
                flow.password = _password(flow.home)
            ok = all(health.get(k, {}).get("status") == "healthy"
                     for k in ("metadatabase", "scheduler", "dag_processor"))
            if ok and flow.password:
                dags = flow.api("GET", "/dags?dag_id_pattern=selfheal_")
                if dags.get("total_entries", 0) >= 4:
                    return
                last = dags
        except (OSError, ValueError, AirflowError) as exc:
            last = exc
        time.sleep(1)
    raise AirflowError(f"airflow not ready in time (last: {last!r}):\n"
                       + _tails(flow, list(flow.pids)))


def _tails(flow: Airflow, names: list[str]) -> str:
    out = []
    for name in names:
        log = flow.home / f"{name}.log"
        text = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        out.append(f"--- {name}.log\n{text}")
    return "\n".join(out)


def is_ours(pid: int | None, home: Path) -> bool:
    """True while ``pid`` lives (not a zombie) with AIRFLOW_HOME=``home``."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if stat.rsplit(")", 1)[1].split()[0] == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return f"AIRFLOW_HOME={home}".encode() in environ.split(b"\0")


def _title_has(pid: int | None, text: str) -> bool:
    if not pid or not processes.is_running(pid, ""):
        return False
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return "api_server" in title and text in title.split()


def _signal_and_wait(pid: int, owned: Callable[[int], bool], timeout: float) -> None:
    """SIGTERM ``pid`` if it is ours, then SIGKILL after ``timeout``; returns once that
    process is gone. It is followed by its start time, not its title: the API server
    retitles itself while it shuts down, and waiting for the title to go returned while
    it still ran."""
    born = _alive_since(pid)
    if born is None or not owned(pid):
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _alive_since(pid) != born:
                return
            time.sleep(0.2)


def _alive_since(pid: int) -> int | None:
    """The start time (clock ticks after boot) of ``pid`` while it runs; None once it is
    gone (a zombie is reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        processes.is_running(pid, "")  # reaps it if it is our child
        return None
    return int(fields[19])  # field 22 of stat: starttime


def _session_members(leader: int) -> list[int]:
    """PIDs whose session is ``leader``'s (it was started with a session of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == leader and fields[0] != "Z":  # fields[3]: session id
            found.append(int(entry.name))
    return found


def stop(flow: Airflow, timeout: float = 30.0) -> bool:
    """Stop every component by its PID (SIGTERM, then SIGKILL), then whatever is left in
    its session (executor workers, parsers); True if any ran."""
    was = False
    for pid in flow.pids.values():
        if flow.owns(pid):
            was = True
            _signal_and_wait(pid, flow.owns, timeout)
    for pid in flow.pids.values():
        for member in _session_members(pid):
            if flow.owns(member):
                _signal_and_wait(member, flow.owns, 5.0)
    (flow.home / "airflow.json").unlink(missing_ok=True)
    return was


def down(work_dir: str | Path) -> bool:
    """Stop the sandbox's Airflow if it runs; True if it did."""
    flow = find(work_dir)
    return stop(flow) if flow is not None else False
