"""Reservations through ``ironpool apply/get/describe``: the server's table columns and describe's
text, and a bad manifest refused naming the field, against the real apiserver."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.apiserver.test_apiserver_admission import client, machine_class, make_pool
from tests.cli.conftest import Run
from tests.cli.test_resources_cli import COMPUTE, api, get_json
from tests.conftest import ApiServer

RESERVATION = {
    "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"resources": {"class/machine.x-small": "10"}, "ttlSecondsAfterCreation": 3600},
}


def test_apply_get_and_describe_a_reservation(ironpool: Run, apiserver: ApiServer, tmp_path: Path) -> None:
    with client(apiserver) as c:  # the class it counts and two pools with room for its plan
        made = c.post(f"{COMPUTE}/machineclasses", json=machine_class("x-small", "1", "256Mi"))
        assert made.status_code == 201, made.text
        for pool in ("a", "b"):
            make_pool(c, "machinepools", pool, {"cpu": "8", "memory": "16Gi"})
    manifest = tmp_path / "rsv.yaml"
    manifest.write_text(yaml.safe_dump(RESERVATION))
    applied = ironpool("apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "reservation.compute.ironcore.dev/web created"

    rows = ironpool("get", "rsv").stdout.splitlines()
    assert rows[0].split() == ["NAME", "STATE", "POOLS", "USED", "EXPIRES", "AGE"]
    assert rows[1].split()[:4] == ["web", "Pending", "<any>", "0/10"]
    assert rows[1].split()[4].endswith("m")  # expires in about an hour

    # What the scheduler and the pools' poollets write, as a status patch.
    api(apiserver, "PATCH", f"{COMPUTE}/namespaces/default/reservations/web/status", {"status": {
        "pools": [{"ref": "a", "state": "Accepted", "resources": {"class/machine.x-small": "7"},
                   "consumed": {"class/machine.x-small": "2"}},
                  {"ref": "b", "state": "Accepted", "resources": {"class/machine.x-small": "3"}}],
        "conditions": [{"type": "Scheduled", "status": "True", "reason": "Planned",
                        "message": "10 machines on 2 pools"}]}}, patch=True)
    wide = ironpool("get", "reservation", "web", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "STATE", "POOLS", "USED", "EXPIRES", "AGE", "RESOURCES", "SELECTOR",
                               "MESSAGE"]
    assert wide[1].split()[:4] == ["web", "Accepted", "a,b", "2/10"]
    assert "10 machines on 2 pools" in wide[1]
    assert get_json(ironpool, "rsv", "web")["status"]["pools"][0]["ref"] == "a"

    described = ironpool("describe", "reservation", "web")
    assert described.returncode == 0, described.stderr
    assert "class/machine.x-small: '10'" in described.stdout
    assert "Planned" in described.stdout and "10 machines on 2 pools" in described.stdout


def test_a_bad_reservation_is_refused_naming_the_field(ironpool: Run, tmp_path: Path) -> None:
    bad = {**RESERVATION, "spec": {"resources": {"machineclass/x-small": "10"}}}
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(yaml.safe_dump(bad))
    result = ironpool("apply", "-f", str(manifest))
    assert result.returncode == 1
    assert "spec.resources[machineclass/x-small]" in result.stderr
    assert "class/machine.x-small" in result.stderr
    assert ironpool("get", "rsv", "web").returncode == 1  # nothing half-made
