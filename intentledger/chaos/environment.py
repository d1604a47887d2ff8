"""A scenario's configuration of each service, as the environment its process starts with.

The protocol speaks of limits, a policy file, a tool registry and fault points; the services read
``INTENTLEDGER_*`` settings. This is the one place that translates, so what a protocol can set
and what a service reads cannot drift apart unnoticed (``tests/unit/chaos/test_environment.py``).
"""

from __future__ import annotations

from pathlib import Path

from shared.contracts.fault_protocol import FaultProtocol, Inject


def service_env(protocol: FaultProtocol, protocol_path: Path, service: str,
                armed: list[Inject], principals_file: Path | None = None,
                dispatcher_key_file: Path | None = None) -> dict[str, str]:
    """Settings for ``service``; ``armed`` are the fault rules its process starts with;
    ``principals_file`` lists who signs the protocol's proposals and the dispatcher's
    compensations, which it seals with ``dispatcher_key_file``."""
    env: dict[str, str] = {}
    limits = protocol.limits
    policy, tools = (str((protocol_path.parent / name).resolve()) if name else None
                     for name in (protocol.policy_file, protocol.tools_file))
    if service == "proposal-intake":
        _set(env, "INTENTLEDGER_INTAKE_", DEFAULT_RUN_SECONDS=limits.run_seconds,
             DEFAULT_MAX_CALLS=limits.run_calls, DEFAULT_MAX_ATTEMPTS=limits.run_attempts,
             TOOLS_FILE=tools, PRINCIPALS_FILE=principals_file)
    if service == "policy":
        # The policy reads amounts with the intake's registry.
        _set(env, "INTENTLEDGER_POLICY_", POLICY_FILE=policy, PRINCIPALS_FILE=principals_file)
        _set(env, "INTENTLEDGER_INTAKE_", TOOLS_FILE=tools)
    if service == "dispatcher":
        _set(env, "INTENTLEDGER_DISPATCHER_", LEASE_TTL_S=limits.lease_ttl_s,
             MAX_LOOKUPS=limits.lookups, RECOVERY_RESERVE_S=limits.recovery_reserve_s,
             POLICY_FILE=policy, TOOLS_FILE=tools, PRINCIPALS_FILE=principals_file,
             SIGNING_KEY_FILE=dispatcher_key_file)
    if tuning := protocol.services.get(service):
        env |= tuning.env
    if armed:
        env["INTENTLEDGER_FAULTS"] = ",".join(map(rule_text, armed))
    return env


def rule_text(rule: Inject) -> str:
    """The ``shared.faults`` rule: ``point=action[:seconds][@hit]``."""
    action = f"delay:{rule.seconds}" if rule.action == "delay" else rule.action
    return f"{rule.point}={action}" + (f"@{rule.hit}" if rule.hit else "")


def _set(env: dict[str, str], prefix: str, **values: object) -> None:
    env.update({prefix + name: str(value) for name, value in values.items() if value is not None})
