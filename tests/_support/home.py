"""Moved to orcr_testing.home (testing/, orcr's pytest plugin); kept for old imports."""

from orcr_testing.home import OrcrHome, processes_under  # noqa: F401
