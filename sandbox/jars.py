"""Classpaths for each JVM role, from the jars `make jars` copies out of Maven.

Each role has its own folder under ``jvm/lib`` (see ``jvm/pom.xml``), so the broker's
Kafka and Scala jars never reach Spark's classpath.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The version starts at the first "-<digit>" after which no "_" follows: a Scala suffix
# such as "_2.13" belongs to the artifact ("spark-sql-kafka-0-10_2.13-4.2.0.jar").
_VERSION_SUFFIX = re.compile(r"-\d[^_/]*\.jar$")


class JarsMissing(RuntimeError):
    """The Maven-fetched jars for a role are not on disk."""


def lib_dir() -> Path:
    """Where the role folders live: ``$SELFHEAL_JVM_LIB`` or ``jvm/lib`` in the checkout."""
    return Path(os.environ.get("SELFHEAL_JVM_LIB", REPO_ROOT / "jvm" / "lib"))


def role_jars(role: str) -> list[Path]:
    folder = lib_dir() / role
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise JarsMissing(
            f"no {role} jars in {folder}; run `make jars` (Maven copies them from jvm/pom.xml)"
        )
    return jars


def classpath(role: str) -> str:
    """The ``-cp`` string for ``broker`` (Kafka, its tools and ZooKeeper) or ``spark``."""
    return os.pathsep.join(str(j) for j in role_jars(role))


def jmx_agent() -> Path:
    """The Prometheus JMX exporter javaagent jar."""
    return role_jars("agent")[0]


def artifact_name(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``."""
    return _VERSION_SUFFIX.sub("", jar.name)


def spark_connector_jars(pyspark_jars: Path | None = None) -> list[Path]:
    """The Kafka connector jars to hand Spark through ``spark.jars``.

    Jars whose artifact pyspark already ships (Scala, Hadoop client, compression codecs)
    are left out, so Spark keeps its own versions of them.
    """
    if pyspark_jars is None:
        import pyspark

        pyspark_jars = Path(pyspark.__file__).parent / "jars"
    shipped = {artifact_name(j) for j in pyspark_jars.glob("*.jar")}
    return [j for j in role_jars("spark") if artifact_name(j) not in shipped]
