"""Moved to orcr_testing.mux (testing/, orcr's pytest plugin); kept for old imports."""

from orcr_testing.mux import Mux  # noqa: F401
