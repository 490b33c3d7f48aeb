"""The libvirt volume runtime: IRI ``VolumeRuntime`` served on a libvirt ``dir`` storage pool.

Modules (errors come from :mod:`ironpool.runtime.errors`): :mod:`.classes` (VolumeClass manifests),
:mod:`.validation` (request checks), :mod:`.sidecar` (per-volume metadata files),
:mod:`.images` (image catalog), :mod:`.pool` (libvirt storage-pool operations),
:mod:`.core` (the runtime's logic, synchronous), :mod:`.server` (the gRPC servicer and server).
"""
