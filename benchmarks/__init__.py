"""Benchmarks: ``make bench`` (``python -m benchmarks``) runs every ``bench_*.py`` here."""
