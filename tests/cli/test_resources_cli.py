"""``ironpool apply/get/describe/delete/wait`` as a user runs them, against the real apiserver."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.cli.conftest import Run, cli_env
from tests.conftest import ApiServer, wait_until

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ironcore" / "samples.yaml"
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"


def api(
    server: ApiServer, method: str, path: str, body: object = None, patch: bool = False
) -> httpx.Response:
    headers = server.headers()
    if patch:
        headers["Content-Type"] = "application/merge-patch+json"
    resp = httpx.request(method, server.url + path, headers=headers, json=body, timeout=10)
    assert resp.status_code < 300, resp.text
    return resp


def open_watches(server: ApiServer) -> float:
    """The apiserver's open watch streams, from its Prometheus metrics."""
    for line in httpx.get(f"{server.url}/metrics", headers=server.headers(), timeout=5).text.splitlines():
        if line.startswith("ironpool_apiserver_watchers "):
            return float(line.split()[1])
    return 0.0


def get_json(ironpool: Run, *args: str) -> dict:  # type: ignore[type-arg]
    result = ironpool("get", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_done_when_ironcore_samples_apply_get_and_reapply_unchanged(ironpool: Run) -> None:
    first = ironpool("apply", "-f", str(SAMPLES))
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "machinepool.compute.ironcore.dev/machinepool-sample created",
        "machineclass.compute.ironcore.dev/machineclass-sample created",
    ]
    shown = ironpool("get", "machineclass", "machineclass-sample", "-o", "yaml")
    assert shown.returncode == 0, shown.stderr
    mc = yaml.safe_load(shown.stdout)
    assert mc["kind"] == "MachineClass" and mc["metadata"]["name"] == "machineclass-sample"
    assert mc["capabilities"] == {"cpu": "4", "memory": "16Gi"}
    pool = yaml.safe_load(ironpool("get", "machinepool", "machinepool-sample", "-o", "yaml").stdout)
    assert pool["spec"]["providerID"] == "ironcore://shared"
    assert pool["metadata"]["labels"] == {"ironcore.dev/az": "az1"}

    again = ironpool("apply", "-f", str(SAMPLES))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "machinepool.compute.ironcore.dev/machinepool-sample unchanged",
        "machineclass.compute.ironcore.dev/machineclass-sample unchanged",
    ]
    assert (
        get_json(ironpool, "mc", "machineclass-sample")["metadata"]["resourceVersion"]
        == mc["metadata"]["resourceVersion"]
    )
    assert (
        get_json(ironpool, "mp", "machinepool-sample")["metadata"]["resourceVersion"]
        == pool["metadata"]["resourceVersion"]
    )


def test_apply_changed_manifest_configures_and_keeps_status(
    ironpool: Run, apiserver: ApiServer, tmp_path: Path
) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    api(
        apiserver,
        "PATCH",
        f"{COMPUTE}/machinepools/machinepool-sample/status",
        {"status": {"state": "Ready"}},
        patch=True,
    )
    changed = tmp_path / "pool.yaml"
    changed.write_text(SAMPLES.read_text().split("---")[0].replace("az1", "az2"))
    result = ironpool("apply", "-f", str(changed))
    assert result.stdout.strip() == "machinepool.compute.ironcore.dev/machinepool-sample configured"
    pool = get_json(ironpool, "machinepools", "machinepool-sample")
    assert pool["metadata"]["labels"] == {"ironcore.dev/az": "az2"}
    assert pool["status"]["state"] == "Ready"


def test_apply_reports_each_bad_document_and_applies_the_rest(ironpool: Run, tmp_path: Path) -> None:
    manifest = tmp_path / "mixed.yaml"
    manifest.write_text(
        "apiVersion: compute.ironcore.dev/v1alpha1\nkind: MachineClass\nmetadata: {name: good}\n"
        "capabilities: {cpu: 1, memory: 1Gi}\n---\n"
        "apiVersion: compute.ironcore.dev/v1alpha1\nkind: MachineClass\nmetadata: {name: bad}\n"
        "capabilities: {cpu: -1, memory: 1Gi}\n"
    )
    result = ironpool("apply", "-f", str(manifest))
    assert result.returncode == 1
    assert result.stdout.strip() == "machineclass.compute.ironcore.dev/good created"
    assert f"machineclass.compute.ironcore.dev/bad from {manifest} (document 1)" in result.stderr
    assert "Error from server (Invalid)" in result.stderr and "capabilities.cpu" in result.stderr
    assert "Traceback" not in result.stderr


