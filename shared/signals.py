"""Graceful shutdown: SIGTERM (Kubernetes, ``docker stop``, ``kill``) and SIGINT (Ctrl-C) set one
event; each service then stops taking work, finishes what is in flight and closes."""

import asyncio
import logging
import signal

log = logging.getLogger(__name__)


def stop_on_signals() -> asyncio.Event:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()

    def stop(signum: signal.Signals) -> None:
        log.info("%s received: stopping", signum.name)
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    return stopping
