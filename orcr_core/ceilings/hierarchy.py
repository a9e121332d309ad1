"""Which cgroup v2 hierarchy this process sees.

:func:`open_root`: ``ORCR_CGROUP_V2_ROOT`` (tests only), else ``/sys/fs/cgroup``
when it is the unified hierarchy, else ``/sys/fs/cgroup/unified`` (a hybrid
host, like this project's machines). A root holding the mimic's marker file
(:mod:`orcr_core.ceilings.mimic`; no cgroupfs can hold it, files cannot be
created there) is served by the mimic, so a server pointed at one in a test
meets the kernel's rules too.
"""

from __future__ import annotations

import os
from pathlib import Path

from orcr_core.ceilings.cgroupfs import MIMIC_MARKER, KernelFs


def root_path() -> Path:
    env = os.environ.get("ORCR_CGROUP_V2_ROOT")
    if env:
        return Path(env)
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return base
    return base / "unified"


def open_root() -> KernelFs:
    """The unified hierarchy this process sees (a mimic tree where one is pointed at)."""
    root = root_path()
    if (root / MIMIC_MARKER).exists():
        from orcr_core.ceilings.mimic import MimicFs

        return MimicFs(root)
    return KernelFs(root)