def test_apply_rejects_malformed_files_before_sending_anything(ironpool: Run, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\nkind: Secret\nmetadata: {}\n")
    result = ironpool("apply", "-f", str(broken))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: {broken} (document 1): apiVersion is required"
    assert "No resources found" in ironpool("get", "secrets").stderr


def test_apply_directory_recursively_and_stdin(ironpool: Run, tmp_path: Path) -> None:
    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "b.yaml").write_text(
        "apiVersion: compute.ironcore.dev/v1alpha1\nkind: MachineClass\nmetadata: {name: b}\n"
        "capabilities: {cpu: 1, memory: 1Gi}\n"
    )
    (tmp_path / "m" / "sub" / "a.json").write_text(
        json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ign"}, "stringData": {"k": "v"}}
        )
    )
    (tmp_path / "m" / "notes.txt").write_text("not a manifest")
    result = ironpool("apply", "-f", str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["machineclass.compute.ironcore.dev/b created", "secret/ign created"]
    piped = ironpool("apply", "-f", "-", input=(tmp_path / "m" / "b.yaml").read_text())
    assert piped.stdout.strip() == "machineclass.compute.ironcore.dev/b unchanged"


def test_get_tables_selectors_and_formats(ironpool: Run, apiserver: ApiServer) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    for ns, name in (("default", "m1"), ("team", "m2")):
        if ns != "default":
            api(apiserver, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        api(
            apiserver,
            "POST",
            f"{COMPUTE}/namespaces/{ns}/machines",
            {
                "metadata": {"name": name, "labels": {"app": name}},
                "spec": {"machineClassRef": {"name": "machineclass-sample"}},
            },
        )
    table = ironpool("get", "machines").stdout.splitlines()
    assert table[0].split() == ["NAME", "MACHINECLASS", "POOL", "STATE", "POWER", "AGE"]
    assert table[1].split()[:5] == ["m1", "machineclass-sample", "<none>", "<none>", "On"]
    assert len(table) == 2  # only the default namespace
    everywhere = ironpool("get", "ma", "-A").stdout.splitlines()
    assert everywhere[0].split()[0] == "NAMESPACE"
    assert [line.split()[:2] for line in everywhere[1:]] == [["default", "m1"], ["team", "m2"]]
    assert (
        ironpool("get", "machine", "-n", "team", "-o", "name").stdout.strip()
        == "machine.compute.ironcore.dev/m2"
    )
    selected = ironpool("get", "machines", "-A", "-l", "app=m2", "-o", "name")
    assert selected.stdout.strip() == "machine.compute.ironcore.dev/m2"
    wide = ironpool("get", "machinepool", "-o", "wide").stdout.splitlines()
    assert "PROVIDERID" in wide[0].split() and "ironcore://shared" in wide[1]
    listing = get_json(ironpool, "machineclasses")
    assert listing["kind"] == "List" and [i["metadata"]["name"] for i in listing["items"]] == [
        "machineclass-sample"
    ]
    missing = ironpool("get", "mc", "nope")
    assert missing.returncode == 1
    assert (
        missing.stderr.strip()
        == 'Error from server (NotFound): machineclasses.compute.ironcore.dev "nope" not found'
    )
    unknown = ironpool("get", "flavours")
    assert unknown.returncode == 1 and 'resource type "flavours"' in unknown.stderr


def test_describe_shows_conditions_and_events(ironpool: Run, apiserver: ApiServer) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    api(
        apiserver,
        "PATCH",
        f"{COMPUTE}/machinepools/machinepool-sample/status",
        {
            "status": {
                "state": "Ready",
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "PoolletHeartbeat", "message": "all good"}
                ],
            }
        },
        patch=True,
    )
    api(
        apiserver,
        "POST",
        "/api/v1/namespaces/default/events",
        {
            "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "MachinePool", "name": "machinepool-sample"},
            "reason": "Announced",
            "message": "pool announced 1 class",
            "type": "Normal",
        },
    )
    api(
        apiserver,
        "POST",
        "/api/v1/namespaces/default/events",
        {
            "metadata": {"name": "ev2"},
            "involvedObject": {"kind": "MachinePool", "name": "other"},
            "reason": "Elsewhere",
            "message": "not ours",
            "type": "Normal",
        },
    )
    result = ironpool("describe", "machinepool", "machinepool-sample")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Name:               machinepool-sample" in out
    assert "providerID: ironcore://shared" in out
    assert "PoolletHeartbeat" in out and "all good" in out
    assert "Announced" in out and "pool announced 1 class" in out
    assert "Elsewhere" not in out


