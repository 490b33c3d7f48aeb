"""ironpool.runtime: the libvirt machine and volume runtimes (IRI servers) and what they share."""
