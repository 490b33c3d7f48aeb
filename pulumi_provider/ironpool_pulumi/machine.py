"""``Machine``: a virtual machine placed by the scheduler on a pool and run as a libvirt domain.

Replaced when ``name``, ``namespace``, ``machine_class``, ``image``, ``image_size``, the ``pool``
pin or the ``reservation`` change (the API keeps them immutable; the old Machine is deleted first so
the name stays unique). Updated in place: ``power``, ``labels``, ``annotations``, ``volumes`` (attach
and detach), ``network_interfaces``, ``tolerations``, ``pool_selector`` and the Ignition (the Secret
changes; the guest reads Ignition on its first boot, so a running Machine keeps what it booted with).
"""

from __future__ import annotations

import base64
import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api.compute import DEFAULT_IGNITION_KEY
from ironpool.api.errors import AlreadyExists, NotFound
from ironpool.api.machine_access import ssh_endpoint
from ironpool.api.reservation import RESERVATION_LABEL
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.readiness import Readiness, machine_running, scheduled, state_of
from pulumi.dynamic import CheckFailure, DiffResult, Resource, UpdateResult

from ironpool_pulumi import declared
from ironpool_pulumi.base import ApiResourceProvider, Obj, Props, choice, flag, seconds
from ironpool_pulumi.classes import MachineClass
from ironpool_pulumi.connection import connection
from ironpool_pulumi.errors import ProviderError
from ironpool_pulumi.placement import predict
from ironpool_pulumi.reservation import Reservation
from ironpool_pulumi.reserve import stack_reservation
from ironpool_pulumi.secret import Secret, decoded
from ironpool_pulumi.values import digest, none_if_empty, without_system_keys
from ironpool_pulumi.volume import Volume

MACHINES, MACHINE_CLASSES, SECRETS = resolve("machines"), resolve("machineclasses"), resolve("secrets")
ROOT_VOLUME = "root"
IGNITION_OWNER_LABEL = "pulumi.ironpool.dev/ignition-of"
WAIT_FOR = ("none", "scheduled", "running")


def ip_addresses(obj: Obj) -> list[str]:
    """The addresses in a Machine's ``status.networkInterfaces[].ips`` (strings or ``{value: ...}``)."""
    out: list[str] = []
    for nic in (obj.get("status") or {}).get("networkInterfaces") or []:
        for ip in nic.get("ips") or []:
            value = ip.get("value") if isinstance(ip, dict) else ip
            if value:
                out.append(str(value))
    return out


def ignition_secret_name(machine: str) -> str:
    """The Secret holding a Machine's ``ignition`` input."""
    return f"{machine}-ignition"


@dataclass
class AttachedVolume:
    """A Volume attached to a Machine under a name of its own or at a fixed device."""

    volume: pulumi.Input[str] | Volume
    """The Volume resource or the name of a Volume in the Machine's namespace."""
    name: str | None = None
    """The name of the disk in the Machine (default: the Volume's name)."""
    device: str | None = None
    """The device name (``oda``, ``odb``, ...; default: the next free one)."""


