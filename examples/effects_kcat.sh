#!/usr/bin/env bash
# A subscriber of ledger.effects with kcat, no Python: any Kafka client can read the ledger.
#
# What it shows: kcat in consumer-group mode (-G, a group of the subscriber's own), printing
# one line per committed effect: event id, event type, operation key. Kafka delivers at least
# once, so copies are dropped by event id: the relay publishes the envelope's event_id (a UUIDv7
# minted once, with the outbox row) as a record header, the same on every copy. kcat commits
# the offsets of what it has read (librdkafka's auto-commit, and on exit); a subscriber that
# must not lose an effect to a crash of its processing commits after processing instead, as
# examples/effects_subscriber.py does.
#
# Run it (kcat: `apt-get install kcat` or `brew install kcat`):
#
#   INTENTLEDGER_KAFKA_BOOTSTRAP=localhost:19092 examples/effects_kcat.sh -g audit -c 100 -e
#
# Options: -t topic (ledger.effects), -g consumer group (effects-kcat-example), -c stop after
# this many records (copies count), -e stop at the end of the topic, -w stop after this many
# seconds (with timeout(1) of coreutils). A new group starts at the oldest retained record.
set -euo pipefail

topic=ledger.effects
group=effects-kcat-example
bootstrap=${INTENTLEDGER_KAFKA_BOOTSTRAP:-localhost:19092}
bounds=()
wait_s=
while getopts t:g:c:ew: option; do
    case $option in
        t) topic=$OPTARG ;;
        g) group=$OPTARG ;;
        c) bounds+=(-c "$OPTARG") ;;
        e) bounds+=(-e) ;;
        w) wait_s=$OPTARG ;;
        *) echo "usage: $0 [-t topic] [-g group] [-c count] [-e] [-w seconds]" >&2; exit 2 ;;
    esac
done

consume() {
    ${wait_s:+timeout "$wait_s"} kcat -q -b "$bootstrap" -G "$group" ${bounds[@]+"${bounds[@]}"} \
        -X auto.offset.reset=earliest -f '%h\t%s\n' "$topic"
}

# Headers arrive as "name=value,..." (%h), the envelope as one line of JSON (%s). The operation
# key is read from the payload with a pattern, to need nothing but a POSIX awk.
print_effects() {
    awk -F '\t' '
        {
            id = ""; type = ""
            n = split($1, headers, ",")
            for (i = 1; i <= n; i++) {
                eq = index(headers[i], "=")
                name = substr(headers[i], 1, eq - 1); value = substr(headers[i], eq + 1)
                if (name == "event_id") id = value
                if (name == "event_type") type = value
            }
            if (id == "" || type != "EffectCommitted" || seen[id]++) next
            key = ""
            if (match($2, /"operation_key": *"[^"]*"/)) {
                key = substr($2, RSTART, RLENGTH)
                sub(/^"operation_key": *"/, "", key); sub(/"$/, "", key)
            }
            print id, type, key
            fflush()
        }'
}

status=0
consume | print_effects || status=$?
if [ "$status" -eq 124 ] && [ -n "$wait_s" ]; then
    status=0  # timeout(1) ended kcat after -w seconds: the bound asked for, not a failure
fi
exit "$status"
