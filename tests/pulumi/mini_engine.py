"""A small stand-in for the Pulumi engine: runs a real program and forwards it to the real plugin.

The Pulumi CLI cannot be installed here, so this plays its part. ``pulumi.runtime.set_mocks`` makes
the program's resource registrations arrive in :meth:`MiniEngine.new_resource` exactly as the SDK
serialised them (secret wrappers and ``__provider`` included); from there the engine's step logic is
reproduced against the real ``python -m pulumi.dynamic`` plugin (:mod:`pulumi_plugin`):

* secrets are unwrapped before every call (the plugin answers ``acceptSecrets=false``);
* ``Check(olds=previous inputs or {}, news)``; failures fail the registration;
* a new URN is created; a known one is diffed: NONE keeps the state, SOME without replacements updates,
  replacements delete first when the plugin asks (else create first), then check again with empty
  olds and create, as the engine does;
* preview runs only Check and Diff and echoes the checked inputs as outputs;
* after a successful program, every URN in state the program no longer declares is deleted,
  dependents first (dependencies come from the registration requests); a failed program deletes
  nothing, like the engine;
* a resource given ``opts=ResourceOptions(id=...)`` is only read, and stays out of the state;
* :meth:`refresh` reads every resource and drops the gone ones; :meth:`destroy` deletes everything.

Not reproduced (engine features the provider cannot influence): protect, retain_on_delete, aliases,
ignore_changes, pending-operation recovery, state encryption and the CLI's display.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi_plugin import DIFF_NONE, DIFF_SOME, Plugin

Props = dict[str, Any]


def strip_secrets(value: Any) -> Any:
    """``value`` without secret wrappers, as the engine sends it to a provider that accepts none."""
    if rpc.is_rpc_secret(value):
        return strip_secrets(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: strip_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


class StepFailed(Exception):
    """A resource step failed; the message names the resource and says why."""


class _Monitor(MockMonitor):
    """The SDK's mock monitor, also recording each registration's dependencies for deletion order."""

    def __init__(self, engine: MiniEngine) -> None:
        super().__init__(engine)
        self.engine = engine

    def RegisterResource(self, request: Any) -> Any:
        urn = self.make_urn(request.parent, request.type, request.name)
        deps = set(request.dependencies)
        for prop in request.propertyDependencies.values():
            deps.update(prop.urns)
        self.engine.dependencies[urn] = sorted(deps)
        return super().RegisterResource(request)


class MiniEngine(pulumi.runtime.Mocks):
    """One deployment (preview, up, refresh or destroy) of one stack whose state is a JSON file."""

    def __init__(self, state_file: Path, config: Mapping[str, Any], secret_keys: Iterable[str] = (),
                 preview: bool = False, project: str = "proj", stack: str = "dev",
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.state_file, self.preview, self.project, self.stack = state_file, preview, project, stack
        saved = json.loads(state_file.read_text()) if state_file.exists() else {}
        self.state: dict[str, Props] = saved.get("resources", {})
        self.dependencies: dict[str, list[str]] = saved.get("dependencies", {})
        self.seen: set[str] = set()
        self.log: list[tuple[str, str]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.plugin = Plugin(project=project, env=env, cwd=cwd)
        self.plugin.configure(config, tuple(secret_keys))

    def monitor(self) -> MockMonitor:
        """The monitor to hand to ``set_mocks``."""
        return _Monitor(self)

    def urn(self, typ: str, name: str) -> str:
        return f"urn:pulumi:{self.stack}::{self.project}::{typ}::{name}"

    def _note(self, op: str, urn: str) -> None:
        with self._lock:
            self.log.append((op, urn.rsplit("::", 1)[1]))

    def _save(self, urn: str, entry: Props | None) -> None:
        with self._lock:
            if entry is None:
                self.state.pop(urn, None)
            else:
                self.state[urn] = entry

    # -- the program's registrations -------------------------------------------------------------

    def call(self, args: Any) -> tuple[dict[str, Any], None]:
        return {}, None

    def new_resource(self, args: Any) -> tuple[str, Props]:
        urn = self.urn(args.typ, args.name)
        try:
            if args.resource_id:
                return self._read(urn, args.resource_id, strip_secrets(dict(args.inputs)))
            return self._step(urn, strip_secrets(dict(args.inputs)))
        except Exception as exc:
            with self._lock:
                self.errors.append(f"{args.name}: {exc}")
            raise StepFailed(f"{args.typ} {args.name}: {exc}") from exc

    def _read(self, urn: str, resource_id: str, inputs: Props) -> tuple[str, Props]:
        """``Resource(..., opts=ResourceOptions(id=...))``: read, never managed (not in the state)."""
        self._note("read", urn)
        rid, outs, _ = self.plugin.read(resource_id, urn, {}, inputs)
        if not rid:
            raise StepFailed(f"{resource_id} does not exist")
        return rid, outs

    def _step(self, urn: str, news: Props) -> tuple[str, Props]:
        with self._lock:
            self.seen.add(urn)
            old = self.state.get(urn)
        p = self.plugin
        olds = old["inputs"] if old else {}
        ins, failures = p.check(urn, olds, news)
        if failures:
            raise StepFailed("; ".join(f"{prop}: {reason}" for prop, reason in failures))
        if old is None:
            op, dbr = "create", False
        else:
            d = p.diff(old["id"], urn, old["outputs"], ins, olds)
            if d.changes == DIFF_SOME:
                op = "replace" if d.replaces else "update"
            elif d.changes == DIFF_NONE:
                op = "same"
            else:
                op = "update" if olds != ins else "same"
            dbr = op == "replace" and d.deleteBeforeReplace
        self._note(op, urn)
        if op == "replace":
            # The engine checks the replacement as a new object (empty olds) before creating it.
            ins, failures = p.check(urn, {}, news)
            if failures:
                raise StepFailed("; ".join(f"{prop}: {reason}" for prop, reason in failures))
        if self.preview:
            if op == "same":
                assert old is not None
                return old["id"], old["outputs"]
            return (old or {}).get("id", ""), ins
        if op == "same":
            assert old is not None
            self._save(urn, {**old, "inputs": ins})
            return old["id"], old["outputs"]
        if op == "update":
            assert old is not None
            outs = p.update(old["id"], urn, old["outputs"], ins, olds)
            self._save(urn, {"id": old["id"], "inputs": ins, "outputs": outs})
            return old["id"], outs
        if dbr:
            assert old is not None
            p.delete(old["id"], urn, old["outputs"], olds)
            self._save(urn, None)
        rid, outs = p.create(urn, ins)
        if op == "replace" and not dbr:
            assert old is not None
            p.delete(old["id"], urn, old["outputs"], olds)
        self._save(urn, {"id": rid, "inputs": ins, "outputs": outs})
        return rid, outs

    # -- after the program, refresh, destroy -------------------------------------------------------

    def _delete_in_order(self, urns: list[str]) -> None:
        """Delete ``urns``, each only once nothing still in state depends on it; independent ones at once."""
        remaining = set(urns)
        with ThreadPoolExecutor(8) as pool:
            while remaining:
                blocked = {d for u in remaining for d in self.dependencies.get(u, [])}
                wave = sorted(u for u in remaining if u not in blocked) or sorted(remaining)
                list(pool.map(self._delete_one, wave))
                remaining -= set(wave)

    def _delete_one(self, urn: str) -> None:
        entry = self.state[urn]
        self._note("delete", urn)
        if not self.preview:
            self.plugin.delete(entry["id"], urn, entry["outputs"], entry["inputs"])
            self._save(urn, None)
            self.dependencies.pop(urn, None)

    def finish(self, succeeded: bool) -> None:
        """End an up or preview: delete what the program no longer declares, if the program succeeded."""
        if succeeded:
            self._delete_in_order([u for u in self.state if u not in self.seen])

    def refresh(self) -> None:
        """``pulumi refresh``: read every resource; drop those that are gone, keep the rest live."""
        for urn, entry in list(self.state.items()):
            rid, outs, inputs = self.plugin.read(entry["id"], urn, entry["outputs"], entry["inputs"])
            if not rid:
                self._note("deleted", urn)
                self._save(urn, None)
                continue
            changed = outs != entry["outputs"] or (inputs is not None and inputs != entry["inputs"])
            self._note("refreshed" if changed else "same", urn)
            kept = inputs if inputs is not None else entry["inputs"]
            self._save(urn, {"id": rid, "outputs": outs, "inputs": kept})

    def destroy(self) -> None:
        """``pulumi destroy``: delete every resource, dependents first."""
        self._delete_in_order(list(self.state))

    def close(self) -> None:
        """Save the state (except in a preview) and stop the plugin; safe to call twice."""
        if self.plugin.process.poll() is not None:
            return
        if not self.preview:
            saved = {"resources": self.state, "dependencies": self.dependencies}
            self.state_file.write_text(json.dumps(saved, indent=1, sort_keys=True))
        self.plugin.close()


def run_program(engine: MiniEngine, program: Callable[[], None], config: Mapping[str, Any],
                secret_keys: Iterable[str] = ()) -> dict[str, Any]:
    """Run ``program`` (a callable that declares resources and calls ``pulumi.export``) under the mini
    engine; returns the stack outputs (unknown ones as ``"<unknown>"``, secret ones as ``"[secret]"``)."""
    from pulumi.runtime.mocks import set_mocks
    from pulumi.runtime.sync_await import _sync_await

    pulumi.runtime.set_all_config(dict(config), list(secret_keys))
    set_mocks(engine, project=engine.project, stack=engine.stack, preview=engine.preview,
              monitor=engine.monitor())
    exports: dict[str, Any] = {}
    real_export = pulumi.export

    def export(name: str, value: Any) -> None:
        exports[name] = value
        real_export(name, value)

    pulumi.export = export  # type: ignore[assignment]
    try:
        pulumi.runtime.test(program)()
    finally:
        pulumi.export = real_export  # type: ignore[assignment]
    outputs: dict[str, Any] = {}
    for name, value in exports.items():
        out = pulumi.Output.from_input(value)
        if _sync_await(out.is_secret()):
            outputs[name] = "[secret]"
            continue
        resolved = _sync_await(out.future(with_unknowns=True))
        outputs[name] = json.loads(json.dumps(resolved, default=lambda _v: "<unknown>"))
    return outputs
