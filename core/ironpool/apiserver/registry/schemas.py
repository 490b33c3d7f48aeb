"""Kubernetes-style OpenAPI schemas of the served kinds, made from their pydantic models, and the
shape of their objects that merging needs.

Field descriptions are the docstrings written under each field of the models (:func:`field_docs`),
as IronCore's Go doc comments describe its types. The pydantic JSON schema is folded into what
Kubernetes publishes: optional fields without
``anyOf``/``null``, references as ``allOf: [$ref]`` beside the field's description, int-or-string
quantities, free-form maps as ``x-kubernetes-preserve-unknown-fields``, and every list marked as
Kubernetes marks it (``x-kubernetes-list-type``): a list of objects with a ``name`` is a map keyed
by it (conditions by ``type``, owner references by ``uid``), ``metadata.finalizers`` is a set,
everything else atomic. Schemas are named as Kubernetes names them, by reversed group
(``dev.ironcore.compute.v1alpha1.Machine``; the shared metadata types under
``io.k8s.apimachinery.pkg.apis.meta.v1``). A kind's top-level schema carries
``x-kubernetes-group-version-kind``: a kind served under an alias group too
(:mod:`ironpool.api.group_aliases`) is one schema, named after its own group, listing the
group-versions of the document it is in (both in the document of every group, one in a
group-version's own).

:func:`shape_of` reads the same schemas back into a :class:`Shape` tree: which lists are keyed maps,
sets or atomic, which fields an object has. Server-side apply, strategic merge patch and field
validation all walk objects with it, so a new kind needs nothing but its model.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import RESOURCES, SERVED

Schema = dict[str, Any]
META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1"
_REF = "#/components/schemas/"
# Lists of objects identified by something other than ``name`` (Kubernetes' own keys).
_LIST_KEYS = {"Condition": ("type",), "OwnerReference": ("uid",)}
_SET_FIELDS = frozenset({"finalizers"})


def _reversed_group(group: str) -> str:
    return ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"


@functools.cache
def _module_prefixes() -> dict[str, str]:
    """The schema-name prefix of each module that defines a served kind."""
    out: dict[str, str] = {}
    for info in RESOURCES:
        out.setdefault(info.model.__module__, f"{_reversed_group(info.group)}.{info.version}")
    return out


def schema_name(model: type[BaseModel]) -> str:
    """The name of a model's schema (``dev.ironcore.compute.v1alpha1.MachineSpec``)."""
    return f"{_module_prefixes().get(model.__module__, META_PREFIX)}.{model.__name__}"


def kind_schema_name(info: ResourceInfo) -> str:
    return schema_name(info.model)


