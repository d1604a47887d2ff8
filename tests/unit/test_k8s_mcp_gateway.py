"""The MCP gateway in each overlay answers the names clients in other namespaces reach its
Service by: its tokens' audience is that URL, and every in-cluster name of the Service is a
Host header it serves (the DNS-rebinding check answers any other 421)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from tests.support.k8s import OVERLAYS, kustomize_command, of_kind, render

pytestmark = pytest.mark.skipif(kustomize_command() is None, reason="no kustomize or kubectl")
NAMESPACES = {"dev": "intentledger-dev", "prod": "intentledger"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateway_serves_every_in_cluster_name_of_its_service(overlay):
    objects = render(overlay)
    env = next(cm for name, cm in of_kind(objects, "ConfigMap").items()
               if name.startswith("intentledger-env-"))["data"]
    namespace = NAMESPACES[overlay]
    [service] = [s for name, s in of_kind(objects, "Service").items() if name == "mcp-gateway"]
    names = [f"mcp-gateway.{namespace}{suffix}" for suffix in ("", ".svc", ".svc.cluster.local")]
    hosts = json.loads(env["INTENTLEDGER_MCP_GATEWAY_ALLOWED_HOSTS"])
    assert {f"{name}:*" for name in ["mcp-gateway", *names]} <= set(hosts)
    resource = urlsplit(env["INTENTLEDGER_MCP_GATEWAY_RESOURCE_URL"])
    assert f"{resource.hostname}:*" in hosts
    assert resource.hostname == f"mcp-gateway.{namespace}.svc"
    assert resource.port in {port["port"] for port in service["spec"]["ports"]}
