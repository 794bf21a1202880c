"""A SparkSession wired to Kafka: Spark's Kafka connector, small local defaults.

Where the connector comes from, first match wins: ``$SELFHEAL_SPARK_JARS`` (comma-separated
jar paths, as ``--jars`` takes them); a registered jar source (the sandbox registers the
repo-local ``jvm/lib/spark`` folder, the tests' offline copy); else Spark resolves
`CONNECTOR_PACKAGE` from Maven itself (``spark.jars.packages``), as on a real cluster.
Under spark-submit the ``--jars``/``--packages`` given there are kept.

On a cluster master (``spark://...``, ``yarn``, ``k8s://...``) the executors get small
caps (`executor_conf`) and run their Python workers with ``$PYSPARK_PYTHON``, by default
the driver's own interpreter: right when worker and driver share a machine (the sandbox's
standalone cluster); on a real cluster set ``PYSPARK_PYTHON`` to a Python that has this
package installed on every node. ``spark.jars`` with local paths works there too: the
driver serves them to the executors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

JARS_ENV = "SELFHEAL_SPARK_JARS"
# The connector built for the pyspark this package pins (pyproject.toml).
CONNECTOR_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"

JarSource = Callable[[], Sequence[Path]]
_JAR_SOURCES: list[JarSource] = []


def register_connector_jars(source: JarSource) -> None:
    """Let ``source`` hand Spark the connector jars (a layer above: the sandbox)."""
    if source not in _JAR_SOURCES:
        _JAR_SOURCES.append(source)


def connector_conf() -> dict[str, str]:
    """``spark.jars`` from the environment or a registered source, else ``spark.jars.packages``."""
    listed = os.environ.get(JARS_ENV, "").strip()
    if listed:
        return {"spark.jars": listed}
    for source in _JAR_SOURCES:
        jars = source()
        if jars:
            return {"spark.jars": ",".join(str(j) for j in jars)}
    return {"spark.jars.packages": CONNECTOR_PACKAGE}


EXECUTOR_MEMORY_ENV = "SELFHEAL_SPARK_EXECUTOR_MEMORY"
# Extra JVM options of the driver (in local mode also the executor); set, even empty,
# they replace DRIVER_JAVA_OPTIONS.
DRIVER_JAVA_OPTIONS_ENV = "SELFHEAL_SPARK_DRIVER_JAVA_OPTIONS"
# Without them: no C2 compiler (tiered compilation stops at C1). A micro-batch runs a
# little of a great deal of code, so C2 kept compiling, and recompiling what it had
# guessed wrong, batch after batch: more than half of an idle batch's CPU; C1 alone
# compiles it cheaply once, and the batch is no slower (docs/streaming.md).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
EXECUTOR_CORES_ENV = "SELFHEAL_SPARK_CORES_MAX"
DRIVER_HOST_ENV = "SELFHEAL_SPARK_DRIVER_HOST"


def executor_conf(master: str) -> dict[str, str]:
    """Caps for the job's executors on a cluster master (none in local mode, where the
    driver is the executor): one core each, ``$SELFHEAL_SPARK_EXECUTOR_MEMORY`` (768m)
    of heap, at most ``$SELFHEAL_SPARK_CORES_MAX`` (2) cores in all. The detector holds
    only what is wrong per cluster; the planners run on the driver."""
    if master.startswith("local"):
        return {}
    return {
        "spark.executor.memory": os.environ.get(EXECUTOR_MEMORY_ENV, "768m"),
        "spark.executor.cores": "1",
        "spark.cores.max": os.environ.get(EXECUTOR_CORES_ENV, "2"),
    }


def driver_java_options() -> dict[str, str]:
    """``spark.driver.extraJavaOptions``: ``$SELFHEAL_SPARK_DRIVER_JAVA_OPTIONS`` if set
    (empty: the JVM's own defaults), else `DRIVER_JAVA_OPTIONS`."""
    options = os.environ.get(DRIVER_JAVA_OPTIONS_ENV, DRIVER_JAVA_OPTIONS).strip()
    return {"spark.driver.extraJavaOptions": options} if options else {}


def session(app_name: str = "kafka-selfheal", master: str | None = None,
            extra_conf: dict[str, str] | None = None) -> Any:
    """Build (or get) the SparkSession with Spark's Kafka source and sink on its classpath.

    ``master`` defaults to ``$SELFHEAL_SPARK_MASTER`` or ``local[2]``; on a real cluster
    spark-submit passes its own and the jars travel with ``spark.jars``.
    """
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SELFHEAL_SPARK_MASTER", "local[2]")
    # The executors' Python workers run what the driver names here (pandas, pyarrow, GX
    # and this package must be importable there).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.app.name": app_name,
        "spark.master": master,
        # 512m holds a fleet's 27 MB snapshot batch (bench/RESULTS.md: the JVM's peak RSS
        # ~100 MiB under 768m's, the batches no slower)
        "spark.driver.memory": os.environ.get("SELFHEAL_SPARK_DRIVER_MEMORY", "512m"),
        # Executors connect back to the driver: on a cluster beyond this machine, set
        # $SELFHEAL_SPARK_DRIVER_HOST to an address of this host they can reach.
        "spark.driver.host": os.environ.get(DRIVER_HOST_ENV, "127.0.0.1"),
        "spark.driver.bindAddress": os.environ.get(DRIVER_HOST_ENV, "127.0.0.1"),
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        **executor_conf(master),
        **driver_java_options(),
        **connector_conf(),
        **(extra_conf or {}),
    }
    _launch_driver_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _launch_driver_jvm(settings: dict[str, str]) -> None:
    """Start the driver JVM (pyspark's gateway) in a session of its own.

    A service manager stops a service by signalling its whole process group. The JVM in
    ours died with the signal while the job was still stopping its query through it, and
    the stop ended in a Py4J trace. In its own session only this process gets the
    signal and stops the query, then the JVM, in order. It still never outlives this
    process: pyspark's gateway server exits when its stdin (a pipe from here) closes.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        conf = SparkConf(loadDefaults=False)
        for key, value in settings.items():
            conf.set(key, value)
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def stop(spark: Any, timeout: float = 30.0) -> None:
    """Stop the session and the driver JVM that pyspark launched, by its PID.

    ``SparkSession.stop()`` leaves the py4j gateway JVM running until Python exits.
    """
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except Exception:
            proc.kill()
            proc.wait(timeout)
    SparkContext._gateway = None
    SparkContext._jvm = None
