"""The services' own fate: one that ends during the run invalidates it (nothing restarts it
here), one that does not stop cleanly is worth a warning."""

from __future__ import annotations

from intentledger.chaos.stack import Stack


class ServiceWatch:
    def __init__(self, stack: Stack, problems: list[str], warnings: list[str]) -> None:
        self.stack = stack
        self.problems = problems
        self.warnings = warnings
        self._dead: set[str] = set()

    def check_running(self) -> None:
        """A problem for each service found ended (once each)."""
        for replica in self.stack.replicas.values():
            if not replica.running and replica.label not in self._dead:
                self._dead.add(replica.label)
                status = replica.process.poll() if replica.process else None
                self.problems.append(f"{replica.label} died during the run (exit {status}); "
                                     f"see {replica.log_path}")

    def check_exit_statuses(self) -> None:
        """After the stack stopped: a warning for each service that exited other than 0."""
        for replica in self.stack.replicas.values():
            status = replica.process.returncode if replica.process else None
            if replica.label not in self._dead and status not in (0, None):
                self.warnings.append(f"{replica.label} exited with {status} when stopped (not 0: "
                                     f"it did not finish within the stop grace); see "
                                     f"{replica.log_path}")
