"""Containers and Kubernetes (SPEC §25): the image, built with buildah from a
base made of Debian's packages (no registry), runs awc as a non-root user;
the manifests validate against Kubernetes' schemas offline and wire the
probes, the grace, the Secret and KEDA's trigger to what awc really does."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support import ROOT

MANIFESTS = ROOT / "deploy" / "kubernetes"
BASE = "localhost/awc-base:bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def manifests() -> dict[str, dict[str, Any]]:
    """Every object in deploy/kubernetes, by `<kind>/<name>`."""
    yaml = pytest.importorskip("yaml")
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            out[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return out


def env_of(container: dict[str, Any], objects: dict[str, dict[str, Any]]) -> dict[str, str]:
    """A container's environment: its envFrom ConfigMaps, then its env."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(objects[f"ConfigMap/{source['configMapRef']['name']}"]["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", [])})
    return env


def test_the_manifests_validate_against_the_kubernetes_schemas() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    objects = manifests()
    version = kv.latest_version()
    for key, doc in objects.items():
        if doc["apiVersion"].startswith("keda.sh/"):
            continue
        kv.validate(doc, version, strict=True), key
    # KEDA's ScaledJob carries a whole batch/v1 JobSpec: hold it to the schema.
    spec = objects["ScaledJob/awc-tick"]["spec"]["jobTargetRef"]
    kv.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t"},
                 "spec": spec}, version, strict=True)
    with pytest.raises(kv.ValidationError):  # the check can fail
        kv.validate({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t"},
                     "spec": {**spec, "activeDeadlineSecs": 5}}, version, strict=True)


