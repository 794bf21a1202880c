"""The whole-loop heal on a secured Kafka 4.4 KRaft sandbox (SASL_SSL, SCRAM-SHA-512,
StandardAuthorizer with no allow-everyone): each piece runs as its own principal with
only its rows of core/acls.py; a dir fails under traffic, the fix is proposed, approved
and healed, every acknowledged message is read once (heal_matrix.py), and no secret of
the sandbox is in any process log, any record on the bus or any API answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import cluster, loop
from sandbox.state import SandboxState
from tests.e2e.heal_matrix import api, heal_under_traffic

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[SandboxState]:
    state = cluster.up(tmp_path_factory.mktemp("secured-heal"), brokers=3, log_dirs=2,
                       racks=3, security="sasl_ssl")
    try:
        yield state
    finally:
        cluster.down(state.reload())


def _bus_records(state: SandboxState, prefix: str) -> dict[str, bytes]:
    """Every record's key and value on the loop's topics, by topic, read as the admin."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**cluster.client_config(state), "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(prefix)]
        seen: dict[str, bytearray] = {}
        for topic in topics:
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                read = 0
                while read < high - low:
                    msg = consumer.poll(5)
                    if msg is None:
                        break
                    if msg.error() is None:
                        seen.setdefault(topic, bytearray()).extend(
                            (msg.key() or b"") + (msg.value() or b""))
                        read += 1
        return {topic: bytes(records) for topic, records in seen.items()}
    finally:
        consumer.close()


def test_a_failed_disk_is_healed_with_each_piece_on_its_own_acls(secured, tmp_path_factory,
                                                                 record_property) -> None:
    security = secured.security
    assert security is not None
    secrets = {f"the secret in {name}": value for name, value in security.secrets().items()}
    secrets["the action signing key"] = str(secured.action_signing_key)

    def no_secret_anywhere(the_loop: loop.Loop, *_: object) -> None:
        secrets["the link secret"] = str(the_loop.config["serve"]["link_secret"])
        secrets["the API token"] = the_loop.api_token
        outputs: dict[str, bytes] = {
            str(log): log.read_bytes() for log in Path(the_loop.work_dir, "logs").glob("*")}
        on_bus = _bus_records(secured, the_loop.topic(""))
        outputs["records on the bus"] = b"".join(on_bus.values())
        outputs["the actions API"] = json.dumps(api(the_loop, "GET", "/actions")).encode()
        # the metrics path scraped the exporters over HTTPS with basic auth: records, and
        # never a refused scrape (a metrics path without its settings reports nothing)
        assert on_bus.get(the_loop.topic("broker-metrics"))
        metrics_log = Path(the_loop.work_dir, "logs", "collect-metrics.log").read_text()
        assert "https://" in metrics_log and "ERROR exporter" not in metrics_log, metrics_log
        leaks = [(what, where) for where, text in outputs.items()
                 for what, secret in secrets.items() if secret.encode() in text]
        assert leaks == []

    heal_under_traffic(secured, tmp_path_factory.mktemp("secured-loop"), record_property,
                       prefix="selfheal.", after=no_secret_anywhere)
