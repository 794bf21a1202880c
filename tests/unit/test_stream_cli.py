"""`selfheal stream` as a command: its help, and the mistakes it refuses before Spark starts."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import SELFHEAL


def stream(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SELFHEAL, "stream", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def test_help_says_what_goes_in_and_out_and_how_to_stop():
    done = stream("--help")
    assert done.returncode == 0
    for words in ("selfheal.broker-metrics", "selfheal.dead-letter", "selfheal.actions",
                  "--available-now", "--trigger", "--checkpoint", "proposes nothing twice"):
        assert words in done.stdout, words


def test_a_trigger_of_zero_seconds_is_refused_with_the_fix():
    done = stream("--trigger", "0")
    assert done.returncode == 2
    assert "--trigger must be more than 0 seconds, got 0.0" in done.stderr


def test_without_a_bus_it_says_how_to_configure_one(tmp_path):
    env = {"SELFHEAL_SANDBOX_DIR": str(tmp_path), "SELFHEAL_CONFIG": ""}
    env.update({k: "" for k in os.environ if k.startswith(("SELFHEAL_BUS_", "SELFHEAL_CLUSTER_"))})
    done = stream(env=env)
    assert done.returncode == 1, done.stderr
    assert "no event bus configured" in done.stderr and "selfheal sandbox up" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_master_spark_cannot_parse_is_refused_with_the_forms_it_takes():
    done = stream("--master", "spark://127.0.0.1")
    assert done.returncode == 2
    assert ("--master must be local, local[N], spark://HOST:PORT, yarn or k8s://URL, got "
            "'spark://127.0.0.1'") in done.stderr
    assert "Traceback" not in done.stderr


def test_help_says_what_executors_on_a_cluster_need():
    done = stream("--help")
    for words in ("spark://HOST:PORT", "no Python runs on them",
                  "$SELFHEAL_SPARK_EXECUTOR_MEMORY", "the checkpoint is the driver's"):
        assert words in " ".join(done.stdout.split()), words


def test_executors_on_a_cluster_are_capped_and_local_mode_is_left_alone(monkeypatch):
    from streams.spark import EXECUTOR_CORES_ENV, EXECUTOR_MEMORY_ENV, executor_conf

    monkeypatch.delenv(EXECUTOR_MEMORY_ENV, raising=False)
    monkeypatch.delenv(EXECUTOR_CORES_ENV, raising=False)
    assert executor_conf("local[2]") == {}
    assert executor_conf("spark://127.0.0.1:7077") == {
        "spark.executor.memory": "768m", "spark.executor.cores": "1", "spark.cores.max": "2"}
    monkeypatch.setenv(EXECUTOR_MEMORY_ENV, "2g")
    assert executor_conf("yarn")["spark.executor.memory"] == "2g"


def test_a_checkpoint_uri_is_refused_with_what_to_give_instead():
    done = stream("--checkpoint", "hdfs://namenode/selfheal/detect")
    assert done.returncode == 2
    assert "is a URI; the checkpoint must be a directory path" in done.stderr
    assert "shared storage" in done.stderr and "Traceback" not in done.stderr


def test_the_driver_jvm_takes_extra_options_from_the_environment(monkeypatch):
    from streams.spark import DRIVER_JAVA_OPTIONS_ENV, driver_java_options

    monkeypatch.setenv(DRIVER_JAVA_OPTIONS_ENV, " -XX:TieredStopAtLevel=1 ")
    assert driver_java_options() == {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
    monkeypatch.setenv(DRIVER_JAVA_OPTIONS_ENV, "")
    assert driver_java_options() == {}


def test_the_driver_jvm_runs_without_the_c2_compiler_unless_told_otherwise(monkeypatch):
    from streams.spark import DRIVER_JAVA_OPTIONS_ENV, driver_java_options

    monkeypatch.delenv(DRIVER_JAVA_OPTIONS_ENV, raising=False)
    assert driver_java_options() == {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
