"""The IRI machine labels that tie a runtime's machine to its API Machine (IronCore's poollet keys),
and the annotation that carries its EFI variables.

The machinepoollet sets them on every machine it creates; a runtime reads them where the guest must
know who it is (the cloud-init instance id is the Machine's uid, its default hostname the Machine's
name).
"""

from __future__ import annotations

MACHINE_UID_LABEL = "machinepoollet.ironcore.dev/machine-uid"
MACHINE_NAMESPACE_LABEL = "machinepoollet.ironcore.dev/machine-namespace"
MACHINE_NAME_LABEL = "machinepoollet.ironcore.dev/machine-name"

# A Machine's spec.efiVars as JSON ([{"name", "uuid", "value": base64}]): IRI's MachineSpec has no
# field for them, so the machinepoollet hands them over as an annotation that a runtime without UEFI
# ignores, keeping the wire IronCore's.
EFI_VARS_ANNOTATION = "machinepoollet.ironpool.dev/efi-vars"

# ironpool addition: set by a machinepoollet that fences itself (it lost its control plane) on the IRI
# machines it powers off; a runtime applies that power off at once (libvirt: virDomainDestroy), as a
# fence must, instead of an ACPI shutdown with a grace period. Removed before power comes back.
FENCED_ANNOTATION = "machinepoollet.ironpool.dev/fenced"
