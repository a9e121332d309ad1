"""Plumbing every room shares, once: leaves that import nothing of orcr's, so any
module can use them without an import circle (tests/test_layout.py)."""
