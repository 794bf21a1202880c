"""How the sandbox runs its JVMs: the java binary, capped heaps, the JMX exporter agent,
the classpath from jvm/lib, each server started detached and recorded by PID."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from sandbox import cds, jars, processes, versions
from sandbox.state import SandboxState, ServerState

BROKER_HEAP = os.environ.get("SELFHEAL_BROKER_HEAP", "384m")
ZOOKEEPER_HEAP = os.environ.get("SELFHEAL_ZOOKEEPER_HEAP", "128m")
CONTROLLER_HEAP = os.environ.get("SELFHEAL_CONTROLLER_HEAP", "256m")
EXPORTER_RULES = Path(__file__).with_name("jmx-exporter.yml")


class SandboxError(RuntimeError):
    """Something the operator can act on; the message says what and how."""


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise SandboxError("no `java` on PATH; install a JDK 17 (make deps does)")
    return found


# The sandbox's JVMs share a small machine: no C2 compiler (tiered compilation stops at
# C1) and one GC thread. The job's Spark driver gets the same through
# $SELFHEAL_SPARK_DRIVER_JAVA_OPTIONS when the sandbox starts it (sandbox/loop.py) and
# in the tests: a 40 s streaming run used 28 CPU s instead of 43.
SMALL_MACHINE_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def small_machine_env(env: Mapping[str, str], share_classes: bool = False) -> dict[str, str]:
    """``env`` with the Spark driver's small-machine options, unless it names some; with
    ``share_classes``, for one driver start, also its class-data sharing options."""
    from streams.spark import DRIVER_JAVA_OPTIONS_ENV

    options = env.get(DRIVER_JAVA_OPTIONS_ENV, " ".join(SMALL_MACHINE_JVM_OPTIONS))
    if share_classes:
        options = " ".join([options, *cds.jvm_options(spark_driver_archive(options))])
    return {**env, DRIVER_JAVA_OPTIONS_ENV: options}


def spark_driver_archive(options: str) -> cds.Archive | None:
    """The Spark driver's archive: the classpath pyspark's launcher gives the driver
    (its conf folder, slf4j's API jar, then every jar) and the driver's extra options."""
    import pyspark

    home = Path(pyspark.__file__).parent
    classpath = [str(home / "conf"), *map(str, sorted(home.glob("jars/slf4j-api-*.jar"))),
                 str(home / "jars" / "*")]
    return cds.archive("spark-driver", java(), os.pathsep.join(classpath),
                       tuple(options.split()))


def class_sharing(kind: str, classpath: str) -> list[str]:
    """The class-data sharing options of one start of a Kafka or ZooKeeper JVM (a server
    or a tool) run with SMALL_MACHINE_JVM_OPTIONS on ``classpath`` (sandbox/cds.py)."""
    return cds.jvm_options(cds.archive(kind, java(), classpath, SMALL_MACHINE_JVM_OPTIONS))


def tool_cmd(line: versions.KafkaLine, heap: str, main: str, *jvm_args: str) -> list[str]:
    """``java`` running ``main``, one of Kafka's tools, from ``line``'s jars with the small
    machine's options, ``jvm_args`` and the tool's class-data archive; its own arguments
    follow."""
    classpath = jars.classpath(line.jars_role)
    return [java(), f"-Xmx{heap}", *SMALL_MACHINE_JVM_OPTIONS, *jvm_args,
            *class_sharing(main, classpath), "-cp", classpath, main]


def _jvm_cmd(server: ServerState, kafka: str, heap: str, main_class: str,
             args: list[str], exporter_config: Path = EXPORTER_RULES) -> list[str]:
    conf_dir = Path(server.config).parent
    line = versions.line(kafka)
    cmd = [
        java(),
        f"-Xms{min(64, _mib(heap))}m",
        f"-Xmx{heap}",
        *SMALL_MACHINE_JVM_OPTIONS,
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        line.log_flag(conf_dir),
        f"-Dkafka.logs.dir={conf_dir}",
    ]
    jaas = conf_dir / "jaas.conf"  # the secured ZooKeeper-mode sandbox's (secure_zk.py)
    if jaas.exists():
        cmd.append(f"-Djava.security.auth.login.config={jaas}")
    if server.exporter_port is not None:
        cmd.append(
            f"-javaagent:{jars.jmx_agent()}=127.0.0.1:{server.exporter_port}:{exporter_config}"
        )
    classpath = jars.classpath(line.jars_role)
    cmd += [*class_sharing(f"{server.role}-{main_class}", classpath),
            "-cp", classpath, main_class, *args]
    return cmd


def _mib(heap: str) -> int:
    unit = heap[-1].lower()
    value = int(heap[:-1])
    return value * 1024 if unit == "g" else value


def server_command(state: SandboxState, server: ServerState) -> list[str]:
    kafka = state.kafka_of(server)
    if server.role == "zookeeper":
        return _jvm_cmd(
            server,
            kafka,
            ZOOKEEPER_HEAP,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            [server.config],
        )
    heap = CONTROLLER_HEAP if server.role == "controller" else BROKER_HEAP
    exporter = state.security.exporter_config() if state.security else EXPORTER_RULES
    return _jvm_cmd(server, kafka, heap, "kafka.Kafka", [server.config], exporter)


def start(state: SandboxState, server: ServerState) -> None:
    if processes.is_running(server.pid, server.marker):
        return
    cmd = server_command(state, server)
    server.pid = processes.spawn(cmd, Path(server.log_file), cwd=Path(state.work_dir))
    state.save()
