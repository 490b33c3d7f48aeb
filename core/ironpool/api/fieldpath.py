"""Field errors in Kubernetes' ``field.Error`` style and name/label format checks.

The checks mirror ``k8s.io/apimachinery/pkg/util/validation``: the same regular expressions and
the same messages, so errors read as they would from a Kubernetes apiserver.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from ironpool.api.errors import Cause

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL}$")
_DNS1123_SUBDOMAIN = f"{_DNS1123_LABEL}(\\.{_DNS1123_LABEL})*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN}$")
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME}$")
_LABEL_VALUE_RE = re.compile(f"^({_QUALIFIED_NAME})?$")
_CONFIG_MAP_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{_DNS1123_LABEL}')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_DNS1123_SUBDOMAIN}')"
)
_QUALIFIED_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    f"an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QUALIFIED_NAME}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    f"regex used for validation is '({_QUALIFIED_NAME})?')"
)


def child(path: str, name: str) -> str:
    """``path.name``, or ``path[name]`` when ``name`` is not a plain identifier (a map key)."""
    if _IDENT_RE.match(name):
        return f"{path}.{name}" if path else name
    return f"{path}[{name}]"


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


class FieldErrors:
    """Collects every problem with an object before failing, as Kubernetes' ``ErrorList``."""

    __slots__ = ("causes",)

    def __init__(self) -> None:
        self.causes: list[Cause] = []

    def __bool__(self) -> bool:
        return bool(self.causes)

    def add(self, cause: Cause) -> None:
        self.causes.append(cause)

    def required(self, path: str, detail: str = "") -> None:
        msg = f"Required value: {detail}" if detail else "Required value"
        self.causes.append(Cause(field=path, message=msg, reason="FieldValueRequired"))

    def invalid(self, path: str, value: Any, detail: str) -> None:
        shown = "null" if value is None else _show(value)
        self.causes.append(Cause(field=path, message=f"Invalid value: {shown}: {detail}",
                                 reason="FieldValueInvalid"))

    def type_invalid(self, path: str, value: Any, detail: str) -> None:
        self.causes.append(Cause(field=path, message=f"Invalid value: {_show(value)}: {detail}",
                                 reason="FieldValueTypeInvalid"))

    def forbidden(self, path: str, detail: str) -> None:
        self.causes.append(Cause(field=path, message=f"Forbidden: {detail}", reason="FieldValueForbidden"))

    def duplicate(self, path: str, value: Any) -> None:
        self.causes.append(Cause(field=path, message=f"Duplicate value: {_show(value)}",
                                 reason="FieldValueDuplicate"))

    def not_supported(self, path: str, value: Any, supported: Iterable[str]) -> None:
        sup = ", ".join(_show(s) for s in supported)
        msg = f"Unsupported value: {_show(value)}: supported values: {sup}"
        self.causes.append(Cause(field=path, message=msg, reason="FieldValueNotSupported"))

    def unknown(self, path: str) -> None:
        msg = f'unknown field "{path}"'
        self.causes.append(Cause(field=path, message=msg, reason="FieldValueNotSupported"))

    def immutable(self, path: str, value: Any) -> None:
        self.invalid(path, value, "field is immutable")

    def not_found(self, path: str, value: Any, detail: str = "") -> None:
        msg = f"Not found: {_show(value)}" + (f": {detail}" if detail else "")
        self.causes.append(Cause(field=path, message=msg, reason="FieldValueNotFound"))


_EXPECTED_RE = re.compile(r"'((?:[^'\\]|\\.)*)'")


def loc_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """The field path of a pydantic error location (under ``prefix``)."""
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path = index(path, part)
        elif part == "[key]":
            continue
        else:
            path = child(path, part)
    return path


