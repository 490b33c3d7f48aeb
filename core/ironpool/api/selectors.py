"""Kubernetes label selectors (``app=web,tier in (a,b),!canary``) and field selectors.

Field selectors here accept any dotted path into the object (``spec.machinePoolRef.name=``), an
empty value meaning "unset or empty", so informers can watch e.g. unscheduled Machines. Their
``requirements`` are exposed so a store can push simple equality matches down into its query.

A selector a server is asked to apply is bounded: at most :data:`MAX_SELECTOR_BYTES` bytes and
:data:`MAX_SELECTOR_TERMS` terms (the requirements and ``in``/``notin`` values between its commas),
checked before it is parsed. Every object a list or watch looks at is matched against every term, so an
unbounded selector (15,000 terms) let one client spend most of a second of the server's time per
request; within the bounds a match costs microseconds, and a set of values is matched by hashing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ironpool.api import errors
from ironpool.api.fieldpath import label_value, qualified_name
from ironpool.api.meta import LabelSelectorSpec

LabelOp = Literal["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]
FieldOp = Literal["=", "!="]

MAX_SELECTOR_BYTES = 8 * 1024
MAX_SELECTOR_TERMS = 256
# Identifiers stop at whitespace and at the selector punctuation.
_TOKEN_RE = re.compile(r"\s*(==|!=|=|!|\(|\)|,|<|>|[^\s,()!=<>]+)")


@dataclass(frozen=True)
class Requirement:
    """One label requirement: ``key op values``."""

    key: str
    op: LabelOp
    values: tuple[str, ...] = ()
    value_set: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value_set", frozenset(self.values))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "=":
            return labels.get(self.key) == self.values[0]
        if op == "!=":
            return labels.get(self.key) != self.values[0]
        if op == "in":
            return self.key in labels and labels[self.key] in self.value_set
        if op == "notin":
            return labels.get(self.key) not in self.value_set
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        have = labels.get(self.key)
        if have is None:
            return False
        try:
            got, want = int(have), int(self.values[0])
        except ValueError:
            return False
        return got > want if op == "gt" else got < want

    def __str__(self) -> str:
        op = self.op
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in ("in", "notin"):
            return f"{self.key} {op} ({','.join(self.values)})"
        sym = {"=": "=", "!=": "!=", "gt": ">", "lt": "<"}[op]
        return f"{self.key}{sym}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; the empty selector matches everything.

    A list or watch matches every object it looks at against every requirement, so the requirements
    are sorted once by kind: equalities become one dict whose items must be a subset of the labels,
    existence tests two key sets, and ``in`` one loop of set lookups; all but the last run in C."""

    requirements: tuple[Requirement, ...] = ()
    _equal: dict[str, str] = field(init=False, repr=False, compare=False)
    _present: frozenset[str] = field(init=False, repr=False, compare=False)
    _absent: frozenset[str] = field(init=False, repr=False, compare=False)
    _member: tuple[tuple[str, frozenset[str]], ...] = field(init=False, repr=False, compare=False)
    _other: tuple[Requirement, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        equal: dict[str, str] = {}
        other: list[Requirement] = []
        for r in self.requirements:
            if r.op == "=" and equal.setdefault(r.key, r.values[0]) != r.values[0]:
                other.append(r)  # two values for one key: matches nothing, as the requirement says
            elif r.op not in ("=", "exists", "!", "in"):
                other.append(r)
        set_ = object.__setattr__
        set_(self, "_equal", equal)
        set_(self, "_present", frozenset(r.key for r in self.requirements if r.op == "exists"))
        set_(self, "_absent", frozenset(r.key for r in self.requirements if r.op == "!"))
        set_(self, "_member", tuple((r.key, r.value_set) for r in self.requirements if r.op == "in"))
        set_(self, "_other", tuple(other))

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        lbls = labels or {}
        if self._equal and not self._equal.items() <= lbls.items():
            return False
        if self._present and not self._present <= lbls.keys():
            return False
        if self._absent and not self._absent.isdisjoint(lbls):
            return False
        for key, values in self._member:
            if lbls.get(key) not in values:
                return False
        return all(r.matches(lbls) for r in self._other)

    def format(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __str__(self) -> str:
        return self.format()


def _bad(param: str, detail: str) -> errors.BadRequest:
    return errors.BadRequest(message=f"{param}: {detail}")


def check_selector_size(s: str, param: str) -> None:
    """Refuse (400, naming the limit) a selector past :data:`MAX_SELECTOR_BYTES` or
    :data:`MAX_SELECTOR_TERMS`; terms are counted by their separators, before any parsing."""
    size = len(s.encode())
    if size > MAX_SELECTOR_BYTES:
        raise _bad(param, f"the selector is {size} bytes, more than the limit of {MAX_SELECTOR_BYTES} bytes")
    terms = s.count(",") + 1
    if terms > MAX_SELECTOR_TERMS:
        raise _bad(param, f"the selector has {terms} terms, more than the limit of {MAX_SELECTOR_TERMS} "
                          "(terms: the requirements and set values between its commas)")


def _check_key(key: str, param: str) -> None:
    msgs = qualified_name(key)
    if msgs:
        raise _bad(param, f'invalid label key "{key}": {"; ".join(msgs)}')


def _check_value(value: str, param: str) -> None:
    msgs = label_value(value)
    if msgs:
        raise _bad(param, f'invalid label value: "{value}": {"; ".join(msgs)}')


def parse_label_selector(s: str | None, param: str = "labelSelector") -> LabelSelector:
    """Parse a label selector string; raise :class:`errors.BadRequest` naming ``param``."""
    if s is None or not s.strip():
        return LabelSelector()
    check_selector_size(s, param)
    tokens: list[str] = []
    pos = 0
    text = s.strip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise _bad(param, f"unable to parse requirement at {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    reqs: list[Requirement] = []
    i = 0
    n = len(tokens)
    punct = {"==", "!=", "=", "!", "(", ")", ",", "<", ">"}

    def ident(at: int, what: str) -> str:
        if at >= n or tokens[at] in punct:
            found = tokens[at] if at < n else "end of string"
            raise _bad(param, f"found '{found}', expected: {what}")
        return tokens[at]

    while i < n:
        if tokens[i] == "!":
            key = ident(i + 1, "identifier after '!'")
            _check_key(key, param)
            reqs.append(Requirement(key, "!"))
            i += 2
        else:
            key = ident(i, "identifier")
            _check_key(key, param)
            i += 1
            if i >= n or tokens[i] == ",":
                reqs.append(Requirement(key, "exists"))
            else:
                op = tokens[i]
                i += 1
                if op in ("=", "==", "!="):
                    value = ""
                    if i < n and tokens[i] not in punct:
                        value = tokens[i]
                        i += 1
                    _check_value(value, param)
                    reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
                elif op in (">", "<"):
                    value = ident(i, "integer value")
                    i += 1
                    try:
                        int(value)
                    except ValueError:
                        detail = f"for 'Gt', 'Lt' operators, the value must be an integer: {value!r}"
                        raise _bad(param, detail) from None
                    reqs.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
                elif op in ("in", "notin"):
                    if i >= n or tokens[i] != "(":
                        raise _bad(param, f"found '{tokens[i] if i < n else 'end of string'}', expected: '('")
                    i += 1
                    values: list[str] = []
                    while True:
                        if i < n and tokens[i] == ")":
                            i += 1
                            break
                        if i < n and tokens[i] == ",":
                            i += 1
                            continue
                        v = ident(i, "value or ')'")
                        _check_value(v, param)
                        values.append(v)
                        i += 1
                    if not values:
                        detail = f"for 'in', 'notin' operators, values set can't be empty (key {key!r})"
                        raise _bad(param, detail)
                    reqs.append(Requirement(key, op, tuple(sorted(set(values)))))  # type: ignore[arg-type]
                else:
                    raise _bad(param, f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")
        if i < n:
            if tokens[i] != ",":
                raise _bad(param, f"found '{tokens[i]}', expected: ','")
            i += 1
            if i >= n:
                raise _bad(param, "found end of string, expected: requirement after ','")
    reqs.sort(key=lambda r: r.key)
    return LabelSelector(tuple(reqs))


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """The selector matching objects that carry all of ``labels`` (``machinePoolSelector``)."""
    return LabelSelector(tuple(Requirement(k, "=", (v,)) for k, v in sorted((labels or {}).items())))


# -- field selectors ---------------------------------------------------------------------------

def _field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return ""  # objects and lists never equal a selector value


def get_path(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at a dotted path, or ``None`` when any step is missing."""
    cur = obj
    for part in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


@dataclass(frozen=True)
class FieldRequirement:
    """``path op value``; an empty value matches an unset field."""

    path: str
    op: FieldOp
    value: str
    parts: tuple[str, ...] = field(init=False, repr=False, compare=False)  # the path's steps

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.path.split(".")))

    def matches(self, obj: dict[str, Any]) -> bool:
        got = _field_string(get_path(obj, self.parts))
        return (got == self.value) if self.op == "=" else (got != self.value)

    def __str__(self) -> str:
        v = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.path}{self.op}{v}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements."""

    field_requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.field_requirements

    @property
    def requirements(self) -> list[tuple[str, str, str]]:
        """``(path, op, value)`` triples, ``op`` being ``"="`` or ``"!="``."""
        return [(r.path, r.op, r.value) for r in self.field_requirements]

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.field_requirements)

    def format(self) -> str:
        return ",".join(str(r) for r in self.field_requirements)

    def __str__(self) -> str:
        return self.format()


_FIELD_OPS: tuple[tuple[str, FieldOp], ...] = (("!=", "!="), ("==", "="), ("=", "="))
_FIELD_PATH_RE = re.compile(r"^[A-Za-z0-9_\-/]+(\.[A-Za-z0-9_\-/]+)*$")


def _split_escaped(s: str, sep: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse_field_selector(s: str | None, param: str = "fieldSelector") -> FieldSelector:
    """Parse ``path=value,path!=value`` (``==`` too); raise :class:`errors.BadRequest` naming ``param``."""
    if s is None or not s.strip():
        return FieldSelector()
    check_selector_size(s, param)
    reqs: list[FieldRequirement] = []
    for term in _split_escaped(s.strip(), ","):
        term = term.strip()
        if not term:
            raise _bad(param, f"empty requirement in {s!r}")
        op: FieldOp = "="
        for sym, sym_op in _FIELD_OPS:
            idx = _find_unescaped(term, sym)
            if idx >= 0:
                op = sym_op
                path, value = term[:idx].strip(), term[idx + len(sym):]
                break
        else:
            raise _bad(param, f"invalid selector: {term!r}; expected path=value, path==value or path!=value")
        if not _FIELD_PATH_RE.match(path):
            raise _bad(param, f"invalid field path {path!r} in {term!r}")
        reqs.append(FieldRequirement(path, op, _unescape(value)))
    return FieldSelector(tuple(reqs))


def _find_unescaped(term: str, sym: str) -> int:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        if term.startswith(sym, i):
            return i
        i += 1
    return -1


# -- selectors carried by objects ----------------------------------------------------------------

_EXPRESSION_OPS: dict[str, LabelOp] = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def compile_selector(spec: LabelSelectorSpec) -> LabelSelector:
    """The matcher of a ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``, ANDed)."""
    reqs = [Requirement(k, "=", (v,)) for k, v in sorted((spec.match_labels or {}).items())]
    for expr in spec.match_expressions or ():
        reqs.append(Requirement(expr.key, _EXPRESSION_OPS[expr.operator], tuple(expr.values or ())))
    return LabelSelector(tuple(reqs))
