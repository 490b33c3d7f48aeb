"""ironpool.scheduler."""