def add_pydantic_errors(exc: ValidationError, errs: FieldErrors, prefix: str = "") -> None:
    """Report pydantic's decoding errors as field errors, their paths under ``prefix``."""
    for e in exc.errors(include_url=False):
        path = loc_path(e["loc"], prefix)
        typ = e["type"]
        value = e.get("input")
        if typ == "missing":
            errs.required(path)
        elif typ == "extra_forbidden":
            errs.unknown(path)
        elif typ == "literal_error":
            expected = str((e.get("ctx") or {}).get("expected", ""))
            errs.not_supported(path, value, _EXPECTED_RE.findall(expected))
        elif typ in ("value_error", "assertion_error"):
            msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
            errs.invalid(path, value, msg)
        elif typ == "model_type" or typ == "dict_type":
            errs.type_invalid(path, value, "must be an object")
        elif typ == "list_type":
            errs.type_invalid(path, value, "must be a list")
        else:
            errs.type_invalid(path, value, e["msg"])


# -- format checks; each returns the messages (empty: valid), cached as names repeat a lot -------

@lru_cache(maxsize=8192)
def dns1123_label(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL_RE.match(value):
        msgs.append(_LABEL_MSG)
    return tuple(msgs)


@lru_cache(maxsize=8192)
def dns1123_subdomain(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 253:
        msgs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        msgs.append(_SUBDOMAIN_MSG)
    return tuple(msgs)


@lru_cache(maxsize=8192)
def qualified_name(value: str) -> tuple[str, ...]:
    """Kubernetes ``IsQualifiedName``: ``[prefix/]name`` with a DNS-subdomain prefix."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        msgs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        msgs = []
        if not prefix:
            msgs.append("prefix part must be non-empty")
        else:
            msgs.extend("prefix part " + m for m in dns1123_subdomain(prefix))
    else:
        return (
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            f"used for validation is '{_QUALIFIED_NAME}') with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')",
        )
    if not name:
        msgs.append("name part must be non-empty")
    elif len(name) > 63:
        msgs.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME_RE.match(name):
        msgs.append(_QUALIFIED_MSG)
    return tuple(msgs)


@lru_cache(maxsize=8192)
def label_value(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 63:
        msgs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.match(value):
        msgs.append(_LABEL_VALUE_MSG)
    return tuple(msgs)


@lru_cache(maxsize=8192)
def secret_key(value: str) -> tuple[str, ...]:
    msgs = []
    if len(value) > 253:
        msgs.append("must be no more than 253 characters")
    if not _CONFIG_MAP_KEY_RE.match(value):
        msgs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                    "'[-._a-zA-Z0-9]+')")
    if value in (".", ".."):
        msgs.append(f"must not be '{value}'")
    elif value.startswith(".."):
        msgs.append("must not start with '..'")
    return tuple(msgs)


def validate_labels(labels: Mapping[str, Any] | None, path: str, errs: FieldErrors) -> None:
    """Kubernetes ``ValidateLabels``: qualified-name keys, label-value values."""
    if not labels:
        return
    for k, v in labels.items():
        if not isinstance(k, str):
            continue
        for msg in qualified_name(k):
            errs.invalid(path, k, msg)
        if isinstance(v, str):
            for msg in label_value(v):
                errs.invalid(path, v, msg)


_TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate_annotations(annotations: Mapping[str, Any] | None, path: str, errs: FieldErrors) -> None:
    """Kubernetes ``ValidateAnnotations``: qualified-name keys (case-insensitive), 256 KiB total."""
    if not annotations:
        return
    total = 0
    for k, v in annotations.items():
        if not isinstance(k, str):
            continue
        for msg in qualified_name(k.lower()):
            errs.invalid(path, k, msg)
        total += len(k) + (len(v) if isinstance(v, str) else 0)
    if total > _TOTAL_ANNOTATION_SIZE_LIMIT:
        msg = f"Too long: must have at most {_TOTAL_ANNOTATION_SIZE_LIMIT} bytes"
        errs.add(Cause(field=path, message=msg, reason="FieldValueTooLong"))
