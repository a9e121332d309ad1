"""One conformance suite per contract, importable by a third party
(docs/plugins/conformance.md): subclass the suite as ``Test<Name>`` in a test module
and say what is under test; the fixtures come from orcr's pytest plugin
(:mod:`orcr_testing.plugin`).

* :class:`ProviderSuite`: a provider adapter (transcripts, argv, pinning, screens).
* :class:`DriverSuite`: a multiplexer driver (workspaces, marks, close, prompts,
  parking, processes).
* :class:`QueueSuite`: a task queue backend (reaping, attempts, verdicts,
  dependencies).
"""

from orcr_testing.conformance.driver import DriverSuite
from orcr_testing.conformance.provider import ProviderSuite
from orcr_testing.conformance.tasks import QueueSuite

__all__ = ["DriverSuite", "ProviderSuite", "QueueSuite"]