@dataclass
class MachineArgs:
    """The inputs of a :class:`Machine`."""

    machine_class: pulumi.Input[str] | MachineClass
    """The MachineClass (resource or name): cpu and memory. Changing it replaces the Machine."""
    name: pulumi.Input[str] | None = None
    """The Machine's name (default: the Pulumi resource name). Changing it replaces the Machine."""
    namespace: pulumi.Input[str] | None = None
    """The namespace (default: ``ironpool:namespace``, else the client config's, else ``default``)."""
    pool_selector: pulumi.Input[dict[str, str]] | None = None
    """Labels a MachinePool must carry to take the Machine."""
    pool: pulumi.Input[str] | None = None
    """Pin the Machine to this MachinePool. A change replaces it (unless it already runs there)."""
    power: pulumi.Input[str] = "On"
    """``On`` or ``Off``; updated in place (the domain is started or shut down)."""
    image: pulumi.Input[str] | None = None
    """An image of the pool's image catalog to boot from (a ``root`` local disk); replaces when changed."""
    image_size: pulumi.Input[str] | None = None
    """Size of the root disk as a quantity (``2Gi``; default: the image's size); replaces when changed."""
    volumes: list[Any] | None = None
    """Volumes to attach: :class:`Volume` resources, Volume names or :class:`AttachedVolume`s; updated in
    place."""
    network_interfaces: pulumi.Input[list[dict[str, Any]]] | None = None
    """The API's ``spec.networkInterfaces`` list, passed through unchanged; updated in place."""
    ignition: pulumi.Input[str] | None = None
    """Ignition config (kept secret); stored in the Secret ``<name>-ignition``. Read on first boot."""
    ignition_secret: pulumi.Input[str] | Secret | None = None
    """An existing Secret (resource or name) holding the Ignition instead of ``ignition``."""
    ignition_key: pulumi.Input[str] | None = None
    """The key of ``ignition_secret`` holding the Ignition (default ``ignition.yaml``)."""
    labels: pulumi.Input[dict[str, str]] | None = None
    """Labels of the Machine; updated in place."""
    annotations: pulumi.Input[dict[str, str]] | None = None
    """Annotations of the Machine; updated in place."""
    tolerations: pulumi.Input[list[dict[str, Any]]] | None = None
    """Taints of pools the Machine tolerates (the API's ``spec.tolerations`` shape); updated in place."""
    reservation: pulumi.Input[str] | Reservation | None = None
    """Place the Machine within this Reservation (resource or name, same namespace): only on a pool
    that holds room for it, created once the Reservation is held. Changing it replaces the Machine.
    With the stack config ``ironpool:reserve: true`` the provider makes one for the stack's Machines."""
    wait_for: pulumi.Input[str] = "running"
    """``none``, ``scheduled`` (bound to a pool) or ``running`` (its poollet acted on its current
    spec, it reached its power state, Running or Shutdown when ``power`` is Off, and its volumes and
    network interfaces are attached: what ``ironpool wait --for=running`` and the Ansible collection
    wait for). Never causes a diff."""
    wait_timeout: pulumi.Input[int] = 600
    """Seconds to wait for ``wait_for`` on create, update and delete; on a timed-out create the Machine
    is deleted again and the error gives where it was last (the scheduler's reason while it is not
    placed). Never causes a diff."""
    fail_on_unschedulable: pulumi.Input[bool] = True
    """End the wait within seconds when the scheduler says no pool can take the Machine until the
    fleet changes (no pool offers its class or matches ``pool_selector``), naming the scheduler's
    reason, instead of waiting out ``wait_timeout``. Never causes a diff."""


