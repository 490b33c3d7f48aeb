"""The libvirt volume runtime: IRI ``VolumeRuntime`` served on a libvirt ``dir`` storage pool.

Split as the machine runtime is (errors come from :mod:`ironpool.runtime.errors`): :mod:`.host`
(the libvirt connection and the domains that use volumes), :mod:`.pool` (the storage pool and its
volumes), :mod:`.records` (records, request checks, IRI messages; pure), :mod:`.sidecar`
(per-volume metadata files), :mod:`.owner` (which installation a pool belongs to), :mod:`.classes`
(VolumeClass manifests), :mod:`.images` (image catalog), :mod:`.driver` (the runtime's logic,
synchronous), :mod:`.server` (the thin gRPC servicer and server).
"""
