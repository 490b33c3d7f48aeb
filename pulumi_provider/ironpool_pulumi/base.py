"""The lifecycle every ironpool resource shares: check, diff, create, read, update, delete.

A kind plugs in how its properties become an API manifest and back (:meth:`manifest`,
:meth:`properties`), what it reports (:meth:`status_outputs`) and what "ready" means
(:meth:`readiness`). Validation is the API's own (:func:`ironpool.api.validate_create`), so ``check``
refuses exactly what the apiserver would, naming the property instead of the API field. Writing and
waiting go through ``ironpool.client``'s declarative layer, as the CLI and the Ansible collection do:
an update is the merge patch from what the old inputs declared to what the new ones do
(:func:`~ironpool.client.declare.desired_patch`), written as the field manager ``ironpool-pulumi``,
and "ready" is :mod:`ironpool.client.readiness`'s. With ``fail_on_unschedulable`` (the default) a
create fails within seconds when the scheduler says no pool offers the class or matches the
selector, naming its reason, instead of waiting out ``wait_timeout``.

Providers are pickled into the stack's state; they carry no attributes (the configuration lives in
:mod:`ironpool_pulumi.connection`) and set ``serialize_as_secret_always = False`` so the state does
not encrypt a payload that holds no secret.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, ClassVar

from ironpool.api import validate_create
from ironpool.api.errors import AlreadyExists, Cause, Invalid, NotFound
from ironpool.api.resources import ResourceInfo
from ironpool.client import Client
from ironpool.client.declare import FIELD_MANAGERS, desired_patch
from ironpool.client.readiness import Readiness, gone
from ironpool.client.wait import Gone, Unschedulable, WaitError, WaitTimeout, wait_for_one
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from ironpool_pulumi import errors
from ironpool_pulumi.connection import configure_from, connection
from ironpool_pulumi.errors import ProviderError
from ironpool_pulumi.values import digest, is_unknown, none_if_empty, plain

Obj = dict[str, Any]
Props = dict[str, Any]

DEFAULT_WAIT_TIMEOUT = 600
ROLLBACK_TIMEOUT = 120.0
PROVIDER_KEY = "__provider"


FIELD_MANAGER = FIELD_MANAGERS["pulumi"]
errors.install()  # in the plugin process: known errors in one line, not a traceback


def object_id(namespace: str | None, name: str) -> str:
    """The Pulumi ID of an object: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
    return f"{namespace}/{name}" if namespace else name


def split_id(resource_id: str) -> tuple[str | None, str]:
    """``(namespace, name)`` of an ID made by :func:`object_id`."""
    namespace, sep, name = resource_id.rpartition("/")
    return (namespace if sep else None), name


def choice(value: Any, allowed: tuple[str, ...], default: str, prop: str,
           failures: list[CheckFailure]) -> Any:
    """``value`` (any case) if it is one of ``allowed``, ``default`` if unset; else a failure on ``prop``."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and value.lower() in allowed:
        return value.lower()
    failures.append(CheckFailure(prop, f"must be one of {', '.join(allowed)}; got {value!r}"))
    return value


def seconds(value: Any, failures: list[CheckFailure]) -> Any:
    """The ``wait_timeout`` input: a positive whole number of seconds, default 600."""
    if value is None:
        return DEFAULT_WAIT_TIMEOUT
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    failures.append(CheckFailure("wait_timeout", f"must be a whole number of seconds above 0; got {value!r}"))
    return value


def flag(value: Any, prop: str, default: bool, failures: list[CheckFailure]) -> Any:
    """A boolean input such as ``fail_on_unschedulable``: ``default`` when unset."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    failures.append(CheckFailure(prop, f"must be true or false; got {value!r}"))
    return value


