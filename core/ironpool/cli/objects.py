"""The objects a command names and how commands read them: targets from ``KIND NAME`` arguments or
manifests, kinds as a comma list, paged lists, watches that resume, and what ``wait --for`` waits
for (the readiness every front end shares, or kubectl's ``condition=`` and ``jsonpath=``)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ironpool.api.errors import Expired
from ironpool.api.resources import ResourceInfo, by_kind, resolve
from ironpool.cli.errors import CommandError
from ironpool.cli.manifests import Manifest
from ironpool.cli.printers import dig, qualified_name
from ironpool.client.readiness import Readiness, Verdict, gone, readiness_for
from ironpool.client.rest import Client
from ironpool.client.wire import Obj


@dataclass(frozen=True)
class Target:
    """One object named on the command line or in a manifest."""

    info: ResourceInfo
    name: str
    namespace: str | None

    @property
    def label(self) -> str:
        return qualified_name(self.info, self.name)


def parse_kinds(arg: str) -> list[ResourceInfo]:
    """``machines`` or ``machines,volumes``: the kinds named, in order, each once."""
    kinds: list[ResourceInfo] = []
    for part in arg.split(","):
        if not part.strip():
            raise CommandError(f"{arg!r}: an empty kind in the list")
        info = resolve(part)
        if info not in kinds:
            kinds.append(info)
    return kinds


def parse_targets(args: tuple[str, ...], namespace: str) -> list[Target]:
    """``KIND NAME...`` or ``KIND/NAME...`` into targets."""
    if not args:
        raise CommandError("specify a resource: KIND NAME or KIND/NAME")
    if "/" in args[0]:
        out = []
        for arg in args:
            kind, sep, name = arg.partition("/")
            if not sep or not kind or not name:
                raise CommandError(f"{arg!r}: expected KIND/NAME when the first argument is KIND/NAME")
            info = resolve(kind)
            out.append(Target(info, name, namespace if info.namespaced else None))
        return out
    info = resolve(args[0])
    if len(args) < 2:
        raise CommandError(f"specify the name of the {info.singular}")
    return [Target(info, name, namespace if info.namespaced else None) for name in args[1:]]


def manifest_target(m: Manifest, namespace: str, explicit_namespace: str | None) -> Target:
    info = by_kind(str(m.obj["apiVersion"]), str(m.obj["kind"]))
    if not info.namespaced:
        return Target(info, m.name, None)
    if explicit_namespace and m.namespace and m.namespace != explicit_namespace:
        raise CommandError(
            f"the namespace from the manifest ({m.namespace}) "
            f"does not match --namespace ({explicit_namespace})"
        )
    return Target(info, m.name, m.namespace or namespace)


def list_all(client: Client, info: ResourceInfo, namespace: str | None, label_selector: str | None,
             field_selector: str | None) -> tuple[list[Obj], str]:
    items: list[Obj] = []
    token: str | None = None
    rv = ""
    while True:
        page = client.list_raw(info, namespace, label_selector, field_selector, 500, token)
        items.extend(page.items)
        rv = page.resource_version or rv
        token = page.continue_
        if not token:
            return items, rv


def watch_events(client: Client, info: ResourceInfo, ns: str | None, selector: str | None,
                 field_selector: str | None, rv: str, deadline: float | None,
                 accept: str | None = None) -> Iterator[tuple[str, Obj]]:
    """Watch events from ``rv`` until ``deadline``, resuming dropped streams and relisting on 410."""
    while True:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return
        timeout = 300 if remaining is None else max(1, math.ceil(remaining))
        try:
            for event in client.watch_raw(info, ns, rv, selector, field_selector, timeout, accept=accept):
                rv = event.resource_version or rv
                if event.type != "BOOKMARK":
                    yield event.type, event.object
                if deadline is not None and time.monotonic() >= deadline:
                    return
        except Expired:
            _, rv = list_all(client, info, ns, selector, field_selector)


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
#: What ``wait --for`` names beside kubectl's forms: the readiness every front end shares.
NAMED_CONDITIONS = ("scheduled", "running", "available", "ready")


def jsonpath_get(obj: Any, expr: str) -> Any:
    """A jsonpath-lite lookup: ``{.status.conditions[0].type}`` or ``.status.state``."""
    path = expr.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    path = path.lstrip(".")
    cur = obj
    for key, index in _PATH_PART.findall(path):
        if key:
            cur = cur.get(key) if isinstance(cur, dict) else None
        else:
            cur = cur[int(index)] if isinstance(cur, list) and int(index) < len(cur) else None
        if cur is None:
            return None
    return cur


def parse_condition(spec: str, info: ResourceInfo) -> Readiness:
    """``delete``, a named readiness (``running``, ``scheduled``, ``available``, ``ready``),
    ``condition=Ready[=True]`` or ``jsonpath={.status.state}[=Running]``, for objects of ``info``."""
    kind, _, rest = spec.partition("=")
    if spec == "delete":
        return gone
    if spec in NAMED_CONDITIONS:
        try:
            return readiness_for(info.kind, spec)
        except ValueError as exc:
            raise CommandError(f"--for: {exc}") from None
    if kind == "condition" and rest:
        ctype, _, wanted = rest.partition("=")
        want = (wanted or "True").lower()

        def has_condition(obj: Obj | None) -> Verdict:
            cond = next((c for c in (dig(obj, "status.conditions") or [])
                         if str(c.get("type", "")).lower() == ctype.lower()), None) if obj else None
            if cond is None:
                return Verdict(False, f"no {ctype} condition yet" if obj else "does not exist")
            ok = str(cond.get("status", "")).lower() == want
            detail = f": {cond['message']}" if cond.get("message") and not ok else ""
            return Verdict(ok, f"{cond.get('type')}={cond.get('status')}{detail}")
        return has_condition
    if kind == "jsonpath" and rest:
        match = re.fullmatch(r"(\{[^}]*\}|[^=]+)(?:=(.*))?", rest)
        if match is None:
            raise CommandError(f"--for: cannot parse jsonpath expression {rest!r}")
        expr, wanted_value = match.group(1), match.group(2)

        def jsonpath_matches(obj: Obj | None) -> Verdict:
            value = jsonpath_get(obj, expr) if obj else None
            if wanted_value is None:
                ok = value not in (None, "", [], {})
            else:
                ok = value is not None and str(value) == wanted_value
            return Verdict(ok, f"{expr} is {value!r}" if obj else "does not exist")
        return jsonpath_matches
    raise CommandError(
        f"--for: expected delete, {', '.join(NAMED_CONDITIONS)}, condition=NAME[=VALUE] or "
        f"jsonpath={{.path}}[=VALUE], got {spec!r}"
    )

