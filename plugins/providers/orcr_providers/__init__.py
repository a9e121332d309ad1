"""orcr's bundled providers plugin."""
