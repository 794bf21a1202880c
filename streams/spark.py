"""A SparkSession wired to Kafka: the connector jars from jvm/, small local defaults."""

from __future__ import annotations

import os
from typing import Any

from sandbox.jars import spark_connector_jars


def session(app_name: str = "kafka-selfheal", master: str | None = None,
            extra_conf: dict[str, str] | None = None) -> Any:
    """Build (or get) the SparkSession with Spark's Kafka source and sink on its classpath.

    ``master`` defaults to ``$SELFHEAL_SPARK_MASTER`` or ``local[2]``; on a real cluster
    spark-submit passes its own and the jars travel with ``spark.jars``.
    """
    from pyspark.sql import SparkSession

    jars = ",".join(str(j) for j in spark_connector_jars())
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("SELFHEAL_SPARK_MASTER", "local[2]"))
        .config("spark.jars", jars)
        .config("spark.driver.memory", os.environ.get("SELFHEAL_SPARK_DRIVER_MEMORY", "768m"))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


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
