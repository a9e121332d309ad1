"""The soak's multiplexer (bench/soak.py ``--driver``): real tmux, or orcr's own herdr
server run by the herdr emulator (testing/orcr_testing/herdr) through its
``herdr`` shim on ``PATH``, which orcr starts and, once it is gone, starts again.

Each gives the soak the ``config.toml`` lines, the labelled panes with their root
process (:meth:`panes`), its fault (:meth:`fault`: tmux's server killed; herdr's
stopped the orderly way with ``server.stop``, which saves the session and restores
its panes as shells at the next start, or SIGKILLed, which loses what changed in the
last :data:`SAVE_DELAY` seconds, as real herdr does), the multiplexer's own processes
that outlive orcr's server by design (:meth:`keepers`), and the last kill (:meth:`kill`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psutil

#: seconds herdr waits after a change before it saves its session (real herdr's
#: debounce, ORCR-NOTES §12): a SIGKILL loses the last changes, so a workspace made
#: just before it is gone after the restart and its id is handed out again
SAVE_DELAY = 5.0
#: the tmux driver's placeholder pane that keeps a session (orcr_tmux/layout.py)
PLACEHOLDER = ("sleep", "2147483647")


class Tmux:
    name = "tmux"

    def __init__(self, home: Path, env: dict[str, str]):
        self.sock = home / "tmux.sock"

    def config(self) -> str:
        return f'[driver]\nname = "tmux"\n[tmux]\nsocket = "{self.sock}"\n'

    def panes(self) -> list[tuple[int, str]]:
        """(pane pid, label) of every live pane orcr labelled on this tmux server."""
        res = subprocess.run(
            ["tmux", "-S", str(self.sock), "list-panes", "-a", "-F",
             "#{pane_pid}|#{@orcr_path}|#{pane_dead}"],
            capture_output=True, text=True,
        )  # fmt: skip
        rows = [ln.split("|") for ln in res.stdout.splitlines()]
        return [(int(pid), label) for pid, label, dead in rows if label and dead != "1"]

    def fault(self, rng, kill: bool = False) -> str | None:
        res = subprocess.run(["tmux", "-S", str(self.sock), "kill-server"], capture_output=True)
        return "tmux server killed" if res.returncode == 0 else None

    def keepers(self):
        """Whether a process is tmux's (its server, a placeholder pane)."""
        return lambda p: p.name().startswith("tmux") or tuple(p.cmdline()) == PLACEHOLDER

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", str(self.sock), "kill-server"], capture_output=True)

    def violations(self) -> list[str]:
        return []


