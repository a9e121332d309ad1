"""orcr-testing: orcr's test distribution, never part of orcr's wheel.

* :mod:`orcr_testing.herdr`: a faithful, schema-checked herdr emulator (herdr 0.8
  and 0.9.3), its ``herdr`` shim and herdr's vendored JSON Schema.
* :mod:`orcr_testing.tasks`: a throwaway PostgreSQL (:class:`PgCluster`) and the
  checks the task queue's suite makes that each backend answers its own way.

In a checkout it is imported from ``testing/`` (the root ``conftest.py``, ``bench/``
and ``scripts/herdr-compat`` put that folder on ``sys.path``); elsewhere install it
(``pip install ./testing``).
"""
