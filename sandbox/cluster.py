"""A real local Kafka cluster on JBOD log dirs, with disk-fault injection (disks.py).

One ZooKeeper (or, in KRaft mode, one dedicated controller) and N brokers, each with M log
dirs and a Prometheus JMX exporter, all on 127.0.0.1 with free ports and capped heaps; the
Kafka line each runs is one of sandbox/versions.py.
"""

from __future__ import annotations

import base64
import logging
import shutil
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sandbox import configs, grants, jvm, kraft, processes, secure, secure_zk, versions
from sandbox.jvm import SandboxError
from sandbox.ports import PortBook, PortClash
from sandbox.startup import StartupFailed, check_alive, log_tail, wait_port
from sandbox.state import SandboxState, ServerState, default_work_dir, load, state_path

Progress = Callable[[str], None]

KRAFT_CONTROLLER_ID = 100


def _quiet(_: str) -> None:
    pass


# --- bring up -----------------------------------------------------------------------


def _new_cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes
                    ) -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, drawn again
    while it starts with "-", as Kafka's own `Uuid.randomUuid` does: `kafka-storage
    format -t -enyj...` read the id as an option (a full run's KRaft sandbox failed so,
    about one start in 64)."""
    while True:
        found = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not found.startswith("-"):
            return found


def _rack_names(racks: int) -> list[str]:
    return [f"rack{i + 1}" for i in range(racks)]


def plan_layout(
    work_dir: Path, brokers: int, log_dirs: int, racks: int, mode: str | None = None,
    ports: PortBook | None = None, kafka: str = versions.DEFAULT_LINE,
    security: str | None = None,
) -> SandboxState:
    """Decide ports, paths and racks and write every config file; start nothing. With
    ``ports``, every port stays reserved in that book until released. ``mode`` defaults
    to KRaft."""
    if brokers < 1 or log_dirs < 1:
        raise SandboxError("--brokers and --log-dirs must be at least 1")
    if racks < 0:
        raise SandboxError("--racks must be 0 (no racks) or more")
    try:
        mode = mode or versions.default_mode(kafka)
        line = versions.check_mode(kafka, mode)
    except versions.UnsupportedKafka as exc:
        raise SandboxError(str(exc)) from None
    rack_names = _rack_names(racks)
    book = ports or PortBook()
    state = SandboxState(mode=mode, work_dir=str(work_dir), cluster_id=_new_cluster_id(),
                         brokers=[], kafka=line.line, quorum=line.quorum,
                         release=line.release_version)
    if security is not None:
        if mode == "zk":
            secure_zk.check_mode(security)
        state.security = secure.prepare(work_dir, security)
        if mode == "zk":
            secure_zk.prepare(state.security)

    def server(role: str, node_id: int, name: str, exporter: bool) -> ServerState:
        conf_dir = work_dir / name
        conf_dir.mkdir(parents=True, exist_ok=True)
        line.write_log_config(conf_dir, conf_dir / "server.log")
        return ServerState(
            role=role,
            node_id=node_id,
            port=book.take(),
            pid=None,
            config=str(conf_dir / f"{role}.properties"),
            log_file=str(conf_dir / "stdout.log"),
            exporter_port=book.take() if exporter else None,
            exporter_scheme="https" if state.security is not None else "http",
        )

    if mode == "zk":
        zk = server("zookeeper", 0, "zookeeper", exporter=False)
        props = configs.zookeeper_props(work_dir / "zookeeper" / "data", zk.port)
        if state.security is not None:
            props.update(secure_zk.zookeeper_props())
            secure_zk.write_server_jaas(state.security, Path(zk.config).parent)
        configs.write_properties(Path(zk.config), props)
        state.zookeeper = zk
    else:
        ctl = server("controller", KRAFT_CONTROLLER_ID, "controller", exporter=True)
        ctl.metadata_dir = str(work_dir / "controller" / "metadata")
        props = configs.kraft_controller_props(ctl.node_id, ctl.port, Path(ctl.metadata_dir),
                                               state.quorum)
        if state.security is not None:
            props.update(secure.controller_props(state.security))
        configs.write_properties(Path(ctl.config), props)
        state.controller = ctl

    for broker_id in range(brokers):
        b = server("broker", broker_id, f"broker-{broker_id}", exporter=True)
        b.rack = rack_names[broker_id % racks] if racks else None
        b.log_dirs = [str(work_dir / f"broker-{broker_id}" / f"data-{d}") for d in range(log_dirs)]
        dirs = [Path(p) for p in b.log_dirs]
        if mode == "zk":
            assert state.zookeeper_connect is not None
            props = configs.zk_broker_props(
                broker_id, b.port, b.rack, dirs, state.zookeeper_connect, brokers
            )
        else:
            assert state.controller is not None
            b.metadata_dir = str(work_dir / f"broker-{broker_id}" / "metadata")
            props = configs.kraft_broker_props(
                broker_id, b.port, b.rack, dirs, Path(b.metadata_dir),
                state.controller.node_id, state.controller.port, brokers, state.quorum,
            )
        if state.security is not None:
            props.update(secure.broker_props(state.security, b.port))
            if mode == "zk":
                props.update(secure_zk.broker_props())
                secure_zk.write_client_jaas(state.security, Path(b.config).parent)
        configs.write_properties(Path(b.config), props)
        if state.security is not None:
            Path(b.config).chmod(0o600)  # it holds the broker's own SCRAM password
        state.brokers.append(b)
    if ports is None:
        book.close()
    return state


PORT_ATTEMPTS = 3


def up(
    work_dir: Path | None = None,
    brokers: int = 3,
    log_dirs: int = 2,
    racks: int = 3,
    mode: str | None = None,
    timeout: float = 180.0,
    progress: Progress = _quiet,
    kafka: str = versions.DEFAULT_LINE,
    security: str | None = None,
) -> SandboxState:
    """Start a fresh sandbox and wait until every broker serves; returns its state.
    ``kafka`` is a line of sandbox/versions.py; ``mode`` defaults to KRaft.

    A server that loses its port to another process is retried with new ports (saying
    so); any other failure stops what started and ends in one SandboxError line."""
    work_dir = (work_dir or default_work_dir()).resolve()
    existing = state_path(work_dir)
    if existing.exists():
        old = load(work_dir)
        running = [s for s in old.servers() if processes.is_running(s.pid, s.marker)]
        if running:
            raise SandboxError(
                f"a sandbox is already running from {work_dir} "
                f"(PIDs {', '.join(str(s.pid) for s in running)}); "
                "`selfheal sandbox down` first, or pick another --work-dir"
            )
        shutil.rmtree(work_dir)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        work_dir.mkdir(parents=True, exist_ok=True)
        try:
            return _up_once(work_dir, brokers, log_dirs, racks, mode, kafka, security,
                            timeout, progress)
        except PortClash as exc:
            if attempt == PORT_ATTEMPTS:
                raise SandboxError(f"{exc} ({PORT_ATTEMPTS} tries, each with new ports); "
                                   "something on this host keeps taking ports: try again"
                                   ) from None
            progress(f"{exc}; retrying with new ports (try {attempt + 1} of "
                     f"{PORT_ATTEMPTS})")
        except StartupFailed as exc:
            if exc.details:
                progress("the failed server's logs end:\n" + exc.details)
            raise SandboxError(exc.cause) from None
    raise AssertionError("unreachable")


def _up_once(work_dir: Path, brokers: int, log_dirs: int, racks: int, mode: str | None,
             kafka: str, security: str | None, timeout: float,
             progress: Progress) -> SandboxState:
    started = time.monotonic()
    with PortBook() as book:
        state = plan_layout(work_dir, brokers, log_dirs, racks, mode, ports=book,
                            kafka=kafka, security=security)
        state.save()
        progress(
            f"sandbox in {work_dir}: Kafka {versions.line(state.kafka).version}, "
            f"{state.mode} mode, {brokers} brokers x {log_dirs} log dirs, "
            f"{racks or 'no'} racks"
        )
        try:
            if state.mode == "kraft":
                kraft.format_all(state, progress)
            head = state.zookeeper or state.controller
            assert head is not None
            book.release([head.port, head.exporter_port])  # held until its server binds
            jvm.start(state, head)
            progress(f"{head.role} starting on 127.0.0.1:{head.port} (pid {head.pid})")
            wait_port(head, timeout)
            if state.security is not None and state.mode == "zk":
                secure_zk.add_super_users(state, progress)
            for b in state.brokers:
                book.release([b.port, b.exporter_port])
                jvm.start(state, b)
                progress(f"broker {b.node_id} ({b.rack or 'no rack'}) starting on "
                         f"127.0.0.1:{b.port} (pid {b.pid})")
            wait_ready(state, timeout=timeout, progress=progress)
            if state.security is not None:
                secure.add_users(state, progress)
                grants.set_up(state, progress)
        except PortClash:
            down(state, keep_data=True)
            for server in state.servers():  # the next try starts from empty dirs
                shutil.rmtree(Path(server.config).parent, ignore_errors=True)
            raise
        except BaseException:
            progress("start-up failed; stopping what was started")
            down(state, keep_data=True)
            raise
    progress(f"ready in {time.monotonic() - started:.1f} s; bootstrap {state.bootstrap_servers}")
    return state


def client_config(state: SandboxState) -> dict[str, object]:
    """confluent-kafka settings for the sandbox, with librdkafka's connection chatter muted."""
    silent = logging.getLogger("selfheal.sandbox.librdkafka")
    silent.addHandler(logging.NullHandler())
    silent.propagate = False
    found: dict[str, object] = {"bootstrap.servers": state.bootstrap_servers, "logger": silent}
    if state.security is not None:
        found.update(secure.client_settings(state.security, secure.ADMIN))
    return found


def live_broker_ids(state: SandboxState, timeout: float = 3.0) -> set[int]:
    """Brokers the cluster metadata lists right now (registered, and unfenced in KRaft)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(state))
    try:
        return set(admin.list_topics(timeout=timeout).brokers)
    except Exception:
        return set()


def _exporter_error(state: SandboxState, server: ServerState) -> str | None:
    """Why the server's exporter does not answer (None: it does)."""
    from streams.collect.broker_metrics import fetch

    assert server.exporter_url is not None
    try:
        fetch(server.exporter_url, 2.0, secure.exporter_auth(state.security))
    except OSError as exc:
        return f"exporter {server.exporter_url}: {exc}"
    return None


def wait_ready(
    state: SandboxState,
    broker_ids: list[int] | None = None,
    timeout: float = 180.0,
    progress: Progress = _quiet,
) -> None:
    """Wait until the given brokers (default all) are in the metadata and exporting."""
    wanted = [state.broker(i) for i in (broker_ids or [b.node_id for b in state.brokers])]
    deadline = time.monotonic() + timeout
    reported: set[int] = set()
    while True:
        for b in wanted:
            check_alive(b)
        live = live_broker_ids(state)
        # Registered is not yet serving: the listener may still refuse connections.
        why = {b.node_id: ("not in the metadata" if b.node_id not in live
                           else f"port {b.port} closed" if not processes.port_open(b.port)
                           else _exporter_error(state, b)) for b in wanted}
        ready = {i for i, reason in why.items() if reason is None}
        for broker_id in sorted(ready - reported):
            progress(f"broker {broker_id} ready")
        reported |= ready
        if len(ready) == len(wanted):
            return
        if time.monotonic() > deadline:
            missing = sorted({b.node_id for b in wanted} - ready)
            raise StartupFailed(
                f"brokers {missing} not ready after {timeout:.0f} s (running, but not "
                "serving and exporting: " + "; ".join(f"{i}: {why[i]}" for i in missing) + ")",
                "\n".join(log_tail(state.broker(i)) for i in missing))
        time.sleep(0.5)


# --- take down, start, kill ---------------------------------------------------------


def down(state: SandboxState, keep_data: bool = False, progress: Progress = _quiet) -> None:
    """Stop every process the sandbox started, by PID (brokers first); remove its data."""
    from sandbox import airflow, prometheus

    if airflow.down(state.work_dir):
        progress("stopped airflow")
    if prometheus.stop(state.work_dir):
        progress("stopped prometheus")
    # The brokers together, then the controller or ZooKeeper they report to. One by one,
    # each broker's controlled shutdown moved its leaders to brokers about to stop too:
    # ~15 s a broker on a sandbox a test session had filled with topics. When the data
    # goes anyway a clean shutdown buys nothing, so it gets 10 s before SIGKILL.
    grace = 30.0 if keep_data else 10.0
    head = [s for s in (state.zookeeper, state.controller) if s is not None]
    for group in (list(state.brokers), head):
        signalled = [s for s in group if processes.send(s.pid, s.marker, signal.SIGTERM)]
        for server in signalled:
            processes.wait_gone(server.pid, server.marker, timeout=grace)
            progress(f"stopped {server.role} {server.node_id} (pid {server.pid})")
        for server in group:
            server.pid = None
    if keep_data:
        state.save()
    else:
        shutil.rmtree(state.work_dir, ignore_errors=True)
        progress(f"removed {state.work_dir}")


def start_broker(state: SandboxState, broker_id: int, timeout: float = 120.0,
                 progress: Progress = _quiet) -> None:
    start_brokers(state, [broker_id], timeout=timeout, progress=progress)


def start_brokers(state: SandboxState, broker_ids: list[int], timeout: float = 120.0,
                  progress: Progress = _quiet) -> None:
    """Start the given stopped brokers together, then wait until all are ready."""
    wanted = [state.broker(i) for i in broker_ids]
    for b in wanted:
        if processes.is_running(b.pid, b.marker):
            raise SandboxError(f"broker {b.node_id} is already running (pid {b.pid})")
    for b in wanted:
        _wait_unregistered(state, b.node_id, progress)
    for b in wanted:
        jvm.start(state, b)
        progress(f"broker {b.node_id} starting (pid {b.pid})")
    wait_ready(state, broker_ids, timeout=timeout, progress=progress)


def _wait_unregistered(state: SandboxState, broker_id: int, progress: Progress,
                       timeout: float = 60.0) -> None:
    """In ZooKeeper mode, wait until a crashed broker's registration has expired: a broker
    started while its old ephemeral /brokers/ids/<id> lives exits with NodeExists, and the
    stale registration would make it look ready."""
    if state.zookeeper is None:
        return  # KRaft: a restarted broker re-registers with a new incarnation
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=state.zookeeper_connect, **secure_zk.kazoo_options(state))
    zk.start(timeout=15)
    try:
        path = f"/brokers/ids/{broker_id}"
        deadline = time.monotonic() + timeout
        if zk.exists(path):
            progress(f"broker {broker_id}: waiting for its old ZooKeeper session to expire")
        while zk.exists(path):
            if time.monotonic() > deadline:
                raise SandboxError(f"broker {broker_id} is still registered in ZooKeeper "
                                   f"after {timeout:.0f} s although its process is gone")
            time.sleep(0.5)
    finally:
        zk.stop()
        zk.close()


def kill_broker(state: SandboxState, broker_id: int, graceful: bool = False,
                progress: Progress = _quiet) -> None:
    """SIGKILL (a crash) or, with ``graceful``, SIGTERM (controlled shutdown)."""
    kill_brokers(state, [broker_id], graceful=graceful, progress=progress)


def kill_brokers(state: SandboxState, broker_ids: list[int], graceful: bool = False,
                 progress: Progress = _quiet) -> None:
    """Signal the given brokers together (SIGKILL, or SIGTERM with ``graceful``), then
    wait until every one is gone."""
    wanted = [state.broker(i) for i in broker_ids]
    for b in wanted:
        if not processes.is_running(b.pid, b.marker):
            raise SandboxError(f"broker {b.node_id} is not running")
    sig = signal.SIGTERM if graceful else signal.SIGKILL
    for b in wanted:
        processes.send(b.pid, b.marker, sig)
    for b in wanted:
        processes.wait_gone(b.pid, b.marker, timeout=60)
        progress(f"broker {b.node_id} (pid {b.pid}) {'stopped' if graceful else 'killed'}")
        b.pid = None
    state.save()


def _zookeeper(state: SandboxState) -> ServerState:
    if state.zookeeper is None:
        raise SandboxError("this sandbox runs in KRaft mode: it has no ZooKeeper")
    return state.zookeeper


def stop_zookeeper(state: SandboxState, progress: Progress = _quiet) -> None:
    """Stop ZooKeeper by PID (its data stays), as an outage the brokers must ride out."""
    zk = _zookeeper(state)
    if not processes.stop(zk.pid, zk.marker, timeout=30):
        raise SandboxError("ZooKeeper is not running")
    progress(f"zookeeper (pid {zk.pid}) stopped")
    zk.pid = None
    state.save()


def start_zookeeper(state: SandboxState, timeout: float = 60.0,
                    progress: Progress = _quiet) -> None:
    """Start the stopped ZooKeeper on its old port and data; returns once it listens."""
    zk = _zookeeper(state)
    if processes.is_running(zk.pid, zk.marker):
        raise SandboxError(f"ZooKeeper is already running (pid {zk.pid})")
    jvm.start(state, zk)
    progress(f"zookeeper starting on 127.0.0.1:{zk.port} (pid {zk.pid})")
    wait_port(zk, timeout)


# The disk faults live in sandbox/disks.py; they are the sandbox's API as much as the
# rest, so they are named here too (imported last: disks.py calls back into this module).
from sandbox.disks import (  # noqa: E402
    disk_failed,
    fail_disk,
    heal_disk,
    needs_healing,
    resolve_dir,
    small_disk,
)

__all__ = ["disk_failed", "fail_disk", "heal_disk", "needs_healing", "resolve_dir",
           "small_disk"]
