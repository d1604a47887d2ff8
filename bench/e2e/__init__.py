"""End-to-end benchmark: agents' proposals through every service to their settled result.

    python -m bench.e2e                      # the ramp (60 s steps), 10/s for 60 s, baselines
    python -m bench.e2e --quick              # a smoke: 25, 50, 100, 200/s, then 10/s, 10 s each
    python -m bench.e2e --rates 100,400 --step-seconds 30 --replicas dispatcher=2
    python -m bench.e2e --tenants 4          # the same load offered by four tenants at once

What runs: Kafka and PostgreSQL (attached when ``INTENTLEDGER_KAFKA_BOOTSTRAP`` and
``INTENTLEDGER_DATABASE_URL`` are set, else ``intentledger infra up``), full durability as
configured there; the relay, proposal-intake, policy, dispatcher, projection and the reference
wallet as real processes (``intentledger.chaos.stack.Stack``), under ``bench/policy.yaml`` and
``config/tools.example.yaml``.

The load is open-loop: raw proposals (the generic envelope and OpenAI chat, alternating; each
its own operation key; runs of ``--calls-per-run`` calls spread over ``--active-runs`` runs at
a time and over ``--wallets`` wallets) are published to ``agent.proposals`` on a fixed
schedule, never waiting for answers. With ``--tenants N`` the runs are dealt out among N
tenants, each with its own principal and key, wallets, results topic and policy rules
(``tenancy``). First the rate ramps up through ``--rates`` step by step;
once the stack has drained, a latency phase offers ``--latency-rate`` (10/s, where issue 22
states its p50/p99 targets) for one step; then a client phase offers ``--client-rate`` (10/s)
through ``intentledger_client.Client.call``, each call timed to the outcome it returned. A step
is *sustainable* when, for its whole length, the end-to-end p99 (proposals published in its
second half, unanswered ones counting as infinitely late) stays within ``--max-p99-ms`` and the
backlog at its end (consumer lag of every group + pending outbox rows + calls due at the
dispatcher) is at most ``--max-backlog-s`` seconds of the offered rate. The ramp stops at the
first step that is not sustainable (cut short as soon as its backlog passes ``--abort-
backlog-s`` seconds of load); ``sustained_proposals_per_s`` is the highest sustainable rate.

Latency per call is measured from the proposal's publish to its ``ToolCallSettled`` on its
tenant's ``agent.results.<tenant>`` (the headline) and to the intake's ``ProposalAccepted``,
matched by call id; per-hop latency comes from the event timestamps of the projection's
history, the wallet's debit rows and the settled announcement. CPU seconds and peak RSS are
measured per process (each service, Kafka's JVM, PostgreSQL's postmaster with every backend),
with the harness itself and the machine's total reported beside them, and the host's pace
(``pace_ms``: how long a fixed interpreter loop took, in CPU time, while the step ran) beside
every step.

After the ramp the stack drains, and correctness is checked from the records that own each
fact: every proposal was accepted once and reached exactly one terminal state (dispatcher and
projection agree), every succeeded call has exactly one wallet debit per operation key and
nothing else has one, every wallet's balance equals its opening balance minus its debits,
nothing was dead-lettered or parked, and the agent was told, on its own tenant's topic. A lost
or duplicated effect marks the run FAILED (``"passed": false`` in the JSON, exit status 1),
whatever its speed.

PostgreSQL's own counters give each step's statements and commits per settled proposal, and
the run's most called statements (``pg_stat_statements``, preloaded by the local PostgreSQL).

Writes ``bench/results/e2e.json`` and the plots ``e2e-timeline.png`` (throughput, latency and
backlog over time), ``e2e-latency-cdf.png`` (the latency phase, and every step) and ``e2e-cpu.png``
(CPU and memory per process).

The code, one job a module: ``config`` (the command line), ``harness`` (one run, start to end,
wiring the rest), ``startup`` (wallets, services, durability), ``pipeline`` (the services,
groups, outboxes and call states under test), ``names`` (this run's ids), ``tenancy`` (its
tenants and their policy), ``load`` (the open-loop generator), ``client_load`` (the same
schedule through the thin client), ``answers`` (the tenants' ``agent.results.<tenant>``),
``proposals`` (what is known per proposal), ``phases`` (warm-up, ramp, latency phase),
``steps`` (a step and its verdict), ``quiet`` (caught up, drained), ``sampler`` (the timeline),
``backlog`` (lag and pending outbox rows), ``meter`` (CPU and memory), ``pace`` (the host's
pace), ``statements`` (PostgreSQL's statements, commits and planning), ``watch`` (services
that died), ``profiles`` (py-spy), ``transactions`` (each service's transactions, from
PostgreSQL's statement log), ``server_settings`` (what ``statements`` and ``transactions`` set
on the server for a while), ``hops`` (per-hop latency), ``correctness`` (the end-of-run
checks), ``baselines`` (the same-run peers), ``floor`` (the pipeline beside its skeleton,
``bench.baselines.skeleton``), ``stats``, ``figures`` and ``result`` (the figures
of ``e2e.json``), ``report`` (the files and the printed summary), ``plots``.
"""
