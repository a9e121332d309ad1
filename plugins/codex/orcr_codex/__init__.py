"""orcr's bundled codex plugin."""
