"""A ``herdr`` executable for tests: runs the emulator with this interpreter.

The shim is a Python script (shebang = ``sys.executable``), so no shell is
involved. Emulator knobs are baked in as environment variables (see
:func:`orcr_testing.herdr.program.main`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: the folder ``orcr_testing`` is imported from (testing/ in a checkout)
_ROOT = str(Path(__file__).resolve().parents[2])

_TEMPLATE = """\
#!{python}
# herdr emulator shim written by orcr_testing.herdr.shim (tests only)
import os
import sys

os.environ.update({env!r})
sys.path.append({root!r})  # the test distribution, installed or not
from orcr_testing.herdr.program import main

sys.exit(main())
"""


def write_herdr_shim(
    bin_dir: str | os.PathLike, name: str = "herdr", env: dict[str, str] | None = None
) -> Path:
    """Write ``<bin_dir>/<name>`` (0755) and return its path.

    ``env`` sets emulator options, e.g. ``{"ORCR_HERDR_EMU_PROTOCOL": "19",
    "ORCR_HERDR_EMU_SHELL": "/bin/sh", "ORCR_HERDR_EMU_ENTER_TOO_EARLY": "1"}``.
    """
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(_TEMPLATE.format(python=sys.executable, env=dict(env or {}), root=_ROOT))
    path.chmod(0o755)
    return path
