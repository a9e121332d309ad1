"""Sizes as text: ``512MiB``, ``2GB``, ``100 B`` (binary and decimal units).

A leaf: the config's checks and the ceilings both read sizes, and it imports
nothing of orcr's.
"""

from __future__ import annotations

import re

#: a number and its unit, e.g. ``512MiB`` or ``1.5 GB``
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)")
#: bytes per size unit
SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SIZE_UNITS.update(KB=10**3, MB=10**6, GB=10**9, TB=10**12)
