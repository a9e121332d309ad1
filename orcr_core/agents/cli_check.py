"""A warning at admission when the provider's CLI is missing (issue 38 part 2).

The check ``orcr doctor`` makes (``cli doctor_providers``: the provider's ``cli``
default program, or ``[providers.<name>] argv``'s first word, looked up on PATH),
made by the server on its own PATH, the one the panes get. The agent is admitted
all the same: the CLI may be installed before it is promoted, and its start then
fails with the reason (``failed: claude: command not found``).
"""

from __future__ import annotations

import os
import shutil
import time

#: seconds a program found on PATH is taken as still there: every admission asks,
#: and a PATH lookup is a stat per directory (a few percent of an admission's CPU,
#: bench/admission.py). A missing program is looked up again every time, so its
#: install shows at the next admission; one removed within this long goes unwarned
#: (its start still fails with the reason).
FOUND_FOR = 5.0
_found: dict[tuple[str, str], float] = {}


def _on_path(program: str) -> bool:
    key = (program, os.environ.get("PATH", ""))
    now = time.monotonic()
    if now - _found.get(key, -FOUND_FOR) < FOUND_FOR:
        return True
    if shutil.which(program) is None:
        return False
    _found[key] = now
    return True


def missing_cli(name: str, provider, options: dict) -> str | None:
    """Why ``name``'s agents cannot start, when its CLI is not on PATH; else None."""
    cli = getattr(provider, "cli", None)
    if not (isinstance(cli, tuple) and len(cli) == 2 and all(isinstance(c, str) for c in cli)):
        return None  # no CLI of its own (command, echo): nothing doctor checks either
    default, install = cli
    argv = options.get("argv") or [default]
    program = argv[0] if isinstance(argv, list) and argv else str(argv)
    if _on_path(program):
        return None
    return (
        f"{program!r} is not on the server's PATH, so this {name} agent will fail when it "
        f"starts ({program}: command not found); {install}, or set [providers.{name}] argv "
        "(orcr doctor checks it)"
    )
