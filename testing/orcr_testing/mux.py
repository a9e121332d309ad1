"""``Mux``: the multiplexer under a ``live`` test (real tmux, or the herdr emulator);
the ``live`` fixture (orcr_testing.plugin) makes one."""

from __future__ import annotations

import subprocess
from pathlib import Path


class Mux:
    """The multiplexer under a live test: real tmux, or the herdr emulator speaking
    ``protocol`` (22: herdr 0.9.3, the primary target; 20: herdr 0.8)."""

    def __init__(self, kind: str, tmp: Path, protocol: int = 22):
        self.kind = kind
        self.tmp = tmp
        self.protocol = protocol if kind == "herdr" else None
        self.emulator = None
        self.others: list = []  # the user's other herdr sessions (other_session)
        if kind == "tmux":
            self.socket = tmp / "tmux.sock"
        else:
            from orcr_testing.herdr.emulator import Emulator

            self.socket = tmp / "herdr.sock"
            self.emulator = Emulator(
                self.socket, tmp / "herdr-state", protocol, shell=["/bin/sh"]
            ).start()

    def other_session(self, name: str = "work"):
        """A user's own herdr session (not orcr's), under the test's XDG_CONFIG_HOME:
        a schema-checked emulator a test populates with ``add_agent``. It exists
        for tmux tests too (the tmux driver reports none of its agents)."""
        from orcr_testing.herdr.emulator import Emulator

        emu = Emulator.for_session(
            self.tmp / "xdg", name, protocol=self.protocol or 22, shell=["/bin/sh"]
        ).start()
        self.others.append(emu)
        return emu

    def config(self) -> str:
        if self.kind == "tmux":
            return f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{self.socket}"\n'
        return f'[driver]\nname = "herdr"\n[herdr]\nsocket = "{self.socket}"\n'

    def labels(self) -> list[str]:
        """Every labelled pane's label, as the multiplexer itself reports it."""
        if self.kind == "tmux":
            res = subprocess.run(
                [
                    "tmux",
                    "-S",
                    str(self.socket),
                    "list-panes",
                    "-a",
                    "-F",
                    "#{@orcr_path}|#{pane_dead}",
                ],
                capture_output=True,
                text=True,
            )
            rows = [ln.split("|") for ln in res.stdout.splitlines()]
            return sorted(label for label, dead in rows if label and dead != "1")
        return sorted(p.label for p in self.emulator.panes() if p.label)

    def close(self) -> None:
        emulators = list(self.others)
        if self.kind == "tmux":
            subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)
        else:
            emulators.append(self.emulator)
        violations = [(v.kind, v.errors) for emu in emulators for v in emu.violations]
        for emu in emulators:
            emu.stop()
        assert violations == [], violations
