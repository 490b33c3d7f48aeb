"""Pure helpers of the CLI: manifest parsing, printers, durations, wait conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ironpool.api.columns import age
from ironpool.api.errors import Cause, Invalid
from ironpool.api.resources import resolve
from ironpool.cli.config import CommandError, format_api_error, parse_duration
from ironpool.cli.manifests import load_manifests, parse_documents
from ironpool.cli.objects import jsonpath_get, parse_condition, parse_targets
from ironpool.cli.printers import describe, qualified_name, table_rows
from ironpool.cli.resources_cmd import apply_patch

DOC = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n"


def test_parse_documents_skips_empty_and_unpacks_lists() -> None:
    text = "---\n" + DOC.format(name="a") + "---\n---\n" + \
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n"
    docs = parse_documents(text, "f.yaml")
    assert [(d.index, d.name) for d in docs] == [(0, "a"), (2, "b")]  # a leading --- opens no document


@pytest.mark.parametrize(("text", "message"), [
    ("a: [1", "f.yaml: invalid YAML"),
    ("- 1\n", "f.yaml \\(document 0\\): a manifest must be a mapping"),
    ("apiVersion: v1\nmetadata: {name: x}\n", "document 0\\): kind is required"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {}\n", "metadata.name is required"),
])
def test_bad_documents_name_file_and_index(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse_documents(text, "f.yaml")


def test_load_manifests_errors(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no such file or directory"):
        load_manifests([str(tmp_path / "missing.yaml")])
    with pytest.raises(CommandError, match=r"no \.yaml, \.yml or \.json files"):
        load_manifests([str(tmp_path)])
    (tmp_path / "empty.yaml").write_text("---\n")
    with pytest.raises(CommandError, match="no objects passed"):
        load_manifests([str(tmp_path / "empty.yaml")])


def test_age_formats_like_kubectl() -> None:
    now = datetime(2026, 1, 10, tzinfo=UTC)

    def ago(**kw: float) -> str:
        return age((now - timedelta(**kw)).isoformat().replace("+00:00", "Z"), now)

    assert ago(seconds=45) == "45s"
    assert ago(minutes=3, seconds=12) == "3m12s"
    assert ago(minutes=42) == "42m"
    assert ago(hours=5, minutes=7) == "5h7m"
    assert ago(hours=20) == "20h"
    assert ago(days=3, hours=2) == "3d2h"
    assert ago(days=30) == "30d"
    assert age(None) == "<none>"


def test_table_rows_per_kind() -> None:
    pool = {"metadata": {"name": "p"}, "spec": {"providerID": "x://p"}, "status": {
        "conditions": [{"type": "Ready", "status": "True"}], "availableMachineClasses": [{"name": "a"}],
        "allocatable": {"cpu": "6", "memory": "10Gi"}, "capacity": {"cpu": "8", "memory": "16Gi"}}}
    header, rows = table_rows(resolve("mp"), [pool])
    assert header == ["NAME", "READY", "CLASSES", "CPU", "MEMORY", "AGE"]
    assert rows[0][:5] == ["p", "True", "1", "6/8", "10Gi/16Gi"]
    header, rows = table_rows(resolve("mp"), [pool], wide=True)
    assert header[-4:] == ["PROVIDERID", "STATE", "TAINTS", "MACHINECLASSES"]
    assert rows[0][-4:] == ["x://p", "<none>", "0", "a"]
    header, _ = table_rows(resolve("machines"), [], all_namespaces=True)
    assert header[:2] == ["NAMESPACE", "NAME"]
    header, _ = table_rows(resolve("mc"), [], all_namespaces=True)  # cluster-scoped: no NAMESPACE
    assert header[0] == "NAME"


def test_names_and_describe() -> None:
    assert qualified_name(resolve("mc"), "x") == "machineclass.compute.ironcore.dev/x"
    assert qualified_name(resolve("secret"), {"metadata": {"name": "s"}}) == "secret/s"
    text = describe(resolve("secret"), {"metadata": {"name": "s", "namespace": "d"}, "type": "Opaque",
                                        "data": {"k": "c2VjcmV0"}}, [])
    assert "c2VjcmV0" not in text  # secret values are not printed
    assert "Events:             <none>" in text


def test_durations_and_targets() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    with pytest.raises(CommandError, match="invalid duration 'soon'"):
        parse_duration("soon")
    targets = parse_targets(("machine/a", "mc/b"), "ns")
    assert [(t.info.kind, t.name, t.namespace) for t in targets] == [("Machine", "a", "ns"),
                                                                     ("MachineClass", "b", None)]
    with pytest.raises(CommandError, match="specify the name"):
        parse_targets(("machine",), "ns")


def test_wait_conditions() -> None:
    obj = {"status": {"state": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert parse_condition("condition=Ready")(obj)
    assert parse_condition("condition=ready=true")(obj)
    assert not parse_condition("condition=Ready=False")(obj)
    assert not parse_condition("condition=Ready")(None)
    assert parse_condition("delete")(None) and not parse_condition("delete")(obj)
    assert parse_condition("jsonpath={.status.state}=Running")(obj)
    assert not parse_condition("jsonpath={.status.state}=Pending")(obj)
    assert parse_condition("jsonpath={.status.conditions[0].type}")(obj)
    assert jsonpath_get(obj, ".status.conditions[3]") is None
    with pytest.raises(CommandError, match="--for: expected delete"):
        parse_condition("ready")


def test_apply_patch_keeps_only_user_fields() -> None:
    manifest = {"apiVersion": "v1", "kind": "Secret", "status": {"x": 1},
                "metadata": {"name": "s", "uid": "u", "resourceVersion": "3", "labels": {"a": "b"}},
                "data": {"k": "dg=="}}
    assert apply_patch(manifest) == {"data": {"k": "dg=="}, "metadata": {"labels": {"a": "b"}}}


def test_api_error_format_lists_causes_not_in_the_message() -> None:
    exc = Invalid(message='MachineClass "x" is invalid', causes=[Cause("capabilities.cpu", "must be > 0")])
    assert format_api_error(exc) == \
        'Error from server (Invalid): MachineClass "x" is invalid\n  capabilities.cpu: must be > 0'


def test_pool_tables_show_bytes_with_binary_units() -> None:
    from ironpool.api.columns import free_of, human_bytes

    assert human_bytes("24684092Ki") == "23.5Gi"
    assert human_bytes("16Gi") == "16Gi"
    assert human_bytes("512") == "512"
    pool = {"status": {"allocatable": {"cpu": "7", "memory": "15Gi"},
                       "capacity": {"cpu": "8", "memory": "16Gi"}}}
    assert free_of("cpu")(pool) == "7/8"
    assert free_of("memory")(pool) == "15Gi/16Gi"
