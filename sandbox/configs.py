"""Renders the sandbox's config files: ZooKeeper, brokers, the KRaft controller (the
logging config is the Kafka line's: sandbox/versions.py).

Small, fast defaults for one machine: everything binds to 127.0.0.1, replication factors
follow the broker count, and Kafka's own leader auto-rebalance is off because leader
placement is kafka-selfheal's job.
"""

from __future__ import annotations

from pathlib import Path


def write_properties(path: Path, props: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def zookeeper_props(data_dir: Path, port: int) -> dict[str, object]:
    return {
        "dataDir": data_dir,
        "clientPort": port,
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0,
        "admin.enableServer": "false",
        "tickTime": 2000,
        "initLimit": 5,
        "syncLimit": 2,
        "4lw.commands.whitelist": "ruok,srvr,stat",
    }


def _common_broker_props(broker_count: int, log_dirs: list[Path]) -> dict[str, object]:
    rf = min(3, broker_count)
    return {
        "log.dirs": ",".join(str(d) for d in log_dirs),
        "num.partitions": 1,
        "default.replication.factor": rf,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": rf,
        "offsets.topic.num.partitions": 6,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min(2, rf),
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        "auto.leader.rebalance.enable": "false",
        "log.segment.bytes": 16 * 1024 * 1024,
        "log.retention.check.interval.ms": 60000,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "num.recovery.threads.per.data.dir": 1,
        "background.threads": 4,
        "replica.socket.timeout.ms": 10000,
        # A follower whose dir failed stops fetching; in KRaft mode acks=all writes wait
        # for it until the leader shrinks the ISR after this long (30 s by default). The
        # sandbox's event bus lives on the cluster it watches, so keep that wait short.
        "replica.lag.time.max.ms": 10000,
        # A failed sandbox dir (sandbox/disks.py moves it aside) still takes writes through
        # the files the broker holds open; the broker notices on its next new file there,
        # the high-watermark checkpoint (5 s by default). A real disk fails the next write.
        "replica.high.watermark.checkpoint.interval.ms": 1000,
        "delete.topic.enable": "true",
    }


def zk_broker_props(
    broker_id: int,
    port: int,
    rack: str | None,
    log_dirs: list[Path],
    zookeeper_connect: str,
    broker_count: int,
) -> dict[str, object]:
    props: dict[str, object] = {
        "broker.id": broker_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": 10000,
        "zookeeper.connection.timeout.ms": 10000,
    }
    if rack:
        props["broker.rack"] = rack
    props.update(_common_broker_props(broker_count, log_dirs))
    return props


def _quorum_props(controller_id: int, controller_port: int, quorum: str
                  ) -> dict[str, object]:
    # A static quorum names its voters; a dynamic one (KIP-853, Kafka 4's way) only where
    # to find them, the voters being written into the controller's storage by `format`.
    found = ({"controller.quorum.voters": f"{controller_id}@127.0.0.1:{controller_port}"}
             if quorum == "static" else
             {"controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}"})
    return {
        **found,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    }


def kraft_controller_props(
    node_id: int, port: int, log_dir: Path, quorum: str = "static"
) -> dict[str, object]:
    props: dict[str, object] = {
        "process.roles": "controller",
        "node.id": node_id,
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "log.dirs": log_dir,
    }
    if quorum == "dynamic":  # `format --standalone` writes the voter from this listener
        props["advertised.listeners"] = f"CONTROLLER://127.0.0.1:{port}"
    props.update(_quorum_props(node_id, port, quorum))
    return props


def kraft_broker_props(
    broker_id: int,
    port: int,
    rack: str | None,
    log_dirs: list[Path],
    metadata_dir: Path,
    controller_id: int,
    controller_port: int,
    broker_count: int,
    quorum: str = "static",
) -> dict[str, object]:
    props: dict[str, object] = {
        "process.roles": "broker",
        "node.id": broker_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        # The metadata log sits apart from the JBOD dirs: a failed data dir must not take
        # the cluster metadata (and so the whole broker) down with it.
        "metadata.log.dir": metadata_dir,
    }
    if rack:
        props["broker.rack"] = rack
    props.update(_quorum_props(controller_id, controller_port, quorum))
    props.update(_common_broker_props(broker_count, log_dirs))
    return props
