"""The suite's own pytest plumbing, one job a module (the root conftest.py loads them)."""