def test_delete_by_file_and_by_name(ironpool: Run) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    result = ironpool("delete", "-f", str(SAMPLES), "--wait", "--timeout", "20s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "machinepool.compute.ironcore.dev/machinepool-sample deleted",
        "machineclass.compute.ironcore.dev/machineclass-sample deleted",
    ]
    assert ironpool("get", "mc", "machineclass-sample").returncode == 1
    again = ironpool("delete", "machineclass/machineclass-sample")
    assert again.returncode == 1 and "not found" in again.stderr
    assert ironpool("delete", "mc", "machineclass-sample", "--ignore-not-found").returncode == 0


def _popen(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_wait_for_condition_set_by_a_status_patch(
    ironpool: Run, apiserver: ApiServer, env: dict[str, str]
) -> None:
    api(
        apiserver,
        "POST",
        f"{COMPUTE}/namespaces/default/machines",
        {"metadata": {"name": "m1"}, "spec": {"machineClassRef": {"name": "c"}}},
    )
    waiter = _popen(env, "wait", "machine/m1", "--for=condition=Ready", "--timeout=30s")
    jsonpath = _popen(env, "wait", "machine/m1", "--for=jsonpath={.status.state}=Running", "--timeout=30s")
    try:
        # Both waiters must be watching before the change lands (they must not rely on seeing it in
        # their first read): wait until the apiserver counts their two watch streams.
        wait_until(lambda: open_watches(apiserver) >= 2, timeout=30, message="both waiters to watch")
        assert waiter.poll() is None and jsonpath.poll() is None
        api(
            apiserver,
            "PATCH",
            f"{COMPUTE}/namespaces/default/machines/m1/status",
            {"status": {"state": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            patch=True,
        )
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert out.strip() == "machine.compute.ironcore.dev/m1 condition met"
        out, err = jsonpath.communicate(timeout=30)
        assert jsonpath.returncode == 0, err
    finally:
        for proc in (waiter, jsonpath):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # Already true: returns at once. Deletion is awaited too.
    assert ironpool("wait", "machines", "m1", "--for", "condition=Ready", "--timeout", "5s").returncode == 0
    timed_out = ironpool("wait", "machine/m1", "--for=condition=Ready=False", "--timeout=1s")
    assert timed_out.returncode == 1
    # Where the object was shows as progress, and again in the timeout message.
    assert timed_out.stderr.splitlines() == [
        "machine.compute.ironcore.dev/m1: Ready=True",
        "error: timed out waiting for the condition on machines/m1: Ready=True"]
    api(apiserver, "DELETE", f"{COMPUTE}/namespaces/default/machines/m1")
    assert ironpool("wait", "machine/m1", "--for=delete", "--timeout=10s").returncode == 0


def test_get_watch_prints_rows_as_they_change(apiserver: ApiServer, env: dict[str, str]) -> None:
    api(
        apiserver,
        "POST",
        f"{COMPUTE}/namespaces/default/machines",
        {"metadata": {"name": "m1"}, "spec": {"machineClassRef": {"name": "c"}}},
    )
    watcher = _popen(env, "get", "machines", "-w", "--watch-timeout=30s")
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().split()[0] == "NAME"
        assert watcher.stdout.readline().split()[:4] == ["m1", "c", "<none>", "<none>"]
        api(
            apiserver,
            "PATCH",
            f"{COMPUTE}/namespaces/default/machines/m1/status",
            {"status": {"state": "Running"}},
            patch=True,
        )
        assert watcher.stdout.readline().split()[:4] == ["m1", "c", "<none>", "Running"]
    finally:
        watcher.kill()
        watcher.wait()


def test_clean_errors_without_server_or_with_bad_token(tmp_path: Path, apiserver: ApiServer) -> None:
    env = cli_env(None, tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ironpool.cli.main", "get", "mc"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "error: no server configured: set IRONPOOL_SERVER or run `ironpool up`"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "ironpool.cli.main",
            "get",
            "mc",
            "--server",
            apiserver.url,
            "--token",
            "nope",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("Error from server (Unauthorized)")
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "args", [["delete"], ["wait", "mc/x", "--for=running"], ["get", "mc", "-w", "--watch-timeout=soon"]]
)
def test_usage_errors_are_one_line(ironpool: Run, args: list[str]) -> None:
    result = ironpool(*args)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
