"""Spark's real Kafka connector, from jvm/pom.xml, reads and writes the sandbox."""

from __future__ import annotations

import pytest

from sandbox import traffic
from sandbox.jars import artifact_name, spark_connector_jars

pytestmark = pytest.mark.integration


def test_connector_jars_leave_out_what_pyspark_ships():
    names = {artifact_name(j) for j in spark_connector_jars()}
    assert "spark-sql-kafka-0-10_2.13" in names and "kafka-clients" in names
    assert "scala-library" not in names and "hadoop-client-runtime" not in names


def test_spark_reads_every_record_of_a_topic_and_writes_back(sandbox, local_spark):
    traffic.create_topic(sandbox, "spark-in", partitions=3, replication_factor=3)
    traffic.create_topic(sandbox, "spark-out", partitions=1, replication_factor=3)
    acked = traffic.produce(sandbox, "spark-in", 500)
    df = (local_spark.read.format("kafka")
          .option("kafka.bootstrap.servers", sandbox.bootstrap_servers)
          .option("subscribe", "spark-in")
          .option("startingOffsets", "earliest").option("endingOffsets", "latest")
          .load())
    values = sorted(r.value.decode() for r in df.select("value").collect())
    assert values == sorted(acked)

    (df.selectExpr("upper(CAST(value AS STRING)) AS value")
     .write.format("kafka")
     .option("kafka.bootstrap.servers", sandbox.bootstrap_servers)
     .option("topic", "spark-out").save())
    out = traffic.consume_all(sandbox, "spark-out", expected=500, timeout=60)
    assert sorted(out) == sorted(v.upper() for v in acked)
