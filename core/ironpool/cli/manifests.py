"""Reading manifests for ``apply -f`` / ``delete -f``: files, directories (recursively, in name order) or
stdin, each holding one or more YAML or JSON documents.

Every document is checked for ``apiVersion``, ``kind`` and ``metadata.name`` before anything is sent,
so a broken file fails as a whole, naming the file and the document index.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ironpool.cli.errors import CommandError

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Manifest:
    """One document: where it came from (file and 0-based document index) and its content."""

    source: str
    index: int
    obj: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.source} (document {self.index})"

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        ns = self.obj["metadata"].get("namespace")
        return str(ns) if ns else None


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files named directly, plus every manifest file under named directories, in sorted order."""
    out: list[str] = []
    for raw in paths:
        if raw == "-":
            out.append(raw)
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
            if not found:
                raise CommandError(f"{raw}: no .yaml, .yml or .json files in this directory")
            out.extend(str(p) for p in found)
        elif path.is_file():
            out.append(raw)
        else:
            raise CommandError(f"{raw}: no such file or directory")
    return out


def parse_documents(text: str, source: str) -> list[Manifest]:
    """Every non-empty document of a YAML (or JSON) stream; ``kind: List`` is unpacked."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise CommandError(f"{source}: invalid YAML: {exc}") from exc
    manifests: list[Manifest] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"].endswith("List") \
                and isinstance(doc.get("items"), list):
            items = doc["items"]
        else:
            items = [doc]
        for item in items:
            manifests.append(_check(Manifest(source, index, item)))
    return manifests


def _check(m: Manifest) -> Manifest:
    obj: Any = m.obj
    if not isinstance(obj, dict):
        raise CommandError(f"{m.where}: a manifest must be a mapping, got {type(obj).__name__}")
    for field in ("apiVersion", "kind"):
        if not isinstance(obj.get(field), str) or not obj[field]:
            raise CommandError(f"{m.where}: {field} is required")
    md = obj.get("metadata")
    if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
        raise CommandError(f"{m.where}: metadata.name is required")
    return m


def load_manifests(paths: Iterable[str]) -> list[Manifest]:
    """All documents of all ``paths`` (``-`` is stdin), in order; any unreadable one is an error."""
    manifests: list[Manifest] = []
    for path in expand_paths(paths):
        if path == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            try:
                text, source = Path(path).read_text(), path
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"{path}: cannot read: {exc}") from exc
        manifests.extend(parse_documents(text, source))
    if not manifests:
        raise CommandError("no objects passed to the command (the manifests are empty)")
    return manifests
