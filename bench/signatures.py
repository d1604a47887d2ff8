"""Signature benchmark: what signing and verifying one proposal record costs, against the work
the intake already does per record, measured in the same run.

    python -m bench.signatures [--records 2000] [--out bench/results]

Figures (written to signatures.json, plotted to signatures.png), in microseconds per record of
a realistic proposal (an OpenAI chat turn with one debit, 375 bytes):
- ``sign_us`` / ``verify_us`` per algorithm (Ed25519, ES256): ``shared.identity.signatures``;
- ``parse_us`` (baseline): parsing the same record into the intake's proposals
  (``formats.to_proposals`` over ``json.loads``), which every record costs today.
Ratios to the baseline are reported because absolute numbers depend on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from services.proposal_intake.formats import to_proposals
from shared.identity.principals import Principals
from shared.identity.signatures import generate_signing_key, sign, verify

RECORD = json.dumps({
    "format": "openai.chat", "run_id": "run-bench-1", "principal_id": "agent-7",
    "tenant_id": "acme", "operation_keys": {"call_1": "order-7:debit"},
    "message": {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function", "function": {
            "name": "wallet_debit",
            "arguments": json.dumps({"wallet_id": "w-1", "amount": "40.00",
                                     "currency": "EUR"})}}]}}).encode()
ROUNDS = 5


def per_call_us(work: Callable[[], object], records: int) -> float:
    """The median over ``ROUNDS`` rounds of ``records`` calls (the median resists a neighbour's
    burst on a shared machine)."""
    rounds = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for _ in range(records):
            work()
        rounds.append((time.perf_counter() - began) / records * 1e6)
    return statistics.median(rounds)


def main(records: int, out: Path) -> dict:
    parse_us = per_call_us(lambda: to_proposals(json.loads(RECORD)), records)
    result: dict = {"records": records, "record_bytes": len(RECORD), "parse_us": parse_us,
                    "algorithms": {}}
    for name, curve in (("Ed25519", "Ed25519"), ("ES256", "P-256")):
        key = generate_signing_key(f"bench-{name}", curve)
        principals = Principals.model_validate({"principals": [{
            "id": "agent-7", "kind": "agent", "tenants": ["acme"],
            "keys": [{"kid": key.kid, "jwk": key.as_dict(private=False)}]}]})
        token = sign(RECORD, key, principal_id="agent-7", tenant_id="acme")
        sign_us = per_call_us(lambda k=key: sign(RECORD, k, principal_id="agent-7",
                                                 tenant_id="acme"), records)
        verify_us = per_call_us(lambda t=token, p=principals: verify(RECORD, t, p), records)
        result["algorithms"][name] = {"sign_us": sign_us, "verify_us": verify_us,
                                      "verify_vs_parse": verify_us / parse_us}
    out.mkdir(parents=True, exist_ok=True)
    (out / "signatures.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, out / "signatures.png")
    return result


def _plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["parse (baseline)"]
    values = [result["parse_us"]]
    for algorithm, figures in result["algorithms"].items():
        names += [f"{algorithm} sign", f"{algorithm} verify"]
        values += [figures["sign_us"], figures["verify_us"]]
    figure, axis = plt.subplots(figsize=(7, 3.5))
    axis.barh(names, values)
    axis.set_xlabel(f"µs per record ({result['record_bytes']} bytes)")
    axis.set_title("Signing and verifying a proposal record")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    arguments = parser.parse_args()
    print(json.dumps(main(arguments.records, arguments.out), indent=2))