def _models(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``root`` by its class name (pydantic's ``$defs`` keys)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if found.get(tp.__name__) is tp:
                return
            found[tp.__name__] = tp
            hints = typing.get_type_hints(tp, vars(sys.modules[tp.__module__]), include_extras=False)
            for name in tp.model_fields:
                visit(hints.get(name, tp.model_fields[name].annotation))
            return
        for arg in typing.get_args(tp):
            visit(arg)

    visit(root)
    return found


class _Converter:
    """Folds one set of pydantic ``$defs`` into Kubernetes-style component schemas."""

    def __init__(self, defs: dict[str, Schema], classes: dict[str, type[BaseModel]]) -> None:
        self.defs = defs
        self.classes = classes

    def name(self, ref: str) -> str:
        key = ref.rsplit("/", 1)[1]
        cls = self.classes.get(key)
        return schema_name(cls) if cls is not None else f"{META_PREFIX}.{key}"

    def model(self, key: str) -> Schema:
        return self.node(self.defs[key])

    def node(self, s: Schema, field_name: str = "") -> Schema:
        if "$ref" in s:
            return {"$ref": _REF + self.name(s["$ref"])}
        if "anyOf" in s:
            options = [o for o in s["anyOf"] if o.get("type") != "null"]
            if len(options) == 1:
                inner = {**options[0]}
                if s.get("description"):
                    inner.setdefault("description", s["description"])
                return self.node(inner, field_name)
            types_ = {o.get("type") for o in options}
            if types_ <= {"integer", "number", "string"}:
                out: Schema = {"x-kubernetes-int-or-string": True,
                               "anyOf": [{"type": "integer"}, {"type": "string"}]}
                return self._described(out, s)
            return self._described({"x-kubernetes-preserve-unknown-fields": True}, s)
        if s.get("x-kubernetes-int-or-string"):
            out = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
            return self._described(out, s)
        typ = s.get("type")
        if "const" in s:
            return self._described({"type": "string", "enum": [s["const"]]}, s)
        if typ == "object" or "properties" in s:
            return self._object(s)
        if typ == "array":
            return self._array(s, field_name)
        if typ is None:
            return self._described({"x-kubernetes-preserve-unknown-fields": True}, s)
        out = {"type": typ}
        for key in ("enum", "format"):
            if key in s:
                out[key] = s[key]
        return self._described(out, s)

    @staticmethod
    def _described(out: Schema, s: Schema) -> Schema:
        if s.get("description"):
            out["description"] = _plain(s["description"])
        return out

    def _object(self, s: Schema) -> Schema:
        out: Schema = {"type": "object"}
        props = s.get("properties")
        if props:
            out["properties"] = {name: self._property(p, name) for name, p in props.items()}
            if s.get("required"):
                out["required"] = list(s["required"])
        extra = s.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            out["additionalProperties"] = self.node(extra)
        elif extra is True or (extra == {} and not props) or (extra is None and not props):
            out["x-kubernetes-preserve-unknown-fields"] = True
        return self._described(out, s)

    def _property(self, s: Schema, name: str) -> Schema:
        converted = self.node(s, name)
        if "$ref" in converted:
            # OpenAPI 3.0 ignores siblings of $ref: Kubernetes wraps it to keep a description.
            # The field's own description only: kubectl explain prints the type's as well.
            wrapped: Schema = {"allOf": [converted], "default": {}}
            if s.get("description"):
                wrapped["description"] = _plain(s["description"])
            return wrapped
        return converted

    def _array(self, s: Schema, field_name: str) -> Schema:
        items = s.get("items") or {}
        out: Schema = {"type": "array", "items": self.node(items)}
        ref = items.get("$ref")
        if ref is not None:
            key = ref.rsplit("/", 1)[1]
            target = self.defs.get(key) or {}
            keys = _LIST_KEYS.get(key) or (("name",) if "name" in (target.get("required") or ()) else ())
            if keys:
                out.update({
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys),
                    "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": keys[0],
                })
            else:
                out["x-kubernetes-list-type"] = "atomic"
        elif field_name in _SET_FIELDS:
            out.update({"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"})
        else:
            out["x-kubernetes-list-type"] = "atomic"
        return self._described(out, s)


@functools.cache
def _module_field_docs(module: str) -> dict[str, dict[str, str]]:
    """The field docstrings of every class of ``module`` (its source parsed once), by class name."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (OSError, TypeError, SyntaxError, KeyError):  # no source (a frozen build): no descriptions
        return {}
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = out[node.name] = {}
        for stmt, after in itertools.pairwise(node.body):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[stmt.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return out


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstrings written under the fields of ``model`` (and of the models it extends), by field
    name, as Go doc comments are written over them. Read from the source when a schema is first
    built, not when the models are imported (no cost to clients that never publish a schema)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            docs.update(_module_field_docs(cls.__module__).get(cls.__name__, {}))
    return docs


def _describe_fields(schema: Schema | None, model: type[BaseModel]) -> None:
    """Give each property of ``model``'s pydantic schema the field's docstring as its description."""
    props = (schema or {}).get("properties") or {}
    docs = field_docs(model)
    for name, info in model.model_fields.items():
        doc = docs.get(name)
        prop = props.get(info.alias or name)
        if doc and isinstance(prop, dict):
            prop["description"] = doc


def _plain(text: str) -> str:
    """A docstring as clients print it (kubectl explain): without reStructuredText's literal marks."""
    return text.replace("``", "")


def _kind_properties(info: ResourceInfo, schema: Schema) -> None:
    """The kind's apiVersion, kind and group-version-kind, added to those of the groups before it."""
    gvks = schema.setdefault("x-kubernetes-group-version-kind", [])
    gvks.append({"group": info.group, "version": info.version, "kind": info.kind})
    api_versions = " or ".join(f"{g['group']}/{g['version']}" if g["group"] else g["version"] for g in gvks)
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object "
                       f"({api_versions}).",
    }
    props["kind"] = {"type": "string", "description": f"Kind is the type of this object ({info.kind})."}


@functools.cache
def component_schemas(group: str, version: str) -> dict[str, Schema]:
    """The schemas of the kinds served in ``group/version`` (an alias group too) and of everything
    they reference."""
    infos = [i for i in SERVED if i.group == group and i.version == version]
    return _schemas(tuple(infos))


@functools.cache
def all_component_schemas() -> dict[str, Schema]:
    """The schemas of every served kind."""
    return _schemas(SERVED)