class Herdr:
    """orcr's own herdr (no ``[herdr] socket``): the emulator as herdr 0.9.3."""

    name = "herdr"

    def __init__(self, home: Path, env: dict[str, str]):
        from orcr_testing.herdr.shim import write_herdr_shim

        self.bindir = home.parent / "bin"  # outside a small ORCR_HOME disk
        self.violations_file = home.parent / "herdr-violations.jsonl"
        self.shim = write_herdr_shim(
            self.bindir,
            env={"ORCR_HERDR_EMU_SHELL": "/bin/sh", "ORCR_HERDR_EMU_PROTOCOL": "22",
                 "ORCR_HERDR_EMU_VIOLATIONS": str(self.violations_file),
                 "ORCR_HERDR_EMU_SAVE_DELAY": str(SAVE_DELAY)},
        )  # fmt: skip
        env["PATH"] = f"{self.bindir}{os.pathsep}{env.get('PATH', '')}"
        self.sessions = Path(env["XDG_CONFIG_HOME"]) / "herdr" / "sessions"

    def config(self) -> str:
        return '[driver]\nname = "herdr"\n'

    def socket(self) -> Path | None:
        found = sorted(self.sessions.glob("*/herdr.sock"))
        return found[0] if found else None

    def call(self, method: str, params: dict | None = None) -> dict:
        sock = self.socket()
        if sock is None:
            return {}
        line = json.dumps({"id": "soak", "method": method, "params": params or {}}) + "\n"
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        try:
            s.connect(str(sock))
            s.sendall(line.encode())
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return json.loads(out or b"{}").get("result") or {}
        except (OSError, ValueError):
            return {}
        finally:
            s.close()

    def servers(self) -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if len(cmd) > 1 and cmd[1] == str(self.shim) and "server" in cmd:
                found.append(p)
        return found

    def all_panes(self) -> list[tuple[int | None, str | None]]:
        rows = []
        for pane in self.call("pane.list").get("panes", []):
            info = self.call("pane.process_info", {"pane_id": pane["pane_id"]})
            rows.append((info.get("process_info", {}).get("shell_pid"), pane.get("label")))
        return rows

    def panes(self) -> list[tuple[int, str]]:
        """(root pid, label) of every labelled pane with a process (herdr removes a pane
        whose program exited)."""
        return [(pid, label) for pid, label in self.all_panes() if label and pid]

    def fault(self, rng, kill: bool = False) -> str | None:
        """``server.stop`` or SIGKILL, at random; ``kill``: SIGKILL."""
        servers = self.servers()
        if not servers:
            return None
        if not kill and rng.random() < 0.5:
            self.call("server.stop")
            return f"herdr {servers[0].pid} stopped (server.stop: saved, restored as shells)"
        servers[0].kill()
        return f"herdr {servers[0].pid} SIGKILLed"

    def relaunch(self, taken: str) -> tuple[str, list[tuple[str, str]], str | None] | None:
        """SIGKILL herdr and start it again as it was started (its command, environment
        and folder: as orcr would), then open unlabelled tabs in it, as a person
        attached to it does, until one gets the pane id ``taken`` (an agent's pane made
        since the last save: lost with the kill, its id handed out again). Returns what
        happened, what was opened (``("tab" | "workspace", id)``, for :meth:`close`) and
        the screen ``taken`` shows untouched (None: not drawn within 5 s); nothing is
        opened when ``taken`` was saved and came back restored."""
        servers = self.servers()
        if not servers:
            return None
        proc = servers[0]
        argv, env, cwd = proc.cmdline(), proc.environ(), proc.cwd()
        proc.kill()  # its parent, orcr's server, is stopped: a zombie till it runs again
        started = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        threading.Thread(target=started.wait, daemon=True).start()  # reaped when it ends
        deadline = time.monotonic() + 20
        while not self.call("ping") and time.monotonic() < deadline:
            time.sleep(0.05)
        ws_id = taken.partition(":")[0]
        opened: list[tuple[str, str]] = []
        for _ in range(16):
            if taken in {p["pane_id"] for p in self.call("pane.list").get("panes", [])}:
                break
            if ws_id in {
                w["workspace_id"] for w in self.call("workspace.list").get("workspaces", [])
            }:
                made = self.call("tab.create", {"workspace_id": ws_id, "focus": False})
                opened.append(("tab", made.get("tab", {}).get("tab_id")))
            else:
                made = self.call("workspace.create", {"cwd": cwd, "focus": False})
                opened.append(("workspace", made.get("workspace", {}).get("workspace_id")))
            if not made:
                break
        what = f"herdr {proc.pid} SIGKILLed and started again"
        if not opened:
            return f"{what}, {taken} restored", [], None
        deadline = time.monotonic() + 5
        while not (drawn := (self.screen(taken) or "").strip()) and time.monotonic() < deadline:
            time.sleep(0.05)  # the tab's shell draws its prompt: what it shows untouched
        return f"{what}, {len(opened)} tab(s) opened to reach {taken}", opened, drawn or None

    def screen(self, pane_id: str) -> str | None:
        params = {"pane_id": pane_id, "source": "recent", "format": "text", "lines": 200}
        return self.call("pane.read", params).get("read", {}).get("text")

    def close(self, opened: list[tuple[str, str]]) -> None:
        for kind, ident in reversed(opened):
            if ident:
                self.call(f"{kind}.close", {f"{kind}_id": ident})

    def keepers(self):
        """Whether a process is herdr's: the emulator, the shell of a pane nobody
        labelled (a workspace's first tab, kept while the workspace lives)."""
        shells = {pid for pid, label in self.all_panes() if not label}
        return lambda p: p.pid in shells or str(self.shim) in p.cmdline()

    def violations(self) -> list[str]:
        """What the emulator found against herdr's schema in orcr's requests."""
        if not self.violations_file.exists():
            return []
        return self.violations_file.read_text().splitlines()

    def kill(self) -> None:
        for p in self.servers():
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass


DRIVERS = {"tmux": Tmux, "herdr": Herdr}
