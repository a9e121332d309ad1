"""orcr's bundled tmux plugin."""
