"""ironpool.iri."""
