"""The libvirt machine runtime: IronCore's ``MachineRuntime`` (IRI) served on libvirt-python.

Modules: ``core`` (the semantics, on one libvirt connection), ``server`` (grpc.aio servicer),
``console_server`` (the websocket behind ``Exec``), ``domain_xml`` / ``model`` (domain XML and the
record kept in ``<metadata>``), ``classes``, ``disks``, ``events``, ``validation``, ``app`` (wiring).

Run it with ``ironpool libvirt-runtime --classes FILE --images DIR``; the tiny test image is made
by ``scripts/build-tiny-image.sh DIR``. Per machine the runtime keeps, under ``--state-dir``,
``machines/<id>/{console.log, ignition.ign, disks/}``.
"""