class MachineProvider(ApiResourceProvider):
    """The dynamic provider behind :class:`Machine`."""

    info = MACHINES
    replace_on = ("name", "namespace", "machine_class", "image", "image_size", "reservation")
    update_on = ("power", "labels", "annotations", "volumes", "network_interfaces", "tolerations",
                 "pool_selector", "ignition", "ignition_secret", "ignition_key")
    secret_inputs = ("ignition",)
    kept = ("wait_for", "wait_timeout", "fail_on_unschedulable", "planned_pool", "placement")
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("metadata.namespace", "namespace"), ("metadata.labels", "labels"),
        ("metadata.annotations", "annotations"), ("spec.machineClassRef", "machine_class"),
        ("spec.machinePoolSelector", "pool_selector"), ("spec.machinePoolRef", "pool"),
        ("spec.power", "power"),
        ("spec.networkInterfaces", "network_interfaces"), ("spec.ignitionRef.key", "ignition_key"),
        ("spec.ignitionRef", "ignition_secret"), ("spec.tolerations", "tolerations"),
        ("spec.volumes", "volumes"),
    )

    # -- inputs and manifests ------------------------------------------------------------------

    def property_of(self, field: str, inputs: Props) -> str:
        if field.startswith("spec.ignitionRef.name") and inputs.get("ignition") is not None:
            return "name"  # the Ignition Secret is named after the Machine
        return super().property_of(field, inputs)

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        power = inputs.get("power") or "On"
        if isinstance(power, str) and power.lower() in ("on", "off"):
            power = power.capitalize()
        inputs["power"] = power
        inputs["wait_for"] = choice(inputs.get("wait_for"), WAIT_FOR, "running", "wait_for", failures)
        inputs["wait_timeout"] = seconds(inputs.get("wait_timeout"), failures)
        inputs["fail_on_unschedulable"] = flag(inputs.get("fail_on_unschedulable"), "fail_on_unschedulable",
                                               True, failures)
        if inputs.get("image_size") and not inputs.get("image"):
            failures.append(CheckFailure("image_size", "image_size needs an image to size"))
        if inputs.get("ignition") is not None and inputs.get("ignition_secret"):
            failures.append(CheckFailure("ignition_secret",
                                         "give either ignition or ignition_secret, not both"))
        if inputs.get("ignition_key") and not inputs.get("ignition_secret"):
            failures.append(CheckFailure("ignition_key", "ignition_key names a key of ignition_secret; "
                                                         "set ignition_secret too"))
        volumes = inputs.get("volumes") or []
        if not isinstance(volumes, list):
            failures.append(CheckFailure("volumes", "must be a list of Volumes or Volume names"))
        else:
            for i, v in enumerate(volumes):
                if not isinstance(v, dict) or not v.get("volume"):
                    failures.append(CheckFailure("volumes", f"volumes[{i}]: needs the Volume to attach"))
                elif any(not isinstance(v.get(k), str | None) for k in ("name", "volume", "device")):
                    failures.append(CheckFailure("volumes",
                                                 f"volumes[{i}]: name, volume and device are strings"))
                elif not v.get("name"):
                    v["name"] = v["volume"]
            names = [v.get("name") for v in volumes if isinstance(v, dict)]
            if inputs.get("image") and ROOT_VOLUME in names:
                failures.append(CheckFailure("volumes", f"the disk name {ROOT_VOLUME!r} is the image's disk; "
                                                        f"attach the Volume under another name"))
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        name = inputs["name"]
        labels = dict(inputs.get("labels") or {})
        if inputs.get("reservation"):
            labels[RESERVATION_LABEL] = inputs["reservation"]
        meta = {"name": name, "namespace": inputs.get("namespace"), "labels": none_if_empty(labels),
                "annotations": none_if_empty(inputs.get("annotations"))}
        spec: Obj = {"machineClassRef": {"name": inputs.get("machine_class")}, "power": inputs.get("power")}
        if inputs.get("pool_selector"):
            spec["machinePoolSelector"] = inputs["pool_selector"]
        if inputs.get("pool"):
            spec["machinePoolRef"] = {"name": inputs["pool"]}
        volumes: list[Obj] = []
        if inputs.get("image"):
            disk: Obj = {"image": inputs["image"]}
            if inputs.get("image_size"):
                disk["sizeLimit"] = inputs["image_size"]
            volumes.append({"name": ROOT_VOLUME, "localDisk": disk})
        for v in inputs.get("volumes") or []:
            entry: Obj = {"name": v.get("name") or v.get("volume"), "volumeRef": {"name": v.get("volume")}}
            if v.get("device"):
                entry["device"] = v["device"]
            volumes.append(entry)
        if volumes:
            spec["volumes"] = volumes
        if inputs.get("network_interfaces"):
            spec["networkInterfaces"] = inputs["network_interfaces"]
        if inputs.get("tolerations"):
            spec["tolerations"] = inputs["tolerations"]
        if _manages_ignition(inputs):
            spec["ignitionRef"] = {"name": ignition_secret_name(name), "key": DEFAULT_IGNITION_KEY}
        elif inputs.get("ignition_secret"):
            spec["ignitionRef"] = {"name": inputs["ignition_secret"], "key": inputs.get("ignition_key")}
        return {"apiVersion": self.info.api_version, "kind": self.kind,
                "metadata": {k: v for k, v in meta.items() if v is not None}, "spec": spec}

    def properties(self, obj: Obj, previous: Props) -> Props:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        image = image_size = None
        volumes: list[Obj] = []
        for v in spec.get("volumes") or []:
            local = v.get("localDisk") or {}
            if v.get("name") == ROOT_VOLUME and local.get("image"):
                image, image_size = local["image"], local.get("sizeLimit")
            elif v.get("volumeRef"):
                volumes.append({"name": v["name"], "volume": v["volumeRef"]["name"],
                                "device": v.get("device")})
        ref = spec.get("ignitionRef") or {}
        own = ignition_secret_name(meta.get("name", ""))
        managed = _manages_ignition(previous) and ref.get("name") == own
        return {
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": without_system_keys(meta.get("labels"), previous.get("labels")),
            "annotations": without_system_keys(meta.get("annotations"), previous.get("annotations")),
            "reservation": (meta.get("labels") or {}).get(RESERVATION_LABEL),
            "machine_class": (spec.get("machineClassRef") or {}).get("name"),
            "power": spec.get("power"),
            "pool_selector": none_if_empty(spec.get("machinePoolSelector")),
            # The scheduler writes the same field a pin does, so the pin is what the user asked for.
            "pool": previous.get("pool"),
            "image": image, "image_size": image_size,
            "volumes": none_if_empty(volumes),
            "network_interfaces": none_if_empty(spec.get("networkInterfaces")),
            "tolerations": none_if_empty(spec.get("tolerations")),
            "ignition_secret": None if managed or not ref else ref.get("name"),
            "ignition_key": None if managed or not ref else ref.get("key"),
        }

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        out = {
            **super().status_outputs(client, obj, inputs),
            "state": state_of(obj),
            "machine_pool": (spec.get("machinePoolRef") or {}).get("name"),
            "machine_id": status.get("machineID"),
            "conditions": [{k: c.get(k) for k in ("type", "status", "reason", "message")}
                           for c in status.get("conditions") or []],
            "volume_states": {v.get("name"): v.get("state") for v in status.get("volumes") or []},
            "ip_addresses": ip_addresses(obj),
            "network_interface_states": {n.get("name"): n.get("state")
                                         for n in status.get("networkInterfaces") or []},
        }
        endpoint = ssh_endpoint(obj)
        out["ssh_host"] = endpoint.host if endpoint else None
        out["ssh_port"] = endpoint.port if endpoint else None
        if _manages_ignition(inputs):
            out["ignition_sha256"] = self._live_ignition_digest(client, obj)
        return out

    def _live_ignition_digest(self, client: Client, obj: Obj) -> str | None:
        meta = obj.get("metadata") or {}
        try:
            secret = client.get_raw(SECRETS, ignition_secret_name(meta.get("name", "")),
                                    meta.get("namespace"))
        except NotFound:
            return None
        return digest(decoded(secret).get(DEFAULT_IGNITION_KEY))

    # -- checks that ask the apiserver -----------------------------------------------------------

    def check_with_server(self, client: Client, olds: Props, inputs: Props,
                          failures: list[CheckFailure]) -> Props:
        class_name = inputs.get("machine_class")
        if not isinstance(class_name, str) or not class_name:
            return {}  # the API's validation has said so
        try:
            client.get_raw(MACHINE_CLASSES, class_name)
        except NotFound:
            if declared.declared("MachineClass", class_name) is None:
                known = sorted(c["metadata"]["name"] for c in client.list_raw(MACHINE_CLASSES).items)
                failures.append(CheckFailure("machine_class", f"MachineClass {class_name!r} does not exist "
                                                              f"(known: {', '.join(known) or 'none'})"))
        if olds or failures:
            # An existing Machine is bound already (`machine_pool` says where); keep what was planned.
            return {k: olds[k] for k in ("planned_pool", "placement") if k in olds}
        if inputs.get("pool"):
            return {"planned_pool": inputs["pool"], "placement": "pinned by the pool input"}
        result = predict(client, self.manifest(inputs), str(inputs.get("namespace")))
        # "" rather than None: the plugin drops None values, and a preview would show "unknown".
        return {"planned_pool": result.pool or "", "placement": result.reason}

    # -- the Ignition Secret ----------------------------------------------------------------------

    def _put_ignition(self, client: Client, inputs: Props) -> None:
        name, namespace = ignition_secret_name(inputs["name"]), inputs.get("namespace")
        body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {IGNITION_OWNER_LABEL: inputs["name"]}},
                "stringData": {DEFAULT_IGNITION_KEY: inputs["ignition"]}}
        try:
            client.create_raw(SECRETS, body, namespace)
            return
        except AlreadyExists:
            existing = client.get_raw(SECRETS, name, namespace)
        if ((existing.get("metadata") or {}).get("labels") or {}).get(IGNITION_OWNER_LABEL) != inputs["name"]:
            raise ProviderError(f"Secret {namespace}/{name} exists and does not hold this Machine's "
                                f"Ignition; reference it with ignition_secret, or delete it")
        encoded = base64.b64encode(inputs["ignition"].encode()).decode()
        client.patch_raw(SECRETS, name, {"data": {DEFAULT_IGNITION_KEY: encoded}}, namespace)

    def _drop_ignition(self, client: Client, props: Props) -> None:
        with contextlib.suppress(NotFound):
            client.delete_raw(SECRETS, ignition_secret_name(props["name"]), props.get("namespace"))

    def before_create(self, client: Client, inputs: Props) -> None:
        if inputs.get("ignition") is None:
            return
        # The Secret is named after the Machine: an existing Machine of that name keeps its own.
        with contextlib.suppress(NotFound):
            client.get_raw(self.info, inputs["name"], inputs.get("namespace"))
            raise self.taken(inputs)
        self._put_ignition(client, inputs)

    def after_delete(self, client: Client, props: Props) -> None:
        if _manages_ignition(props):
            self._drop_ignition(client, props)

    def before_update(self, client: Client, olds: Props, news: Props) -> None:
        if news.get("ignition") is not None and digest(news["ignition"]) != olds.get("ignition_sha256"):
            self._put_ignition(client, news)

    def diff(self, _id: str, olds: Props, news: Props) -> DiffResult:
        result = super().diff(_id, olds, news)
        replaces, changes = list(result.replaces or []), bool(result.changes)
        if self.changed("pool", olds, news):
            # A pin to the pool the Machine already runs in (or dropping the pin) changes nothing.
            pool = news.get("pool")
            if pool and pool != olds.get("machine_pool"):
                replaces.append("pool")
            changes = True
        return DiffResult(changes=changes, replaces=replaces, delete_before_replace=bool(replaces))

    def update_patch(self, olds: Props, news: Props) -> Obj | None:
        # The scheduler owns machinePoolRef once it bound the Machine; a pin never changes in place.
        return super().update_patch({**olds, "pool": None}, {**news, "pool": None})

    def update(self, resource_id: str, _olds: Props, _news: Props) -> UpdateResult:
        result = super().update(resource_id, _olds, _news)
        if _news.get("ignition") is None and _olds.get("ignition_sha256") is not None:
            self._drop_ignition(connection.client(), _olds)
        return result

    # -- waiting -----------------------------------------------------------------------------------

    def readiness(self, inputs: Props) -> Readiness | None:
        return {"scheduled": scheduled, "running": machine_running}.get(str(inputs.get("wait_for")))