class ApiResourceProvider(ResourceProvider):
    """Check, diff, create, read, update and delete of one API kind through ``ironpool.client``."""

    serialize_as_secret_always = False

    info: ClassVar[ResourceInfo]
    replace_on: ClassVar[tuple[str, ...]] = ("name", "namespace")
    """Properties whose change replaces the object (the API keeps them immutable)."""
    update_on: ClassVar[tuple[str, ...]] = ()
    """Properties whose change updates the object in place."""
    secret_inputs: ClassVar[tuple[str, ...]] = ()
    """Inputs compared through ``<name>_sha256`` outputs; their plaintext never becomes an output."""
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = ()
    """API field path prefix -> property, most specific first, to name properties in check failures."""
    kept: ClassVar[tuple[str, ...]] = ()
    """Inputs the object cannot tell (how to wait, what the preview planned): never a cause for a
    diff, kept as they are by read()."""

    # -- what a kind supplies ------------------------------------------------------------------

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        """Inputs with the provider's defaults filled in and local checks done (no API)."""
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        """The API object these (normalised) inputs declare."""
        raise NotImplementedError

    def properties(self, obj: Obj, previous: Props) -> Props:
        """The user-facing input properties an API object (canonical or live) stands for;
        ``previous`` holds the inputs or outputs known before, for what the object cannot tell."""
        raise NotImplementedError

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        """The computed outputs of an object (uid, state, ...)."""
        meta = obj.get("metadata") or {}
        return {"uid": meta.get("uid"), "created_at": meta.get("creationTimestamp")}

    def check_with_server(self, client: Client, olds: Props, inputs: Props,
                          failures: list[CheckFailure]) -> Props:
        """Checks that need the apiserver (does a class exist?); returns extra inputs to record."""
        return {}

    def before_create(self, client: Client, inputs: Props) -> None:
        """Objects the main object needs before it is created (an Ignition Secret); raise
        :meth:`taken` rather than touch anything of an object that exists already."""

    def after_delete(self, client: Client, props: Props) -> None:
        """Remove what :meth:`before_create` made, once the main object is gone."""

    def before_update(self, client: Client, olds: Props, news: Props) -> None:
        """Bring what :meth:`before_create` made up to date before the main object is patched."""

    def readiness(self, inputs: Props) -> Readiness | None:
        """What create and update wait for (``wait_for``); None: nothing."""
        return None

    # -- helpers -------------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.info.kind

    def describe(self, inputs: Props) -> str:
        return f"{self.kind} {object_id(inputs.get('namespace'), str(inputs.get('name')))}"

    def property_of(self, field: str, inputs: Props) -> str:
        """The property an API field path comes from."""
        for prefix, prop in self.field_properties:
            if field == prefix or field.startswith((prefix + ".", prefix + "[")):
                return prop
        return field

    def taken(self, inputs: Props) -> ProviderError:
        return ProviderError(f"{self.describe(inputs)} already exists and is not managed by this stack: "
                             f"choose another name, or delete it first")

    def wait_ready(self, client: Client, obj: Obj, inputs: Props, deadline: float) -> Obj:
        """The object once it is ready (:meth:`readiness`); raises a WaitError."""
        readiness = self.readiness(inputs)
        if readiness is None or readiness(obj).done:
            return obj
        meta = obj.get("metadata") or {}
        found = wait_for_one(client, self.info, meta.get("namespace"), meta["name"], readiness, deadline,
                             fail_unschedulable=inputs.get("fail_on_unschedulable") is not False, known=obj)
        return found or obj

    def wait_failure(self, exc: WaitError, inputs: Props) -> str:
        """Why a wait failed, for the error message."""
        if isinstance(exc, Unschedulable):
            return (f"cannot be scheduled: {exc.reason} (no pool can take it until the fleet changes; "
                    f"fail_on_unschedulable=False would wait for that)")
        if isinstance(exc, Gone):
            return "was deleted while waiting for it"
        last = next(iter(exc.pending.values()), None)
        return (f"did not become ready within {self.wait_timeout(inputs):g}s "
                f"(wait_for={inputs.get('wait_for')}): {last.progress if last else 'no state seen'}")

    def wait_timeout(self, props: Props) -> float:
        value = props.get("wait_timeout")
        return float(value) if isinstance(value, int | float) and value > 0 else float(DEFAULT_WAIT_TIMEOUT)

    def public(self, inputs: Props) -> Props:
        """Inputs as outputs: secret inputs replaced by their digest."""
        out = {k: v for k, v in inputs.items() if k not in self.secret_inputs and k != PROVIDER_KEY}
        for key in self.secret_inputs:
            out[f"{key}_sha256"] = digest(inputs.get(key))
        return out

    def outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        return {**self.public(inputs), **self.status_outputs(client, obj, inputs)}

    def locate(self, resource_id: str) -> tuple[str | None, str]:
        namespace, name = split_id(resource_id)
        return (namespace if self.info.namespaced else None), name

    # -- the provider protocol -----------------------------------------------------------------

    def configure(self, req: ConfigureRequest) -> None:
        configure_from(req.config)

    def check(self, _olds: Props, news: Props) -> CheckResult:
        failures: list[CheckFailure] = []
        olds = plain(dict(_olds or {}))
        inputs = self.defaults(plain(dict(news)), failures)
        if self.info.namespaced and not inputs.get("namespace"):
            inputs["namespace"] = connection.config().namespace
        if is_unknown(inputs):
            return CheckResult(inputs, failures)  # validated again once every value is known
        if not inputs.get("name"):
            failures.append(CheckFailure("name", f"a {self.kind} needs a name"))
        if failures:
            return CheckResult(inputs, failures)
        try:
            canonical = validate_create(self.info, self.manifest(inputs))
        except Invalid as exc:
            for cause in exc.causes or [Cause(field="", message=str(exc))]:
                where = f"{cause.field}: " if cause.field else ""
                prop = self.property_of(cause.field, inputs)
                failures.append(CheckFailure(prop, f"{where}{cause.message}"))
        else:
            inputs.update(self.properties(canonical, inputs))
        # Asked even when the API refused the inputs, so one run reports every problem.
        inputs.update(self.check_with_server(connection.client(), olds, inputs, failures))
        return CheckResult(inputs, failures)

    def changed(self, key: str, olds: Props, news: Props) -> bool:
        new = news.get(key)
        if is_unknown(new):
            return True
        if key in self.secret_inputs:
            return olds.get(f"{key}_sha256") != digest(new)
        return none_if_empty(olds.get(key)) != none_if_empty(new)

    def diff(self, _id: str, olds: Props, news: Props) -> DiffResult:
        replaces = [k for k in self.replace_on if self.changed(k, olds, news)]
        updates = [k for k in self.update_on if self.changed(k, olds, news)]
        return DiffResult(changes=bool(replaces or updates), replaces=replaces,
                          delete_before_replace=bool(replaces))

    def create(self, props: Props) -> CreateResult:
        client = connection.client()
        inputs = plain(props)
        namespace, name = inputs.get("namespace") if self.info.namespaced else None, inputs["name"]
        deadline = time.monotonic() + self.wait_timeout(inputs)
        self.before_create(client, inputs)
        try:
            obj = client.create_raw(self.info, self.manifest(inputs), namespace,
                                    field_manager=FIELD_MANAGER)
        except AlreadyExists:
            raise self.taken(inputs) from None  # leave everything of the existing object alone
        except BaseException:
            self.after_delete(client, inputs)
            raise
        try:
            obj = self.wait_ready(client, obj, inputs, deadline)
        except WaitError as exc:
            why = self.wait_failure(exc, inputs)
            left = self.roll_back(client, namespace, name, inputs)
            raise ProviderError(f"{self.describe(inputs)} {why}. {left}") from None
        return CreateResult(object_id(namespace, name), self.outputs(client, obj, inputs))

    def roll_back(self, client: Client, namespace: str | None, name: str, inputs: Props) -> str:
        """Delete what a failed create made, so the stack and the cluster agree; says what happened."""
        with contextlib.suppress(NotFound):
            client.delete_raw(self.info, name, namespace)
        try:
            wait_for_one(client, self.info, namespace, name, gone, time.monotonic() + ROLLBACK_TIMEOUT)
        except WaitTimeout:
            return (f"It was deleted again, but is still finalizing after {ROLLBACK_TIMEOUT:g}s; "
                    f"the stack does not track it.")
        self.after_delete(client, inputs)
        return "It was deleted again, so nothing is left behind; run `pulumi up` again once it can succeed."

    def read(self, resource_id: str, props: Props) -> ReadResult:
        client = connection.client()
        namespace, name = self.locate(resource_id)
        try:
            obj = client.get_raw(self.info, name, namespace)
        except NotFound:
            return ReadResult(None, {})
        previous = plain(props)
        live = self.properties(obj, previous)
        inputs = {**{k: previous[k] for k in self.kept if k in previous}, **live}
        kept_outputs = {k: v for k, v in previous.items() if k != PROVIDER_KEY}
        outs = {**kept_outputs, **live, **self.status_outputs(client, obj, previous)}
        return ReadResult(resource_id, outs, inputs)

    def update_patch(self, olds: Props, news: Props) -> Obj | None:
        """The merge patch from the object ``olds`` describe to the one ``news`` describe (None when
        they declare the same)."""
        old, new = self.manifest(olds), self.manifest(news)
        if desired_patch(old) == desired_patch(new):
            return None
        return desired_patch(new, previous=old)

    def update(self, resource_id: str, _olds: Props, _news: Props) -> UpdateResult:
        client = connection.client()
        olds, news = plain(_olds), plain(_news)
        namespace, name = self.locate(resource_id)
        self.before_update(client, olds, news)
        patch = self.update_patch(olds, news)
        try:
            if patch:
                obj = client.patch_raw(self.info, name, patch, namespace, field_manager=FIELD_MANAGER)
            else:
                obj = client.get_raw(self.info, name, namespace)
        except NotFound:
            raise ProviderError(f"{self.describe(news)} is gone: run `pulumi refresh`, then `pulumi up` "
                                f"to create it again") from None
        except Invalid as exc:
            raise ProviderError(f"{self.describe(news)} cannot be updated: {exc}") from None
        try:
            obj = self.wait_ready(client, obj, news, time.monotonic() + self.wait_timeout(news))
        except WaitError as exc:
            raise ProviderError(f"{self.describe(news)} was updated but {self.wait_failure(exc, news)}") \
                from None
        return UpdateResult(self.outputs(client, obj, news))

    def delete(self, resource_id: str, _props: Props) -> None:
        client = connection.client()
        props = plain(_props)
        namespace, name = self.locate(resource_id)
        with contextlib.suppress(NotFound):
            client.delete_raw(self.info, name, namespace)
        try:
            deadline = time.monotonic() + self.wait_timeout(props)
            wait_for_one(client, self.info, namespace, name, gone, deadline)
        except WaitTimeout as exc:
            finalizers = ((exc.last.get(name) or {}).get("metadata") or {}).get("finalizers") or []
            raise ProviderError(f"{self.kind} {resource_id} is still there "
                                f"{self.wait_timeout(props):g}s after "
                                f"its deletion (finalizers: {', '.join(finalizers) or 'none'}); "
                                f"run `pulumi destroy` again to keep waiting") from None
        self.after_delete(client, props)

