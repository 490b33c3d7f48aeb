"""The libvirt machine runtime: IronCore's ``MachineRuntime`` (IRI) served on libvirt-python.

Split as Nova splits its libvirt driver: ``host`` (the connection, reconnect, lifecycle events,
host capacity), ``guest`` (operations on one domain, live/persistent flags in one place),
``records`` (pure IRI request <-> record conversion and every check), ``driver`` (the machine
semantics over those, with ``index`` of managed machines), ``server`` (the thin gRPC servicer),
``console_server`` (the websocket behind ``Exec``), ``domain_xml`` / ``model`` (domain XML and the
record kept in ``<metadata>``), ``classes``, ``disks``, ``app`` (wiring).

Run it with ``ironpool libvirt-runtime --classes FILE --images DIR``; the tiny test image is made
by ``scripts/build-tiny-image.sh DIR``. Per machine the runtime keeps, under ``--state-dir``,
``machines/<id>/{console.log, ignition.ign, disks/}``.
"""
