"""Counts the tmux client processes a process starts (``Tmux.run`` calls), by the
first word of each command, into ``$TMUXCOUNT.<pid>`` at exit.

    PYTHONPATH=bench/tmux_count TMUXCOUNT=/tmp/tc python bench/lifetime.py --n 40
    cat /tmp/tc.*        # the server's file: divide by N for the calls per lifetime

Put on ``PYTHONPATH`` it is imported by every Python process that inherits it (the
server the bench starts included); without ``TMUXCOUNT`` it does nothing.
"""

import atexit
import collections
import os

if os.environ.get("TMUXCOUNT"):
    try:
        import orcr_tmux.tmuxcli as _cli
    except ImportError:
        _cli = None
    if _cli is not None:
        _counts: collections.Counter = collections.Counter()
        _run = _cli.Tmux.run

        def _counted(self, *commands, **kw):
            _counts[" ".join(command[0] for command in commands)] += 1
            return _run(self, *commands, **kw)

        _cli.Tmux.run = _counted

        def _dump() -> None:
            if _counts:
                with open(f"{os.environ['TMUXCOUNT']}.{os.getpid()}", "w") as fh:
                    fh.writelines(f"{n} {name}\n" for name, n in _counts.most_common())

        atexit.register(_dump)
