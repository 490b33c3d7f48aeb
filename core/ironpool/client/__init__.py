"""ironpool.client."""
