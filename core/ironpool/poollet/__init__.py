"""Poollets: announce a host as a MachinePool / VolumePool and make the objects bound to it real via IRI.

Entry points (used by ``ironpool machinepoollet`` / ``volumepoollet`` and by ``ironpool up``)::

    from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet
    from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet
    from ironpool.iri.client import AsyncMachineRuntimeClient, AsyncVolumeRuntimeClient   # async IRI clients

    await run_machinepoollet(client, AsyncMachineRuntimeClient.connect("unix:///run/m.sock"),
                             MachinePoolletOptions(pool="host-1", provider_id="libvirt://host-1"), stop)

Modules: ``base`` (what both poollets run: announce, own, relist, resync, heartbeat),
``reconciler`` and ``finalizers`` (what both object reconcilers share), ``pool`` (a pool's
identity and status report), ``waiting`` (typed reasons an object waits), ``keys`` (IronCore
label/annotation/finalizer keys), ``classes`` (class mapper), ``capacity`` (pool figures),
``machine_iri`` (API <-> IRI translation), ``machine_controller`` / ``volume_controller`` (object
reconcilers), ``machinepool`` / ``volumepool`` (pool status), ``heartbeat`` (the pool's Lease),
``relist`` (runtime relisting = IRI events), ``collector`` and ``ownership`` (orphan collection).
The control-plane side of pool health is :mod:`ironpool.fleet`.
"""