def _schemas(infos: tuple[ResourceInfo, ...]) -> dict[str, Schema]:
    if not infos:
        return {}
    models = dict.fromkeys(i.model for i in infos)  # an aliased kind is one model in two groups
    _, top = models_json_schema([(m, "validation") for m in models], by_alias=True)
    defs: dict[str, Schema] = top.get("$defs", {})
    classes: dict[str, type[BaseModel]] = {}
    for info in infos:
        classes.update(_models(info.model))
    for key, cls in classes.items():
        _describe_fields(defs.get(key), cls)
    conv = _Converter(defs, classes)
    out = {conv.name(f"#/$defs/{key}"): conv.model(key) for key in sorted(defs)}
    for info in infos:
        _kind_properties(info, out[kind_schema_name(info)])
    return out


# -- shapes ------------------------------------------------------------------------------------

ShapeKind = Literal["struct", "map", "list_map", "set", "atomic", "scalar", "any"]


@dataclass(frozen=True)
class Shape:
    """How an object's value is made up, for merging: ``struct`` (known ``fields``), ``map`` (any
    keys, values of ``elem``), ``list_map`` (items of ``elem`` identified by ``keys``), ``set``
    (scalar items identified by value), ``atomic`` (a list replaced whole), ``scalar``, ``any``
    (free-form, merged like a map)."""

    kind: ShapeKind
    fields: dict[str, Shape] = field(default_factory=dict, compare=False, hash=False, repr=False)
    elem: Shape | None = None
    keys: tuple[str, ...] = ()

    def child(self, key: str) -> Shape:
        """The shape of the value under ``key`` (anything goes where the schema does not say)."""
        if self.kind == "struct":
            return self.fields.get(key, ANY)
        if self.kind in ("map", "any"):
            return self.elem or ANY
        return ANY


ANY = Shape("any")


def _shape(schemas: dict[str, Schema], s: Schema, seen: dict[str, Shape]) -> Shape:
    if "allOf" in s and len(s["allOf"]) == 1:
        return _shape(schemas, s["allOf"][0], seen)
    if "$ref" in s:
        name = s["$ref"].removeprefix(_REF)
        if name not in seen:
            placeholder = Shape("struct")  # a model that refers to itself finds this one
            seen[name] = placeholder
            target = _shape(schemas, schemas[name], seen)
            if target.kind == "struct":
                placeholder.fields.update(target.fields)
            else:
                seen[name] = target
        return seen[name]
    if s.get("x-kubernetes-preserve-unknown-fields") and "properties" not in s:
        return ANY
    typ = s.get("type")
    if typ == "object":
        if "properties" in s:
            return Shape("struct", {k: _shape(schemas, v, seen) for k, v in s["properties"].items()})
        extra = s.get("additionalProperties")
        return Shape("map", elem=_shape(schemas, extra, seen) if isinstance(extra, dict) else ANY)
    if typ == "array":
        list_type = s.get("x-kubernetes-list-type", "atomic")
        elem = _shape(schemas, s.get("items") or {}, seen)
        if list_type == "map":
            return Shape("list_map", elem=elem, keys=tuple(s.get("x-kubernetes-list-map-keys") or ()))
        return Shape("set" if list_type == "set" else "atomic", elem=elem)
    return Shape("scalar")


@functools.cache
def shape_of(info: ResourceInfo) -> Shape:
    """The shape of objects of ``info``'s kind."""
    schemas = component_schemas(info.group, info.version)
    return _shape(schemas, {"$ref": _REF + kind_schema_name(info)}, {})


def drop_unknown_fields(value: Any, shape: Shape, path: str = "") -> list[str]:
    """Remove the fields ``shape`` does not know from ``value`` (in place); their paths.

    For ``fieldValidation=Warn`` and ``Ignore``; directive keys of a strategic merge patch
    (``$patch``, ``$setElementOrder/...``) are kept.
    """
    dropped: list[str] = []
    if isinstance(value, dict) and shape.kind == "struct":
        for key in list(value):
            where = f"{path}.{key}" if path else key
            if key.startswith("$"):
                continue
            sub = shape.fields.get(key)
            if sub is None:
                del value[key]
                dropped.append(where)
            else:
                dropped += drop_unknown_fields(value[key], sub, where)
    elif isinstance(value, dict) and shape.kind == "map" and shape.elem is not None:
        for key, sub_value in value.items():
            dropped += drop_unknown_fields(sub_value, shape.elem, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and shape.elem is not None:
        for i, item in enumerate(value):
            dropped += drop_unknown_fields(item, shape.elem, f"{path}[{i}]")
    return dropped
