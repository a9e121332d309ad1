"""Test helpers for herdr (in the test distribution orcr-testing, not in orcr's wheel): a faithful emulator, its ``herdr`` shim, schema validation.

* :class:`orcr_testing.herdr.emulator.Emulator` — in-process fake herdr 0.8 server.
* :func:`orcr_testing.herdr.shim.write_herdr_shim` — a ``herdr`` program for PATH.
* :class:`orcr_testing.herdr.schema.SchemaChecker` — validation against the schema.
"""
