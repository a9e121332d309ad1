"""orcr's bundled herdr plugin."""