def _manages_ignition(props: Props) -> bool:
    """Whether inputs (``ignition``) or outputs (``ignition_sha256``) use the Machine's Ignition Secret."""
    return props.get("ignition") is not None or props.get("ignition_sha256") is not None


MACHINE_OUTPUTS = ("uid", "created_at", "state", "machine_pool", "machine_id", "conditions", "volume_states",
                   "ip_addresses", "network_interface_states", "ssh_host", "ssh_port", "planned_pool",
                   "placement", "ignition_sha256")


class Machine(Resource, module="ironpool", name="Machine"):
    """A Machine declared with Pulumi: scheduled onto a MachinePool and run as a libvirt domain.

    ``pulumi preview`` shows in ``planned_pool``/``placement`` where the scheduler would put a new
    Machine, or why it fits nowhere; ``pulumi up`` waits for ``wait_for``.
    """

    name: pulumi.Output[str]
    """The Machine's name."""
    namespace: pulumi.Output[str]
    """The Machine's namespace."""
    machine_class: pulumi.Output[str]
    """The MachineClass."""
    power: pulumi.Output[str]
    """The desired power state, ``On`` or ``Off`` (after a refresh: the live one)."""
    labels: pulumi.Output[dict[str, str] | None]
    """The Machine's labels (without the ones ironpool manages)."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the Machine was created (RFC 3339)."""
    state: pulumi.Output[str]
    """``Pending``, ``Running``, ``Shutdown``, ``Terminating`` or ``Terminated``, as of the current
    spec: ``Pending`` until the poollet reported on it, and after an update it has not acted on yet
    (``wait_for="none"``); ``pulumi refresh`` reads it anew."""
    machine_pool: pulumi.Output[str | None]
    """The MachinePool the scheduler bound the Machine to."""
    machine_id: pulumi.Output[str | None]
    """The runtime's id of the machine (``ironpool-libvirt-runtime://<id>``)."""
    conditions: pulumi.Output[list[dict[str, Any]]]
    """The status conditions (type, status, reason, message)."""
    volume_states: pulumi.Output[dict[str, str]]
    """Attachment state per disk name (``Attached``, ``Pending``)."""
    ip_addresses: pulumi.Output[list[str]]
    """Addresses of the Machine's network interfaces, once networking reports them."""
    network_interface_states: pulumi.Output[dict[str, str]]
    """Attachment state per network interface name (``Attached``, ``Pending``)."""
    ssh_host: pulumi.Output[str | None]
    """Where the guest answers SSH: the host of the forward its pool reports (``127.0.0.1`` with
    QEMU user networking), else its first address."""
    ssh_port: pulumi.Output[int | None]
    """The port of ``ssh_host``: the forwarded port, else 22."""
    planned_pool: pulumi.Output[str | None]
    """Preview: the pool the scheduler would place this new Machine on (empty: nowhere)."""
    placement: pulumi.Output[str | None]
    """Preview: why (``fits``, or the scheduler's reason such as ``0/3 pools: insufficient cpu``)."""
    ignition_sha256: pulumi.Output[str | None]
    """SHA-256 of the Ignition, to see changes without revealing it."""

    def __init__(self, resource_name: str, args: MachineArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a Machine named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else MachineArgs(**kwargs)
        machine_class = a.machine_class.name if isinstance(a.machine_class, MachineClass) else a.machine_class
        secret = a.ignition_secret
        ignition_secret = secret.name if isinstance(secret, Secret) else secret
        reservation = a.reservation.name if isinstance(a.reservation, Reservation) else a.reservation
        if reservation is None and a.pool is None:
            reservation = stack_reservation(a.namespace, a.pool_selector, machine_class)
        props: dict[str, Any] = {k: None for k in MACHINE_OUTPUTS}
        props.update({
            "name": a.name or resource_name, "namespace": a.namespace,
            "machine_class": machine_class,
            "pool_selector": a.pool_selector, "pool": a.pool, "power": a.power, "image": a.image,
            "image_size": a.image_size, "volumes": [_attachment(v) for v in a.volumes or []] or None,
            "network_interfaces": a.network_interfaces,
            "ignition": None if a.ignition is None else pulumi.Output.secret(a.ignition),
            "ignition_secret": ignition_secret,
            "ignition_key": a.ignition_key, "labels": a.labels, "annotations": a.annotations,
            "tolerations": a.tolerations, "reservation": reservation,
            "wait_for": a.wait_for, "wait_timeout": a.wait_timeout,
            "fail_on_unschedulable": a.fail_on_unschedulable,
        })
        super().__init__(MachineProvider(), resource_name, props, opts)

    @staticmethod
    def get(resource_name: str, id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> Machine:
        """The existing Machine ``id`` (``namespace/name``), read into this program, not managed by it."""
        read = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        return Machine(resource_name, MachineArgs(machine_class=""), read)


def _attachment(item: Any) -> dict[str, Any]:
    attached = item if isinstance(item, AttachedVolume) else AttachedVolume(item)
    ref = attached.volume.name if isinstance(attached.volume, Volume) else attached.volume
    return {"name": attached.name, "volume": ref, "device": attached.device}
