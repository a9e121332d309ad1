"""Test helpers for herdr: a faithful emulator, its ``herdr`` shim, schema validation.

* :class:`orcr_herdr.testing.emulator.Emulator` — in-process fake herdr 0.8 server.
* :func:`orcr_herdr.testing.shim.write_herdr_shim` — a ``herdr`` program for PATH.
* :class:`orcr_herdr.testing.schema.SchemaChecker` — validation against the schema.
"""
