"""ironpool.iri: the IRI wire layer — generated stubs (``gen``), transports (unix, tcp, ssh),
endpoint discovery and thin typed clients. See README.md in this folder."""
