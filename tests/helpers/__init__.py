"""Helpers shared by the test packages (and the benchmarks that reuse the e2e harness)."""
