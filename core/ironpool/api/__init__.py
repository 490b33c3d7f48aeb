"""ironpool.api."""
