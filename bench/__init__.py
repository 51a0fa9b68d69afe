"""Benchmarks: each prints a small table and writes bench/results/<name>.json (see docs/benchmarks.md)."""
