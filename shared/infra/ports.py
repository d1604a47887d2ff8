"""Port choice for the local services.

Ports are checked on 127.0.0.1 with ``SO_REUSEADDR``, as Kafka (JVM default) and PostgreSQL
bind them, so a port held only by TIME_WAIT connections of a just-stopped broker counts as
free and a restarted broker gets its old port back.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Collection, Iterable

HOST = "127.0.0.1"


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def wait_free(ports: Collection[int], timeout: float) -> list[int]:
    """Ports still busy after ``timeout``; empty when all are free.

    A SIGKILLed JVM is reaped before the kernel has closed all its listening sockets,
    so a restart on the same ports waits for them instead of failing at once.
    """
    deadline = time.monotonic() + timeout
    while (busy := [port for port in ports if not is_free(port)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return busy


def free_port() -> int:
    """A port the kernel considers unused right now (it may be taken before we bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def choose(candidates: Iterable[int | None], taken: set[int]) -> int:
    """The first free candidate not already handed out, else any free port.

    Callers pass the recorded port first, then the configured one: the recorded choice keeps
    endpoints stable across ``up``/``down``; the configured one is the documented default.
    """
    for port in candidates:
        if port and port not in taken and is_free(port):
            taken.add(port)
            return port
    while (port := free_port()) in taken:
        pass
    taken.add(port)
    return port
