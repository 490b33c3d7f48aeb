"""ironpool.cli."""
