"""The launcher a sandboxed agent's pane runs: ``python -I -S .../sandbox/enter.py
NAME... -- BWRAP_ARGV...``.

It keeps only the named variables (``LC_*`` too) of the pane's own environment (the
multiplexer's ``TERM`` and orcr's identity are only known there), sets ``TMPDIR`` to
the private ``/tmp``, and execs bubblewrap: no shell, and the pane's process is then
bubblewrap itself. Standard library only: it runs on every sandboxed start.
"""

from __future__ import annotations

import os
import sys


def environment(keep: list[str], env: dict[str, str]) -> dict[str, str]:
    """``env`` cut to ``keep`` and ``LC_*``, with ``TMPDIR=/tmp``."""
    wanted = set(keep)
    out = {k: v for k, v in env.items() if k in wanted or k.startswith("LC_")}
    out["TMPDIR"] = "/tmp"
    return out


def main(args: list[str]) -> None:
    if "--" not in args or args.index("--") == len(args) - 1:
        sys.exit("usage: python -I -S enter.py NAME... -- BWRAP_ARGV...")
    cut = args.index("--")
    keep, command = args[:cut], args[cut + 1 :]
    try:
        os.execve(command[0], command, environment(keep, dict(os.environ)))
    except OSError as exc:
        sys.exit(f"orcr sandbox: cannot run {command[0]}: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
