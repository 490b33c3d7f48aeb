"""ironpool.runtime."""
