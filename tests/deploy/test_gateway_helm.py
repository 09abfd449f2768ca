"""The gateway's part of the Helm chart: its own Deployment, Service, key Secret, HPA and Ingress."""

from __future__ import annotations

import subprocess

import pytest
from test_helm import _one, _render, needs_helm

GATEWAY = "tts-tts-triton-gateway"


@needs_helm
def test_the_gateway_is_off_by_default() -> None:
    assert not [d for d in _render() if d["metadata"]["name"].startswith(GATEWAY)]


@needs_helm
def test_the_gateway_talks_to_the_headless_grpc_service_with_keys_from_a_secret() -> None:
    docs = _render("gateway.enabled=true", "gateway.apiKeys.keys={sk-one,sk-two}", "gateway.autoscaling.enabled=true",
                   "gateway.ingress.enabled=true", "gateway.ingress.host=tts.example.com")
    pod = _one(docs, "Deployment", GATEWAY)["spec"]["template"]
    container = pod["spec"]["containers"][0]
    headless = _one(docs, "Service", "tts-tts-triton-grpc")
    assert headless["spec"]["clusterIP"] == "None"
    # its own balancer over every ready pod of the headless Service, which Triton's max connection age keeps fresh
    # for plain gRPC clients too
    assert f"--triton-url=dns:///tts-tts-triton-grpc:{headless['spec']['ports'][0]['port']}" in container["args"]
    triton = _one(docs, "Deployment", "tts-tts-triton")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert any(a.startswith("--grpc-max-connection-age=") for a in triton)
    assert "--api-keys-file=/etc/tts-gateway/keys" in container["args"]
    assert {"--header-timeout=10", "--body-timeout=10", "--keep-alive=75", "--max-connections=8192"} <= set(
        container["args"])
    secret = _one(docs, "Secret", f"{GATEWAY}-keys")
    assert secret["stringData"]["keys"].split() == ["sk-one", "sk-two"]
    assert pod["spec"]["volumes"][1]["secret"]["secretName"] == f"{GATEWAY}-keys"
    assert pod["metadata"]["labels"]["tts-tts-triton-client"] == "true"  # let through Triton's NetworkPolicy
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    hpa = _one(docs, "HorizontalPodAutoscaler", GATEWAY)
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "tts_gateway_streams_in_flight"
    assert _one(docs, "Ingress", GATEWAY)["spec"]["rules"][0]["host"] == "tts.example.com"
    assert _one(docs, "Service", GATEWAY)["spec"]["ports"][0]["targetPort"] == "http"
    policy = _one(docs, "NetworkPolicy", GATEWAY)["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]  # every source, this port only


@needs_helm
def test_keys_on_without_any_key_fails_to_render() -> None:
    with pytest.raises(subprocess.CalledProcessError) as caught:
        _render("gateway.enabled=true")
    assert "gateway.apiKeys.keys" in caught.value.stderr
    args = _one(_render("gateway.enabled=true", "gateway.apiKeys.enabled=false"), "Deployment", GATEWAY)
    assert "--allow-anonymous" in args["spec"]["template"]["spec"]["containers"][0]["args"]


@needs_helm
def test_the_exposed_gateway_is_hardened() -> None:
    """Issue 55's chart findings: service-account tokens mounted, no egress policy, Ingress TLS off by default and
    /metrics routed publicly, no CPU limits, no gateway disruption budget; and the WebSocket Origin allow-list."""
    docs = _render("gateway.enabled=true", "gateway.apiKeys.keys={sk-one}", "gateway.ingress.enabled=true",
                   "gateway.ingress.host=tts.example.com", "cache.enabled=true", "cache.bundled.enabled=true",
                   "gateway.wsAllowedOrigins={https://app.example.com}")
    pods = {name: _one(docs, "Deployment", name)["spec"]["template"]["spec"]
            for name in (GATEWAY, "tts-tts-triton", "tts-tts-triton-redis")}
    assert all(spec["automountServiceAccountToken"] is False for spec in pods.values())
    assert all("cpu" in spec["containers"][0]["resources"]["limits"] for spec in pods.values())
    args = pods[GATEWAY]["containers"][0]["args"]
    assert "--ws-allowed-origin=https://app.example.com" in args and "--requests-per-minute=600" in args
    assert "--max-audio-seconds=900" in args and "--shared-cache" not in args
    ingress = _one(docs, "Ingress", GATEWAY)["spec"]
    assert ingress["tls"] == [{"hosts": ["tts.example.com"], "secretName": f"{GATEWAY}-tls"}]
    assert [p["path"] for p in ingress["rules"][0]["http"]["paths"]] == ["/v1/"]  # not /metrics, /healthz
    policies = {p["metadata"]["name"]: p["spec"] for p in docs if p["kind"] == "NetworkPolicy"}
    assert all("Egress" in spec["policyTypes"] for spec in policies.values()) and len(policies) == 3
    dns, triton = policies[GATEWAY]["egress"]  # the gateway reaches DNS and Triton's gRPC port, nothing else
    grpc_port = _one(docs, "Service", "tts-tts-triton-grpc")["spec"]["ports"][0]["port"]
    triton_labels = _one(docs, "Deployment", "tts-tts-triton")["spec"]["template"]["metadata"]["labels"]
    assert {p["port"] for p in dns["ports"]} == {53} and triton["ports"] == [{"port": grpc_port, "protocol": "TCP"}]
    assert triton["to"][0]["podSelector"]["matchLabels"].items() <= triton_labels.items()
    assert policies["tts-tts-triton-redis"]["egress"] == []
    assert _one(docs, "PodDisruptionBudget", GATEWAY)["spec"]["maxUnavailable"] == 1
    plain = _render("gateway.enabled=true", "gateway.apiKeys.keys={sk-one}", "gateway.ingress.enabled=true",
                    "gateway.ingress.host=tts.example.com", "gateway.ingress.plainHttp=true")
    assert "tls" not in _one(plain, "Ingress", GATEWAY)["spec"]
