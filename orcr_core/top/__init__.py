"""``orcr top``: a live view of the fleet over one ``watch.open`` stream.

``model`` (snapshot + events → rows, filter, sort) and ``text`` are pure Python;
``source`` owns the stream's connection; ``app`` is the Textual screen, imported
only by ``orcr top`` itself so the CLI's client path stays thin.
"""
