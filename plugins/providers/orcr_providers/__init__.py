"""orcr's bundled generic providers: ``echo`` (a tiny real agent) and ``command`` (any argv).

The plugin itself (its hook) is :mod:`orcr_providers.plugin`, the entry point's target."""

__version__ = "0.1.0"
