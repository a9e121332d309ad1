"""Usage: the tokens each turn spent, read from transcripts by the provider
adapters (``Turn.usage``), stored per turn (:mod:`orcr_core.usage.record`) and
summed for ``agent get``/``agent ls`` and ``orcr usage``."""
