"""Pure helpers of the CLI: manifest parsing, printers, durations, wait conditions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ironpool.api.columns import age
from ironpool.api.errors import Cause, Invalid
from ironpool.api.resources import resolve
from ironpool.cli.common import parse_duration
from ironpool.cli.edit_cmd import split_changes
from ironpool.cli.errors import CommandError, format_api_error
from ironpool.cli.manifests import load_manifests, parse_documents
from ironpool.cli.objects import jsonpath_get, parse_condition, parse_kinds, parse_targets
from ironpool.cli.printers import describe, qualified_name
from ironpool.cli.tables import TablePrinter

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


def test_tables_show_the_servers_columns() -> None:
    table = {"kind": "Table", "columnDefinitions": [
        {"name": "Name", "format": "name", "priority": 0}, {"name": "Ready", "priority": 0},
        {"name": "ProviderID", "priority": 1}, {"name": "Age", "type": "date", "priority": 0}],
        "rows": [{"cells": ["p", True, None, "5m"], "object": {"metadata": {"name": "p"}}}]}
    printer = TablePrinter(resolve("mp"))
    header, rows = printer.rows(table)
    assert header == ["NAME", "READY", "AGE"] and rows[0][1] == ["p", "true", "5m"]
    header, rows = TablePrinter(resolve("mp"), wide=True).rows(table)
    assert header == ["NAME", "READY", "PROVIDERID", "AGE"] and rows[0][1][2] == "<none>"
    # A later event's Table has no column definitions: the first one's still apply.
    later = {"kind": "Table", "columnDefinitions": [], "rows": [{"cells": ["q", False, "x", "1s"]}]}
    assert printer.rows(later)[1][0][1] == ["q", "false", "1s"]
    machines = TablePrinter(resolve("machines"), all_namespaces=True, qualify=True)
    header, rows = machines.rows({"kind": "Table", "columnDefinitions": [{"name": "Name", "format": "name"}],
                                  "rows": [{"cells": ["m"], "object": {"metadata": {"name": "m",
                                                                                    "namespace": "ns"}}}]})
    assert header == ["NAMESPACE", "NAME"] and rows[0][1] == ["ns", "machine.compute.ironcore.dev/m"]
    # A server that does not print answers the object: NAME and AGE from its metadata.
    header, rows = TablePrinter(resolve("mc")).rows({"metadata": {"name": "c"}})
    assert header == ["NAME", "AGE"] and rows[0][1] == ["c", "<none>"]


def test_kinds_as_a_comma_list_and_label_changes() -> None:
    assert [i.kind for i in parse_kinds("machines,vol,machine")] == ["Machine", "Volume"]
    with pytest.raises(CommandError, match="an empty kind"):
        parse_kinds("machines,")
    objects, changes = split_changes(("machine", "a", "b", "app=web", "tier-", "x="), "label")
    assert objects == ("machine", "a", "b") and changes == {"app": "web", "tier": None, "x": ""}
    assert split_changes(("machine/a", "app=web"), "label")[0] == ("machine/a",)
    with pytest.raises(CommandError, match="at least one label"):
        split_changes(("machine", "a"), "label")
    with pytest.raises(CommandError, match="'app' is given twice"):
        split_changes(("machine", "a", "app=1", "app-"), "label")


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
    machines = resolve("machines")

    def done(spec: str, o: dict | None) -> bool:  # type: ignore[type-arg]
        return parse_condition(spec, machines)(o).done

    assert done("condition=Ready", obj)
    assert done("condition=ready=true", obj)
    assert not done("condition=Ready=False", obj)
    assert not done("condition=Ready", None)
    assert done("delete", None) and not done("delete", obj)
    assert done("jsonpath={.status.state}=Running", obj)
    assert not done("jsonpath={.status.state}=Pending", obj)
    assert done("jsonpath={.status.conditions[0].type}", obj)
    assert jsonpath_get(obj, ".status.conditions[3]") is None
    # The named conditions are the readiness every front end shares (not scheduled: not running).
    assert not done("running", obj)
    assert parse_condition("running", machines)(obj).progress == "not scheduled yet"
    with pytest.raises(CommandError, match="--for: a MachineClass cannot be waited for 'running'"):
        parse_condition("running", resolve("mc"))
    with pytest.raises(CommandError, match="--for: expected delete"):
        parse_condition("soon", machines)


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
