"""The agent lifecycle: admission and promotion (``queue``), the spawn pipeline
(``pipeline``, with ``launch`` for what an agent is started with), the monitor
that follows turns and panes (``monitor``, reading ``transcripts``), the one
place status transitions are written (``lifecycle``) and drift repair against
the multiplexer (``reconcile``).

Imports go one way: queue/lifecycle < launch < transcripts < pipeline < monitor,
reconcile; nothing here imports the server.
"""
