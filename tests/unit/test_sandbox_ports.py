"""The sandbox's ports: one `up` never hands out a port twice, and holds each until used."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sandbox import cluster, processes
from sandbox.ports import PortBook, port_clash
from sandbox.startup import StartupFailed, cause_of_death, check_alive
from sandbox.state import ServerState


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    return sock


def test_a_book_never_hands_out_the_same_port_twice_even_after_release() -> None:
    with PortBook() as book:
        seen = []
        for _ in range(200):
            port = book.take()
            seen.append(port)
            book.release([port])  # the kernel may give a released port straight back
        assert len(set(seen)) == len(seen)


def test_a_reserved_port_cannot_be_bound_by_anyone_else_until_released() -> None:
    with PortBook() as book:
        port = book.take()
        with pytest.raises(OSError):
            _bind(port).close()
        book.release([port])
        _bind(port).close()  # released: its server binds it


def test_closing_the_book_releases_every_port_it_still_holds() -> None:
    book = PortBook()
    ports = [book.take() for _ in range(5)]
    assert book.held() == set(ports)
    book.close()
    assert book.held() == set()
    for port in ports:
        _bind(port).close()


def test_free_port_never_repeats_within_a_process() -> None:
    ports = [processes.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


def test_a_planned_layout_gives_every_server_and_exporter_its_own_port(
        tmp_path: Path) -> None:
    with PortBook() as book:
        state = cluster.plan_layout(tmp_path, brokers=8, log_dirs=1, racks=2, mode="zk",
                                    kafka="3.9",
                                    ports=book)
        ports = [p for s in state.servers() for p in (s.port, s.exporter_port) if p]
        assert len(ports) == 1 + 8 * 2
        assert len(set(ports)) == len(ports)
        assert book.held() == set(ports)  # all still held until each server starts


def test_port_clash_names_the_port_an_address_in_use_line_mentions() -> None:
    log = ("[2025-01-01 00:00:00,000] ERROR [KafkaServer id=1] Fatal error during "
           "KafkaServer startup. (kafka.server.KafkaServer)\n"
           "org.apache.kafka.common.KafkaException: Socket server failed to bind to "
           "127.0.0.1:41234: Address already in use.\n")
    assert port_clash([log], [41234, 41235]) == "port 41234 was already in use"
    assert "already in use" in (port_clash(["java.net.BindException: Address already in "
                                            "use"], [5]) or "")
    assert port_clash(["all good\n"], [41234]) is None


def _dead_server(tmp_path: Path, log: str) -> ServerState:
    conf = tmp_path / "broker-1"
    conf.mkdir()
    (conf / "server.log").write_text(log)
    return ServerState(role="broker", node_id=1, port=41234, pid=None,
                       config=str(conf / "broker.properties"),
                       log_file=str(conf / "stdout.log"), exporter_port=41235)


def test_a_dead_server_is_explained_in_one_line_without_its_log_prefix(
        tmp_path: Path) -> None:
    server = _dead_server(tmp_path, "[2025-01-01 00:00:00,000] INFO starting\n"
                                    "[2025-01-01 00:00:01,000] ERROR Exiting Kafka due to "
                                    "fatal exception (kafka.Kafka$)\n")
    cause = cause_of_death(server)
    assert cause == "its log says: ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)"
    with pytest.raises(StartupFailed) as failed:
        check_alive(server)
    assert "\n" not in failed.value.cause
    assert failed.value.cause.startswith("broker 1 (pid None) exited during start-up: ")
    assert "server.log" in failed.value.details  # the tail is kept for the progress lines


def test_a_full_disk_is_named_as_such(tmp_path: Path) -> None:
    server = _dead_server(tmp_path, "java.io.IOException: No space left on device\n")
    assert cause_of_death(server) == "the disk under the work dir is full"
