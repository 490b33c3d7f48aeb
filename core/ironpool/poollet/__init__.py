"""ironpool.poollet."""
