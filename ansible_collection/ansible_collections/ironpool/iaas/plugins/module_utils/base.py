# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The frame of every ironpool.iaas module: shared options, the connection, and errors turned into
task failures (``fail_json``) whose message names the option at fault."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ironpool.iaas.plugins.module_utils.client import (
    HAS_IRONPOOL,
    IRONPOOL_IMPORT_ERROR,
    ConnectionOptionError,
    connect,
    connection_argument_spec,
    missing_ironpool_message,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError, describe_api_error
from ansible_collections.ironpool.iaas.plugins.module_utils.placement import (
    placement_request,
    pool_of,
    predict_machine_set,
    predict_pools,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, object_key
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import WaitFailed, await_objects

try:
    from ironpool.api.errors import ApiError
    from ironpool.client import ServerUnreachable
except ImportError:  # reported by IronpoolModule.execute through missing_required_lib
    pass


def placement_header(what: str, placed: dict[str, Any]) -> str:
    """The after header of a check-mode diff of a new Machine or Volume: the pool the scheduler
    picks, or why none fits."""
    if placed.get("pool"):
        return f"{what} would land on pool {placed['pool']} (the scheduler's placement preview)"
    return f"{what} fits no pool now: {placed.get('placement_reason') or 'no reason given'}"


class IronpoolModule:
    """Subclasses set ``argument_spec`` (beyond the connection options), ``module_kwargs``
    (``required_if``, ``mutually_exclusive``, ...) and ``fields`` (API field path -> option), and
    implement :meth:`run`, which ends with :meth:`exit`."""

    argument_spec: Mapping[str, Any] = {}
    module_kwargs: Mapping[str, Any] = {}
    fields: Mapping[str, str] = {}

    def __init__(self) -> None:
        spec = connection_argument_spec()
        spec.update(self.argument_spec)
        self.module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **self.module_kwargs)
        self.params: dict[str, Any] = self.module.params
        self.check_mode: bool = self.module.check_mode
        self.diff_mode: bool = bool(self.module._diff)
        self.client: Any = None
        self.namespace = "default"

    def execute(self) -> NoReturn:
        """Connect, :meth:`run`, and fail with a clear message on any error."""
        if not HAS_IRONPOOL:
            self.module.fail_json(msg=missing_ironpool_message(), exception=IRONPOOL_IMPORT_ERROR)
        try:
            self.client = connect(self.params)
        except ConnectionOptionError as exc:
            self.fail(str(exc))
        self.namespace = self.client.config.namespace
        try:
            with self.client:
                self.run()
        except OptionError as exc:
            self.fail(str(exc))
        except ApiError as exc:
            self.fail(describe_api_error(exc, self.fields), reason=exc.reason)
        except ServerUnreachable as exc:
            self.fail(str(exc))
        self.fail("the module ended without a result")  # run() always exits; this is a bug guard

    def run(self) -> None:
        raise NotImplementedError

    def placement(self, declarer: TaskDeclarer, obj: dict[str, Any] | None) -> dict[str, Any]:
        """Check mode, for a Machine or Volume not bound yet: the pool the scheduler would pick now
        (``pool``, empty when none fits) and why (``placement_reason``). A Machine is asked about
        together with the Machines earlier tasks of the run would create (``predict_with``, which
        the collection's action plugin keeps), and is handed back as ``placement_request`` for the
        tasks after it."""
        if obj is None or pool_of(obj) is not None:
            return {}
        if declarer.info.kind == "Machine":
            mine = declarer.with_identity(obj)
            me = object_key(mine)
            earlier = [m for m in self.params.get("predict_with") or []
                       if object_key(declarer.with_identity(m)) != me]
            answer = predict_machine_set(self.client, self.namespace, [*earlier, mine])[-1]
            return {"pool": answer["pool"] or "", "placement_reason": answer["reason"],
                    "placement_request": placement_request(mine)}
        key = (declarer.info.kind, object_key(declarer.with_identity(obj)))
        predicted = predict_pools(self.client, [obj], self.namespace).get(key, {})
        return {"pool": predicted.get("pool") or "", "placement_reason": predicted.get("reason", "")}

    def finish_present(self, declarer: TaskDeclarer, obj: dict[str, Any] | None, result: dict[str, Any],
                       summary: Callable[[dict[str, Any] | None], dict[str, Any]]) -> NoReturn:
        """The end of state present for a Machine or Volume: in check mode, the pool it would land on
        (named in the diff's header too); else, with ``wait``, wait for ``wait_for`` and return the
        object as it was then (``summary`` turns it into the result's fields)."""
        p = self.params
        if self.check_mode:
            placed = self.placement(declarer, obj)
            if placed and self.diff_mode:
                diffs = result["diff"] if isinstance(result["diff"], list) else [result["diff"]]
                what = f"{declarer.info.kind} {object_key(declarer.with_identity(obj or {}))}"
                diffs[0]["after_header"] = placement_header(what, placed)
            self.exit(**{**result, **placed})
        if p["wait"]:
            try:
                found = await_objects(self.client, declarer.info, declarer.namespace, [p["name"]],
                                      p["wait_for"], p)
            except WaitFailed as exc:
                result.update(summary(exc.last.get(p["name"])))
                self.fail(str(exc), **result)
            result.update(summary(found[p["name"]]))
        self.exit(**result)

    def delete_and_wait(self, declarer: TaskDeclarer, current: dict[str, Any] | None, result_key: str,
                        still_there: str, then: Callable[[], bool] | None = None) -> NoReturn:
        """State absent: delete (then run ``then``, which says whether it changed something), and
        with ``wait`` wait until the object is gone (its poollet's finalizer keeps it until the
        domain or volume is removed)."""
        p = self.params
        outcome = declarer.absent(p["name"], current)
        also_changed = then() if then is not None else False
        result: dict[str, Any] = {"changed": outcome.changed or also_changed,
                                  "action": outcome.action, result_key: outcome.obj or {}}
        if self.diff_mode:
            result["diff"] = outcome.diff()
        if p["wait"] and not self.check_mode and current is not None:
            try:
                await_objects(self.client, declarer.info, declarer.namespace, [p["name"]], "gone", p)
            except WaitFailed as exc:
                result[result_key] = exc.last.get(p["name"]) or {}
                where = object_key(declarer.with_identity({"metadata": {"name": p["name"]}}))
                self.fail(f"{declarer.info.kind} {where} is still there after {p['wait_timeout']}s "
                          f"({still_there})", **result)
        self.exit(**result)

    def fail(self, msg: str, **result: Any) -> NoReturn:
        self.module.fail_json(msg=msg, **result)
        raise AssertionError("unreachable")  # fail_json exits

    def exit(self, **result: Any) -> NoReturn:
        self.module.exit_json(**result)
        raise AssertionError("unreachable")  # exit_json exits
