"""``orcr doctor``'s probes of a program: where it is and what ``--version`` says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

VERSION_TIMEOUT = 5.0  # seconds for ``<cli> --version``
_VERSION = re.compile(r"\d+(?:\.\d+)+(?:-[0-9A-Za-z][0-9A-Za-z.]*)?")


def parse_version(text: str) -> str | None:
    """The first version-looking token: ``2.1.38 (Claude Code)`` -> ``2.1.38``."""
    m = _VERSION.search(text or "")
    return m.group(0) if m else None


def which(program: str) -> str | None:
    if os.sep in program:
        return program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    return shutil.which(program)


def run_version(path: str, flag: str = "--version") -> tuple[str | None, str]:
    """``(output, error)`` of ``path --version`` (no shell, short timeout)."""
    try:
        r = subprocess.run(
            [path, flag],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"{path} {flag} did not answer within {VERSION_TIMEOUT:g}s"
    except OSError as exc:
        return None, f"{path} {flag} could not run: {exc}"
    out = (r.stdout or "") + (r.stderr or "")
    if r.returncode != 0 and not parse_version(out):
        return None, f"{path} {flag} exited {r.returncode}: {out.strip()[:120]}"
    return out.strip(), ""
