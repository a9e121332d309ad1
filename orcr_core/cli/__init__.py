"""orcr command line."""
