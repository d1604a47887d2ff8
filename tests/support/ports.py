"""Ports for the servers a test starts (a service's health endpoint, a downstream's HTTP API).

A port found by binding port 0 is one of the kernel's ephemeral ports, the range every outgoing
connection also takes its local port from; in the moment between the probe and the server's own
bind, one of the stack's many client connections (PostgreSQL pools, Kafka clients) can take it,
and the server dies with "address already in use". One CI run lost the policy's health port so,
and the test's services ran on into the next tests. A port below the ephemeral range is taken by
nothing but a listener.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000


def free_port() -> int:
    """A port nothing listens on right now, outside the ephemeral range where the kernel says
    where that is (else any port the kernel gives)."""
    below = _ephemeral_start()
    for port in random.sample(range(LOWEST, below), min(100, max(below - LOWEST, 0))):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LOWEST
