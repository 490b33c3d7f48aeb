"""ResourceQuotas through ``ironpool apply/get``: IronCore's sample quota applies unchanged, the
server's table (``get quota``, ``-o wide``), ``-o yaml``, and a Machine past the quota refused with
the quota's words, against the real apiserver."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.apiserver.test_apiserver_quota import setup_classes
from tests.cli.conftest import Run
from tests.conftest import ApiServer
from tests.helpers.wait import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quotas" / "team-a.yaml"
# IronCore's sample (config/samples/core_v1alpha1_resourcequota.yaml), in the default namespace.
SAMPLE = """\
apiVersion: core.ironcore.dev/v1alpha1
kind: ResourceQuota
metadata:
  name: resource-quota-sample
spec:
  hard: # Hard is the mapping of strictly enforced resource limits.
    requests.cpu: "10"
    requests.memory: 100Gi
    requests.storage: 10Ti
"""
SCOPED = {"apiVersion": "core.ironcore.dev/v1alpha1", "kind": "ResourceQuota",
          "metadata": {"name": "large-only", "namespace": "default"},
          "spec": {"hard": {"count/machines.compute.ironcore.dev": "1"},
                   "scopeSelector": {"matchExpressions": [
                       {"scopeName": "MachineClass", "operator": "In", "values": ["q-two"]}]}}}


def cells(line: str) -> list[str]:
    """A table row's cells (cells may hold single spaces; columns are two or more apart)."""
    return re.split(r"\s{2,}", line.strip())


def test_apply_get_and_yaml_of_quotas_and_a_refusal(ironpool: Run, apiserver: ApiServer,
                                                    tmp_path: Path) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=30) as c:
        setup_classes(c)
    (tmp_path / "quota.yaml").write_text(SAMPLE)
    applied = ironpool("apply", "-f", str(tmp_path / "quota.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "resourcequota.core.ironcore.dev/resource-quota-sample created"

    def row() -> list[str] | None:
        out = ironpool("get", "quota").stdout.splitlines()
        assert cells(out[0]) == ["NAME", "REQUEST", "AGE"]
        got = cells(out[1])
        return got if "?" not in got[1] else None  # the apiserver has reported the use

    got = wait_for(row, 10, "the quota's use in the table")
    assert got[:2] == ["resource-quota-sample",
                       "requests.cpu: 0/10, requests.memory: 0/100Gi, requests.storage: 0/10Ti"]

    (tmp_path / "scoped.yaml").write_text(yaml.safe_dump(SCOPED))
    assert ironpool("apply", "-f", str(tmp_path / "scoped.yaml")).returncode == 0
    (tmp_path / "m.yaml").write_text(yaml.safe_dump_all([
        {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
         "metadata": {"name": f"web-{i}", "namespace": "default"},
         "spec": {"machineClassRef": {"name": "q-two"}}} for i in range(2)]))
    refused = ironpool("apply", "-f", str(tmp_path / "m.yaml"))
    assert refused.returncode == 1
    assert "machine.compute.ironcore.dev/web-0 created" in refused.stdout
    assert ('machines.compute.ironcore.dev "web-1" is forbidden: exceeded quota: large-only, requested: '
            "count/machines.compute.ironcore.dev=1, used: count/machines.compute.ironcore.dev=1, limited: "
            "count/machines.compute.ironcore.dev=1") in refused.stderr

    def wide() -> list[str] | None:
        lines = ironpool("get", "resourcequotas", "large-only", "-o", "wide").stdout.splitlines()
        assert cells(lines[0]) == ["NAME", "REQUEST", "AGE", "SCOPE"]
        got = cells(lines[1])
        return got if got[1] == "count/machines.compute.ironcore.dev: 1/1" else None

    assert wait_for(wide, 10, "the scoped quota's use")[3] == "MachineClass In (q-two)"

    def as_yaml() -> dict[str, Any]:
        out = ironpool("get", "quota", "resource-quota-sample", "-o", "yaml")
        assert out.returncode == 0, out.stderr
        return yaml.safe_load(out.stdout)  # type: ignore[no-any-return]

    def counted() -> dict[str, Any] | None:
        doc = as_yaml()
        return doc if doc["status"]["used"]["requests.cpu"] == "2" else None

    shown = wait_for(counted, 10, "the sample quota to count web-0")
    hard = {"requests.cpu": "10", "requests.memory": "100Gi", "requests.storage": "10Ti"}
    assert shown["spec"]["hard"] == hard
    used = {"requests.cpu": "2", "requests.memory": "2Gi", "requests.storage": "0"}
    assert shown["status"] == {"hard": hard, "used": used}


def test_the_example_quotas_apply(ironpool: Run) -> None:
    applied = ironpool("apply", "-f", str(EXAMPLE))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "namespace/team-a created", "resourcequota.core.ironcore.dev/compute created",
        "resourcequota.core.ironcore.dev/large-machines created"]
    names = ironpool("get", "quota", "-n", "team-a", "-o", "name")
    assert names.stdout.split() == ["resourcequota.core.ironcore.dev/compute",
                                    "resourcequota.core.ironcore.dev/large-machines"], names.stderr
