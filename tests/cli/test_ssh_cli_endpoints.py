"""``ironpool ssh`` without a forwarded port: the Machine's first address on port 22 (a libvirt nat
or isolated network, a bridge), and the key beside the client configuration offered by default.
Only the command is printed; nothing is connected to."""

from __future__ import annotations

from pathlib import Path

import httpx
from ironpool.api.machine_access import SSH_ENDPOINT_ANNOTATION

from tests.cli.conftest import Run
from tests.conftest import ApiServer

MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"


def test_first_address_on_port_22_and_the_default_key(
    ironpool: Run, apiserver: ApiServer, env: dict[str, str],
) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        body = {"metadata": {"name": "nat"}, "spec": {"machineClassRef": {"name": "small"}}}
        r = c.post(MACHINES, json=body)
        assert r.status_code == 201, r.text
        status = {"networkInterfaces": [{"name": "eth0", "state": "Attached", "ips": ["10.20.0.7"]}]}
        r = c.patch(f"{MACHINES}/nat/status", json={"status": status},
                    headers={"content-type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
    printed = ironpool("ssh", "nat", "--print-command", "true").stdout.split()
    assert printed[:3] == ["ssh", "-p", "22"] and printed[-4:] == ["root", "10.20.0.7", "--", "true"]
    assert "-i" not in printed  # no key beside the client configuration yet

    key = Path(env["IRONPOOL_CONFIG"]).parent / "id_ed25519"
    key.write_text("not really a key\n")
    printed = ironpool("ssh", "nat", "--print-command").stdout.split()
    assert printed[printed.index("-i") + 1] == str(key)
    # and the forward its host reports wins over the address
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        forward = {"metadata": {"annotations": {SSH_ENDPOINT_ANNOTATION: "127.0.0.1:40022"}}}
        r = c.patch(f"{MACHINES}/nat", json=forward, headers={"content-type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
    printed = ironpool("ssh", "nat", "--print-command").stdout.split()
    assert printed[:3] == ["ssh", "-p", "40022"] and printed[-1] == "127.0.0.1"
