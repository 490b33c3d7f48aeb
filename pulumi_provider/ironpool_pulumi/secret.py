"""``Secret``: opaque data, such as Ignition, that Machines reference.

``data`` is always a Pulumi secret and never an output: the outputs carry the key names and a
SHA-256 of the data, which is how a change (in the program or out of band) shows up. ``data`` and
``labels`` update in place; ``name``, ``namespace`` and ``type`` (immutable in the API) replace.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api.resources import resolve
from ironpool.client import Client
from pulumi.dynamic import CheckFailure, Resource

from ironpool_pulumi.base import ApiResourceProvider, Obj, Props
from ironpool_pulumi.values import digest, none_if_empty, without_system_keys


@dataclass
class SecretArgs:
    """The inputs of a :class:`Secret`."""

    data: pulumi.Input[dict[str, str]]
    """Key -> text value (kept secret in the state, never an output); updated in place."""
    name: pulumi.Input[str] | None = None
    """The Secret's name (default: the Pulumi resource name). Changing it replaces the Secret."""
    namespace: pulumi.Input[str] | None = None
    """The namespace (default: ``ironpool:namespace``, else the client config's, else ``default``)."""
    type: pulumi.Input[str] = "Opaque"
    """The Secret's type; changing it replaces the Secret."""
    labels: pulumi.Input[dict[str, str]] | None = None
    """Labels of the Secret; updated in place."""


def decoded(obj: Obj) -> dict[str, str]:
    """A Secret's ``data`` as text (values that are not UTF-8 stay base64)."""
    out: dict[str, str] = {}
    for key, raw in (obj.get("data") or {}).items():
        try:
            out[key] = base64.b64decode(raw).decode()
        except (binascii.Error, UnicodeDecodeError):
            out[key] = raw
    return out


class SecretProvider(ApiResourceProvider):
    """The dynamic provider behind :class:`Secret`."""

    info = resolve("secrets")
    replace_on = ("name", "namespace", "type")
    update_on = ("data", "labels")
    secret_inputs = ("data",)
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("metadata.namespace", "namespace"), ("metadata.labels", "labels"),
        ("stringData", "data"), ("data", "data"), ("type", "type"))

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        data = inputs.get("data")
        if not isinstance(data, dict) or any(not isinstance(v, str) for v in data.values()):
            failures.append(CheckFailure("data", "must map keys to text values"))
        inputs["type"] = inputs.get("type") or "Opaque"
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        meta = {"name": inputs["name"], "namespace": inputs.get("namespace"),
                "labels": none_if_empty(inputs.get("labels"))}
        doc: Obj = {"apiVersion": "v1", "kind": "Secret", "type": inputs.get("type"),
                    "metadata": {k: v for k, v in meta.items() if v is not None}}
        if inputs.get("data") is not None:
            doc["stringData"] = inputs["data"]
        return doc

    def properties(self, obj: Obj, previous: Props) -> Props:
        meta = obj.get("metadata") or {}
        return {"name": meta.get("name"), "namespace": meta.get("namespace"), "type": obj.get("type"),
                "labels": without_system_keys(meta.get("labels"), previous.get("labels"))}

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        data = decoded(obj)
        return {**super().status_outputs(client, obj, inputs), "keys": sorted(data),
                "data_sha256": digest(data)}

    def update_patch(self, olds: Props, news: Props) -> Obj | None:
        patch = super().update_patch({k: v for k, v in olds.items() if k != "data"},
                                     {k: v for k, v in news.items() if k != "data"}) or {}
        if digest(news.get("data")) != olds.get("data_sha256"):
            new = news.get("data") or {}
            removed = {k: None for k in olds.get("keys") or [] if k not in new}
            patch["data"] = {**removed, **{k: base64.b64encode(v.encode()).decode() for k, v in new.items()}}
        return patch or None


class Secret(Resource, module="ironpool", name="Secret"):
    """A Secret declared with Pulumi; its ``data`` is a Pulumi secret and never an output."""

    name: pulumi.Output[str]
    """The Secret's name."""
    namespace: pulumi.Output[str]
    """The Secret's namespace."""
    keys: pulumi.Output[list[str]]
    """The keys of ``data``."""
    data_sha256: pulumi.Output[str]
    """SHA-256 of ``data``, to see changes without revealing it."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the Secret was created (RFC 3339)."""

    def __init__(self, resource_name: str, args: SecretArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a Secret named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else SecretArgs(**kwargs)
        props = {"uid": None, "created_at": None, "keys": None, "data_sha256": None,
                 "name": a.name or resource_name, "namespace": a.namespace,
                 "data": pulumi.Output.secret(a.data), "type": a.type, "labels": a.labels}
        super().__init__(SecretProvider(), resource_name, props, opts)
