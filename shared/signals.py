"""Graceful shutdown: SIGTERM (Kubernetes, ``kill``) and SIGINT (Ctrl-C) set one event."""

import asyncio
import signal


def stop_on_signals() -> asyncio.Event:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    return stopping
