"""Ports for one `selfheal sandbox up`: reserved, never handed out twice, held until used.

A port picked by binding port 0 and closing the socket is free only for a moment: the
kernel may hand the same number to the next bind(0) (two brokers once got one port), or
to any other process's outgoing connection before the broker binds it. A `PortBook`
keeps every port it hands out bound (not listening) until the server that needs it is
about to start, so within one book no number comes back twice and no other process can
take it meanwhile. What a book cannot prevent (another process taking the port in the
moment between release and the server's bind) shows in the server's log as "Address
already in use"; `port_clash` finds it, so `up` can retry with new ports and say why.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from pathlib import Path


class PortBook:
    """Hands out free TCP ports on ``host``, each held bound until `release`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._held: dict[int, socket.socket] = {}
        self._given: set[int] = set()

    def take(self) -> int:
        """A port nobody else holds, not handed out by this book before."""
        for _ in range(100):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((self.host, 0))
            except OSError:
                sock.close()
                raise
            port = int(sock.getsockname()[1])
            if port in self._given:  # released earlier and handed back by the kernel
                sock.close()
                continue
            self._given.add(port)
            self._held[port] = sock
            return port
        raise OSError(f"no new free port on {self.host} after 100 tries")

    def release(self, ports: Iterable[int | None]) -> None:
        """Let go of these ports (their server binds them next); unknown ones are ignored."""
        for port in ports:
            sock = self._held.pop(port, None) if port is not None else None
            if sock is not None:
                sock.close()

    def held(self) -> set[int]:
        return set(self._held)

    def close(self) -> None:
        self.release(list(self._held))

    def __enter__(self) -> PortBook:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class PortClash(RuntimeError):
    """A server could not bind its port: another process took it first."""


_IN_USE = re.compile(r"Address already in use|BindException", re.IGNORECASE)
_PORT = re.compile(r"(?:port|:)\s*(\d{2,5})\b")


def port_clash(log_texts: Iterable[str], ports: Iterable[int | None]) -> str | None:
    """What the logs say about a port already in use ("port 41234 was already in use"),
    naming the port when the line holds one of ``ports``; None when no log says so."""
    wanted = {p for p in ports if p is not None}
    for text in log_texts:
        for line in text.splitlines():
            if not _IN_USE.search(line):
                continue
            for match in _PORT.finditer(line):
                if int(match.group(1)) in wanted:
                    return f"port {match.group(1)} was already in use"
            return f"one of its ports ({', '.join(map(str, sorted(wanted)))}) was already in use"
    return None


def read_logs(paths: Iterable[str | Path]) -> list[str]:
    """The text of each log that exists (a server that died early may have written none)."""
    texts = []
    for path in paths:
        try:
            texts.append(Path(path).read_text(errors="replace"))
        except FileNotFoundError:
            continue
    return texts
