"""Label, annotation and finalizer keys the poollets share with IronCore (its poollets' own keys).

Keeping IronCore's exact keys lets an IronCore runtime (libvirt-provider, a broker) be driven by an
ironpool poollet and vice versa, and lets an IRI machine be found again by its API object's UID.
"""

from __future__ import annotations

from ironpool.api import machine_access, storage
from ironpool.iri import labels

# --- machinepoollet -------------------------------------------------------------------------
MACHINE_UID_LABEL = labels.MACHINE_UID_LABEL
MACHINE_NAMESPACE_LABEL = labels.MACHINE_NAMESPACE_LABEL
MACHINE_NAME_LABEL = labels.MACHINE_NAME_LABEL
MACHINE_GENERATION_ANNOTATION = "machinepoollet.ironcore.dev/machine-generation"
IRI_MACHINE_GENERATION_ANNOTATION = "machinepoollet.ironcore.dev/irimachine-generation"
MACHINE_FINALIZER = "machinepoollet.ironcore.dev/machine"
MACHINE_FIELD_OWNER = "machinepoollet.ironcore.dev/field-owner"
# ironpool addition: the pool whose poollet created the IRI machine. Garbage collection and
# deletion of gone objects only touch machines carrying this poollet's pool, so poollets sharing
# one libvirtd (a test beside the demo) never delete each other's domains.
MACHINE_POOL_LABEL = "machinepoollet.ironpool.dev/pool"
# ironpool addition: the uid of the installation (its kube-system namespace) whose poollet created
# the IRI machine. Pool names repeat across installations (both default to the hostname); this does not.
MACHINE_CLUSTER_LABEL = "machinepoollet.ironpool.dev/cluster-uid"

# IronCore's IEP-11 draft: the IRI reservation's labels naming its Reservation.
RESERVATION_UID_LABEL = "machinepoollet.ironcore.dev/reservation-uid"
RESERVATION_NAMESPACE_LABEL = "machinepoollet.ironcore.dev/reservation-namespace"
RESERVATION_NAME_LABEL = "machinepoollet.ironcore.dev/reservation-name"

# IronCore's IRI NIC labels (passed as JSON in the attributes below) and machine annotation.
NIC_UID_LABEL = "machinepoollet.ironcore.dev/nic-uid"
NIC_NAMESPACE_LABEL = "machinepoollet.ironcore.dev/nic-namespace"
NIC_NAME_LABEL = "machinepoollet.ironcore.dev/nic-name"
NETWORK_UID_LABEL = "machinepoollet.ironcore.dev/network-uid"
NETWORK_NAMESPACE_LABEL = "machinepoollet.ironcore.dev/network-namespace"
NETWORK_NAME_LABEL = "machinepoollet.ironcore.dev/network-name"
NETWORK_INTERFACE_MAPPING_ANNOTATION = "machinepoollet.ironcore.dev/networkinterfacemapping"
# IRI NIC attributes: IronCore's raw label JSON, and ironpool's MAC and addresses with their lengths
# (a JSON list like ["10.0.0.2/24"]) that a host needs to serve the NIC its address.
NIC_LABELS_ATTRIBUTE = "rawNICLabels"
NETWORK_LABELS_ATTRIBUTE = "rawNetworkLabels"
MAC_ADDRESS_ATTRIBUTE = "macAddress"
ADDRESSES_ATTRIBUTE = "addresses"
# ironpool addition: where the guest's SSH is reachable (host:port), for the front ends.
SSH_ENDPOINT_ANNOTATION = machine_access.SSH_ENDPOINT_ANNOTATION

# --- volumepoollet --------------------------------------------------------------------------
VOLUME_UID_LABEL = "volumepoollet.ironcore.dev/volume-uid"
VOLUME_NAMESPACE_LABEL = "volumepoollet.ironcore.dev/volume-namespace"
VOLUME_NAME_LABEL = "volumepoollet.ironcore.dev/volume-name"
VOLUME_FINALIZER = "volumepoollet.ironcore.dev/volume"
VOLUME_POOL_LABEL = storage.VOLUME_POOL_LABEL  # also on a VolumeSnapshot: the pool that holds it
VOLUME_CLUSTER_LABEL = "volumepoollet.ironpool.dev/cluster-uid"
VOLUME_SNAPSHOT_UID_LABEL = "volumepoollet.ironcore.dev/volume-snapshot-uid"
VOLUME_SNAPSHOT_NAMESPACE_LABEL = "volumepoollet.ironcore.dev/volume-snapshot-namespace"
VOLUME_SNAPSHOT_NAME_LABEL = "volumepoollet.ironcore.dev/volume-snapshot-name"
VOLUME_SNAPSHOT_FINALIZER = "volumepoollet.ironcore.dev/volume-snapshot"

# --- common ---------------------------------------------------------------------------------
TOPOLOGY_REGION_LABEL = "topology.ironcore.dev/region"
TOPOLOGY_ZONE_LABEL = "topology.ironcore.dev/zone"
RECONCILE_REQUESTED_AT_ANNOTATION = "reconcile.common.ironcore.dev/requested-at"
DEFAULT_IGNITION_KEY = "ignition.yaml"


CLASS_PREFIX = "class/"


def machine_class_key(name: str) -> str:
    """``class/machine.<name>``: the class-count resource name IronCore pools publish."""
    return f"{CLASS_PREFIX}machine.{name}"


def volume_class_key(name: str) -> str:
    """``class/volume.<name>``: bytes of storage a volume pool offers for that class."""
    return f"{CLASS_PREFIX}volume.{name}"
