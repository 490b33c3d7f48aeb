"""The networking kinds through the ``ironpool`` CLI against a real apiserver: the example manifest
applies (and re-applies unchanged), ``get`` prints their tables, ``get machines -o wide`` shows the
addresses, and a refused NIC prints the field."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.cli.conftest import Run
from tests.conftest import ApiServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "manifests" / "network.yaml"
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default"

NIC = """
apiVersion: networking.ironcore.dev/v1alpha1
kind: NetworkInterface
metadata: {name: spare, namespace: default}
spec:
  networkRef: {name: lab}
  ipFamilies: [IPv4]
  ips: [{ephemeral: {prefixTemplate: {spec: {parentRef: {name: lab-v4}}}}}]
"""


def rows(ironpool: Run, *args: str) -> list[list[str]]:
    result = ironpool("get", *args)
    assert result.returncode == 0, result.stderr
    return [line.split() for line in result.stdout.splitlines()]


def test_networking_tables_and_machine_addresses(ironpool: Run, apiserver: ApiServer) -> None:
    first = ironpool("apply", "-f", str(EXAMPLE))
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["network.networking.ironcore.dev/lab created",
                                         "prefix.ipam.ironcore.dev/lab-v4 created"]
    assert ironpool("apply", "-f", str(EXAMPLE)).stdout.splitlines() == [
        "network.networking.ironcore.dev/lab unchanged", "prefix.ipam.ironcore.dev/lab-v4 unchanged"]
    assert ironpool("apply", "-f", "-", input=NIC).returncode == 0
    assert ironpool("apply", "-f", "-", input=NIC).stdout.strip() == (
        "networkinterface.networking.ironcore.dev/spare unchanged")  # the allocation is kept

    networks = rows(ironpool, "networks")
    assert networks[0] == ["NAME", "STATE", "PROVIDERID", "AGE"]
    assert networks[1][:2] == ["lab", "Available"] and networks[1][2].startswith("ironpool://networks/")
    nics = rows(ironpool, "nic", "-o", "wide")
    assert nics[0] == ["NAME", "NETWORK", "MACHINE", "IPS", "STATE", "AGE", "MAC", "ADDRESSES", "PROVIDERID"]
    assert nics[1][:5] == ["spare", "lab", "<none>", "10.10.0.2", "Available"]
    assert nics[1][6].startswith("52:54:00:") and nics[1][7] == "10.10.0.2/24"
    prefixes = rows(ironpool, "prefixes", "-o", "wide")
    assert prefixes[0] == ["NAME", "PREFIX", "PARENT", "PHASE", "AGE", "IPFAMILY", "USED"]
    assert prefixes[1][:4] == ["lab-v4", "10.10.0.0/24", "<none>", "Allocated"]

    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        assert c.post("/apis/compute.ironcore.dev/v1alpha1/machineclasses", json={
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}).status_code == 201
        r = c.post(f"{COMPUTE}/machines", json={"metadata": {"name": "web"}, "spec": {
            "machineClassRef": {"name": "small"}, "networkInterfaces": [
                {"name": "primary", "networkInterfaceRef": {"name": "spare"}}]}})
        assert r.status_code == 201, r.text
        status = {"networkInterfaces": [{"name": "primary", "state": "Attached", "ips": ["10.10.0.2"]}]}
        r = c.patch(f"{COMPUTE}/machines/web/status", json={"status": status},
                    headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
    machines = rows(ironpool, "machines", "-o", "wide")
    assert machines[0][-1] == "IPS" and machines[1][-1] == "10.10.0.2"

    taken = NIC.replace("spare", "other").replace(
        "[{ephemeral: {prefixTemplate: {spec: {parentRef: {name: lab-v4}}}}}]", "[{value: 10.10.0.2}]")
    refused = ironpool("apply", "-f", "-", input=taken)
    assert refused.returncode != 0
    assert "spec.ips[0].value" in refused.stderr and 'in use by networkinterface "spare"' in refused.stderr
