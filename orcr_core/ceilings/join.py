"""The launch step: join the agent's groups, then exec its argv. No shell.

Run as ``python -I -S join.py GROUP/cgroup.procs... -- ARGV...`` in the
agent's pane (the same on tmux and herdr): it writes its own pid into each
group's ``cgroup.procs``, so the agent's program and everything it forks start
inside its ceilings, while the pane's shell and the multiplexer stay outside.
Standard library only, and no ``orcr_core`` import: it runs before the agent,
so it must be quick and must not depend on the server's environment.

A group it cannot join is fatal (exit 125 with the reason on stderr): an agent
never runs outside the ceilings it was given.
"""

import os
import sys


def main(args: list[str]) -> None:
    if "--" not in args:
        sys.stderr.write("orcr join: usage: join.py PROCS_FILE... -- ARGV...\n")
        sys.exit(125)
    cut = args.index("--")
    files, argv = args[:cut], args[cut + 1 :]
    if not argv:
        sys.stderr.write("orcr join: no argv to run\n")
        sys.exit(125)
    me = str(os.getpid())
    for path in files:
        try:
            with open(path, "w") as f:
                f.write(me)
        except OSError as exc:
            sys.stderr.write(f"orcr join: cannot join {path}: {exc}; the agent is not run\n")
            sys.exit(125)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"orcr join: cannot run {argv[0]}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
