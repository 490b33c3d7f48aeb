"""ironpool.apiserver."""
