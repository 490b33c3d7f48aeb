"""ironpool.store."""
