"""Benchmarks: `make bench` runs every `bench_*.py` module's `main()` and prints figures.

Benchmarks are not tests: they print medians and ratios; nothing asserts on time.
Set QM_BENCH to a comma-separated list of module names to run a subset.
"""
