"""What the machine and the volume runtime must do alike: accept the same IRI metadata and read
their ``--classes`` files the same way. Pure: no libvirt."""

from __future__ import annotations

from pathlib import Path

import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.errors import InvalidArgument
from ironpool.runtime.machine import classes as machine_classes
from ironpool.runtime.machine import records as machine_records
from ironpool.runtime.volume import classes as volume_classes
from ironpool.runtime.volume import records as volume_records

MACHINE = "{apiVersion: compute.ironcore.dev/v1alpha1, kind: MachineClass, metadata: {name: m}, "
MACHINE += "capabilities: {cpu: '1', memory: 1Gi}}"
VOLUME = "{apiVersion: storage.ironcore.dev/v1alpha1, kind: VolumeClass, metadata: {name: v}, "
VOLUME += "capabilities: {iops: '5'}}"
# The same two manifests in every layout a classes file may have.
LAYOUTS = {
    "a YAML list": f"- {MACHINE}\n- {VOLUME}\n",
    "separate documents": f"{MACHINE}\n---\n{VOLUME}\n",
    "a kind: List": f"apiVersion: v1\nkind: List\nitems:\n- {MACHINE}\n- {VOLUME}\n",
    "documents of lists": f"- {MACHINE}\n---\n- {VOLUME}\n---\n",
    "a List inside a list": f"- {{kind: List, items: [{MACHINE}, {VOLUME}]}}\n",
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_both_runtimes_read_every_layout(layout: str, tmp_path: Path) -> None:
    path = tmp_path / "classes.yaml"
    path.write_text(LAYOUTS[layout])
    assert machine_classes.load_classes(path)["m"].memory == 1 << 30
    assert volume_classes.load_classes(path)["v"].iops == 5


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("- 42\n", "found int"),
        ("a: [", "not valid YAML"),
        ("{kind: Secret}", "no {kind} manifests"),
        ("- {kind: {kind}, apiVersion: example.com/v1, metadata: {name: a}}", "apiVersion: expected"),
        ("- {kind: {kind}, metadata: {}}", "metadata.name is required"),
        ("- {kind: {kind}, metadata: {name: a}, capabilities: [1]}", "capabilities must be a map"),
        ("- {kind: {kind}, metadata: {name: a}, capabilities: {iops: x, cpu: x}}", "not a quantity"),
    ],
)
def test_both_runtimes_refuse_alike(text: str, words: str) -> None:
    for parse, kind in (
        (machine_classes.parse_classes, "MachineClass"),
        (volume_classes.parse_classes, "VolumeClass"),
    ):
        with pytest.raises(ValueError) as err:
            parse(text.replace("{kind}", kind), "f.yaml")
        assert isinstance(err.value, machine_classes.ClassFileError)
        message = str(err.value)
        assert message.startswith("f.yaml: ") and words.replace("{kind}", kind) in message, message


def test_a_duplicate_name_is_refused_by_both() -> None:
    for parse, kind in (
        (machine_classes.parse_classes, "MachineClass"),
        (volume_classes.parse_classes, "VolumeClass"),
    ):
        doc = f"{{kind: {kind}, metadata: {{name: a}}, capabilities: {{cpu: '1', memory: 1Gi}}}}"
        with pytest.raises(machine_classes.ClassFileError, match=f"{kind} 'a': metadata.name: defined twice"):
            parse(f"- {doc}\n- {doc}\n")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(machine_classes.ClassFileError, match="cannot read machine classes"):
        machine_classes.load_classes(tmp_path / "missing.yaml")
    with pytest.raises(volume_classes.ClassFileError, match="cannot read volume classes"):
        volume_classes.load_classes(tmp_path / "missing.yaml")


ACCEPTED = [
    {"k": "v<&>\"'"},
    {"a<b": "]]></metadata>"},
    {"k": "a" * 64},  # longer than a Kubernetes label value
    {"k": "é\n\t"},
    {"k": ""},
]
REFUSED = [{"": "x"}, {"k": "a\x00b"}, {"k": "x" * (64 * 1024)}]


def _machine_checks(labels: dict[str, str]) -> None:
    spec = mpb.MachineSpec()
    setattr(spec, "class", "c")
    machine = mpb.Machine(spec=spec)
    machine.metadata.labels.update(labels)
    machine.metadata.annotations.update(labels)
    cls = machine_classes.MachineClassSpec("c", {"cpu": 1, "memory": 1})
    machine_records.check_machine(machine, {"c": cls})


def _volume_checks(labels: dict[str, str]) -> None:
    args = volume_records.CreateVolumeArgs("c", 1, labels, labels)
    volume_records.volume_class(args, {"c": volume_classes.VolumeClassSpec("c")})


@pytest.mark.parametrize("labels", ACCEPTED)
def test_both_runtimes_accept_the_same_metadata(labels: dict[str, str]) -> None:
    _machine_checks(labels)
    _volume_checks(labels)


@pytest.mark.parametrize("labels", REFUSED)
def test_both_runtimes_refuse_the_same_metadata(labels: dict[str, str]) -> None:
    with pytest.raises(InvalidArgument, match=r"machine\.metadata\.labels"):
        _machine_checks(labels)
    with pytest.raises(InvalidArgument, match=r"volume\.metadata\.labels"):
        _volume_checks(labels)
