"""Benchmarks that print figures (`python -m bench`, `make bench`); not timed tests."""
