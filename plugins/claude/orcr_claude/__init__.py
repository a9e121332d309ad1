"""orcr's bundled claude plugin."""