def test_the_loop_deployment_probes_health_and_outlasts_the_stop_grace() -> None:
    objects = manifests()
    pod = objects["Deployment/awc-loop"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = env_of(container, objects)
    assert container["args"] == ["loop"]
    port = int(env["AWC_METRICS_PORT"])
    assert env["AWC_METRICS_ADDRESS"] == "0.0.0.0"  # the kubelet probes the pod's address
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[container["livenessProbe"]["httpGet"]["port"]] == port
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["terminationGracePeriodSeconds"] > int(env["AWC_STOP_GRACE_SECS"])
    assert "resources" in container and container["resources"]["limits"]["memory"]


@pytest.mark.parametrize("key", ["Deployment/awc-loop", "CronJob/awc-tick", "ScaledJob/awc-tick",
                                 "Job/awc-migrate"])
def test_every_pod_reads_its_connection_string_from_a_secret_file_as_non_root(key: str) -> None:
    objects = manifests()
    doc = objects[key]
    spec = doc["spec"]
    template = (spec["jobTemplate"]["spec"]["template"] if doc["kind"] == "CronJob"
                else spec["jobTargetRef"]["template"] if doc["kind"] == "ScaledJob"
                else spec["template"])
    pod = template["spec"]
    (container,) = pod["containers"]
    env = env_of(container, objects)
    assert "DATABASE_URL" not in env  # never the value itself in a pod spec
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_volume = [n for n, v in volumes.items() if "secret" in v]
    assert len(secret_volume) == 1
    assert volumes[secret_volume[0]]["secret"]["secretName"] == "awc-database"
    assert env["AWC_DATABASE_URL_FILE"] == mounts[secret_volume[0]] + "/url"
    uid = re.search(r"^USER (\d+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert uid is not None
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid.group(1))
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_tick_cronjob_allows_overlap_and_ends_before_the_next_minute() -> None:
    objects = manifests()
    cron = objects["CronJob/awc-tick"]["spec"]
    assert cron["schedule"] == "* * * * *" and cron["concurrencyPolicy"] == "Allow"
    job = cron["jobTemplate"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    assert container["args"] == ["tick"]
    budget = int(env_of(container, objects)["AWC_TICK_MAX_SECS"])
    assert budget < job["activeDeadlineSeconds"] < 60


def test_keda_scales_the_loop_and_runs_ticks_on_awcs_depth_function(
    conn: psycopg.Connection[Any]
) -> None:
    objects = manifests()
    scaled = objects["ScaledObject/awc-loop"]["spec"]
    target = scaled["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "awc-loop")
    assert f"Deployment/{target['name']}" in objects
    auth = objects["TriggerAuthentication/awc-database"]["spec"]["secretTargetRef"]
    assert {(a["parameter"], a["name"], a["key"]) for a in auth} == {
        ("connection", "awc-database", "url")}
    conn.execute("INSERT INTO awc.jobs (kind) SELECT 'noop' FROM generate_series(1, 7)")
    for key in ("ScaledObject/awc-loop", "ScaledJob/awc-tick"):
        (trigger,) = objects[key]["spec"]["triggers"]
        assert trigger["type"] == "postgresql"
        assert trigger["authenticationRef"]["name"] == "awc-database"
        query = trigger["metadata"]["query"]
        assert "awc.ready_jobs(" in query and "count(" not in query.lower()
        assert float(trigger["metadata"]["targetQueryValue"]) > 0
        # KEDA's scaler needs one integer back: run the query as KEDA would.
        assert conn.execute(query).fetchall() == [(7,)]


# -- the image -------------------------------------------------------------------------------


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        message = f"{', '.join(missing)} not installed (Debian packages; .ci/run installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def buildah(*args: str, timeout: float = 600,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "STORAGE_DRIVER": "vfs"})
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def local_base(tmp: Path) -> str:
    """A Debian bookworm base with python3, made from Debian's packages (no
    image registry), kept in buildah's store for the next run."""
    if buildah("inspect", BASE, check=False).returncode == 0:
        return BASE
    need("debootstrap")
    rootfs = tmp / "rootfs"
    subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv",
                    "bookworm", str(rootfs), "http://deb.debian.org/debian"],
                   check=True, capture_output=True, timeout=900)
    ctr = buildah("from", "scratch").stdout.strip()
    mnt = buildah("mount", ctr).stdout.strip()
    subprocess.run(["cp", "-a", f"{rootfs}/.", mnt], check=True, timeout=300)
    buildah("umount", ctr)
    buildah("commit", "-q", ctr, BASE)
    buildah("rm", ctr)
    return BASE


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need("buildah")
    if os.geteuid() != 0:
        pytest.skip("buildah's chroot isolation needs root here")
    base = local_base(tmp_path_factory.mktemp("base"))
    tag = f"localhost/awc-test:{uuid.uuid4().hex[:8]}"
    secret = ["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    buildah("bud", "--isolation", "chroot", "--network", "host", "--format", "docker",
            "--layers=false", "-q", *secret, "--build-arg", f"BASE={base}", "-t", tag, str(ROOT),
            timeout=900)
    yield tag
    buildah("rmi", "-f", tag, check=False)


def image_config(image: str) -> dict[str, Any]:
    """The image's Docker config (user, entrypoint, health check, ...)."""
    config: dict[str, Any] = json.loads(buildah("inspect", image).stdout)["Docker"]["config"]
    return config


@pytest.fixture
def container_db_url(db_url: str) -> Iterator[str]:
    """The test's database as the image's non-root user reaches it: over TCP
    on the host's network. The embedded server listens only on a Unix socket
    in a directory of its own, so a plain forwarder on 127.0.0.1 stands in
    front of it then."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.silent_proxy import SilentProxy

    if not str(conninfo_to_dict(db_url).get("host") or "").startswith("/"):
        yield db_url
        return
    proxy = SilentProxy(db_url)
    try:
        yield proxy.url_for(db_url)
    finally:
        proxy.close()


def run_in(image: str, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `sh -c script` in a fresh container of the image, on the host's network."""
    ctr = buildah("from", "-q", image).stdout.strip()
    try:
        return buildah("run", "--isolation", "chroot", "--network", "host", ctr, "--",
                       "sh", "-c", script, timeout=timeout, check=False)
    finally:
        buildah("rm", ctr, check=False)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_image_runs_awc_as_a_non_root_user_with_no_secret_baked_in(image: str) -> None:
    cfg = image_config(image)
    assert cfg["User"] == "10001" and cfg["StopSignal"] == "SIGTERM"
    assert cfg["Entrypoint"] == ["awc"] and cfg["Cmd"] == ["loop"]
    assert "/healthz" in " ".join(cfg["Healthcheck"]["Test"])
    assert not any(e.split("=", 1)[0] in {"DATABASE_URL", "AWC_UI_TOKEN"} for e in cfg["Env"])
    done = run_in(image, "id -u && awc --help && awc --version && test ! -e /src")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "10001" and any("loop" in ln for ln in lines)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_awc_demo_and_the_loop_health_check_run_in_the_image(
    image: str, container_db_url: str, conn: psycopg.Connection[Any]
) -> None:
    # The demo in its own database on the test's server, reached over the
    # host's network; the image's WORKDIR is writable by its user.
    demo = run_in(image, f"awc demo --database-url '{container_db_url}'")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "COMPLETED" in demo.stdout
    # The loop answers the image's own HEALTHCHECK and drains on SIGTERM.
    test = image_config(image)["Healthcheck"]["Test"]
    assert test[0] == "CMD"
    check = " ".join(shlex.quote(a) for a in test[1:])
    port = 20000 + uuid.uuid4().int % 20000
    script = (
        f"export DATABASE_URL='{container_db_url}' AWC_CAS_URL=memory:// AWC_METRICS_PORT={port}"
        " AWC_METRICS_ADDRESS=127.0.0.1 AWC_STOP_GRACE_SECS=2; awc loop 2>/tmp/loop.err & pid=$!;"
        f" ok=1; for i in $(seq 1 100); do if {check} 2>/dev/null; then ok=0; break; fi;"
        " sleep 0.2; done; kill -TERM $pid; wait $pid; rc=$?;"
        " echo health=$ok loop=$rc; [ $rc = 0 ] || tail -5 /tmp/loop.err")
    done = run_in(image, script)
    assert "health=0 loop=0" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
