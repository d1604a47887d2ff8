"""What the harness knows of each proposal it published, by index: when it was published and in
which step, when and how it was answered. Latency, the verdicts and the checks are read from
here."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict


class Proposals:
    def __init__(self) -> None:
        self.t_pub: list[float] = []
        """Wall clock of each publish (epoch seconds)."""
        self.step_of: list[int] = []
        self.t_acc: list[float] = []
        """When its ProposalAccepted arrived (NaN until then)."""
        self.t_set: list[float] = []
        """When its ToolCallSettled arrived (NaN until then)."""
        self.t_set_occurred: list[float] = []
        """The settled announcement's own ``occurred_at``."""
        self.t_returned: list[float] = []
        """When ``Client.call`` returned its outcome, for proposals sent through the client
        (NaN for raw ones, and until then)."""
        self.client_status: dict[int, str] = {}
        """The status each client call returned (``pending`` if it had not settled in time)."""
        self.status: list[str | None] = []
        self.settled_count: list[int] = []
        self.settled_statuses: dict[int, set[str]] = defaultdict(set)
        self.answers: Counter[str] = Counter()
        """Every answer on the tenants' results topics by kind (and rejection reason; an answer on
        another tenant's topic than its proposal's: ``wrong_tenant``)."""
        self.accepted = 0
        self.settled = 0

    def __len__(self) -> int:
        return len(self.t_pub)

    def published(self, step_index: int) -> None:
        """Records the next proposal as published now, in step ``step_index``."""
        self.t_pub.append(time.time())
        self.step_of.append(step_index)
        for column in (self.t_acc, self.t_set, self.t_set_occurred, self.t_returned):
            column.append(math.nan)
        self.status.append(None)
        self.settled_count.append(0)

    def client_ms(self, i: int) -> float:
        """Publish to the client's returned outcome, in milliseconds; NaN without one."""
        return (self.t_returned[i] - self.t_pub[i]) * 1000

    def latency_ms(self, i: int, *, inf_if_missing: bool = False) -> float:
        """Publish to settled, in milliseconds; NaN (or infinity) while unsettled."""
        settled = self.t_set[i]
        if math.isnan(settled):
            return math.inf if inf_if_missing else math.nan
        return (settled - self.t_pub[i]) * 1000
