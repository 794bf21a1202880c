"""Benchmarks that print figures (`python -m bench`, `make bench`); not timed tests."""

from sandbox.defaults import install as _install_sandbox_defaults

# The benches run the product on the sandbox, as the root CLI does.
_install_sandbox_defaults()
