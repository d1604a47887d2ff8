"""A set-wise handler keeps delivery order (the policy's accepted intents, the dispatcher's
authorizations and receipts): a stretch of a batched type goes to its batch handler in one
call, anything between stretches through the routes in its place."""

from dataclasses import dataclass

from shared.messaging.routes import in_stretches


@dataclass(frozen=True)
class Event:
    event_type: str
    n: int


async def test_stretches_of_a_batched_type_go_together_and_others_in_their_place():
    seen: list = []

    async def together(uow, events):
        seen.append(("batch", [e.n for e in events]))

    async def routes(uow, event):
        seen.append(("one", event.n))

    apply = in_stretches(routes, {"ProposalAccepted": together})
    kinds = ["ProposalAccepted", "ProposalAccepted", "ApprovalGranted", "ProposalAccepted",
             "CompensationProposed", "ApprovalGranted"]
    await apply(None, [Event(kind, n) for n, kind in enumerate(kinds)])

    assert seen == [("batch", [0, 1]), ("one", 2), ("batch", [3]), ("one", 4), ("one", 5)]
