#!/usr/bin/env bash
# An agent without our SDK: a generic proposal published with kcat, signed by
# examples/sign_proposal.mjs (Node's own crypto), the answer read back from the tenant's agent.results.<tenant>.
#
# What it shows: the record's value is plain JSON; who sent it is proven by the
# intentledger-signature header alone (a detached JWS over those exact bytes), never by the
# principal_id and tenant_id the JSON names, which must match the signature's.
#
# Run it (kcat: `apt-get install kcat`; node >= 18; the intake and a relay running):
#
#   INTENTLEDGER_KAFKA_BOOTSTRAP=localhost:19092 examples/propose_kcat.sh \
#       -k ~/.intentledger/agent-7.jwk -p agent-7 -t acme -r run-1 -o order-7:debit
#
# It prints the intake's answer to the call (accepted, duplicate or rejected with its reason).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bootstrap=${INTENTLEDGER_KAFKA_BOOTSTRAP:-localhost:19092}
key= principal= tenant= run=run-$$ operation_key=order-$$:debit
while getopts k:p:t:r:o: option; do
    case $option in
        k) key=$OPTARG ;; p) principal=$OPTARG ;; t) tenant=$OPTARG ;;
        r) run=$OPTARG ;; o) operation_key=$OPTARG ;;
        *) echo "usage: $0 -k key.jwk -p principal -t tenant [-r run] [-o operation_key]" >&2
           exit 2 ;;
    esac
done
[ -n "$key" ] && [ -n "$principal" ] && [ -n "$tenant" ] || { echo "need -k, -p and -t" >&2; exit 2; }

record=$(printf '{"format": "generic", "run_id": "%s", "principal_id": "%s", "tenant_id": "%s", "tool": "wallet.debit", "call_id": "call-1", "operation_key": "%s", "arguments": {"wallet_id": "w-1", "amount": "12.50", "currency": "EUR"}}' \
    "$run" "$principal" "$tenant" "$operation_key")
signature=$(printf '%s' "$record" | node "$here/sign_proposal.mjs" "$key" "$principal" "$tenant")

printf '%s' "$record" | kcat -q -b "$bootstrap" -P -t agent.proposals -k "$run" \
    -H "intentledger-signature=$signature"
# The answer on the tenant's agent.results.<tenant> that names this run is ours (a run id of
# one's own). Read to the end of every partition (-e) once a second until it is there (the
# topic itself appears with the tenant's first answer).
for _ in $(seq 30); do
    answer=$(kcat -q -b "$bootstrap" -C -t "agent.results.$tenant" -o beginning -e -f '%s\n' \
             | grep -F "$run" | head -n 1 || true)
    if [ -n "$answer" ]; then
        printf '%s\n' "$answer"
        exit 0
    fi
    sleep 1
done
echo "no answer within 30 s" >&2
exit 1
