"""Small raw-socket helpers for tests that talk to an emulator directly."""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

#: A line-mode "agent": prints ``GOT:<line>`` once a line is submitted with Enter.
LINE_AGENT = [
    sys.executable,
    "-u",
    "-c",
    "import sys\nprint('READY')\nfor line in sys.stdin: print('GOT:' + line.strip())",
]


def raw(path: Any, line: bytes | str, timeout: float = 5.0) -> bytes:
    """Send raw bytes on a fresh connection; return all the server wrote before closing."""
    if isinstance(line, str):
        line = line.encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(path))
    try:
        s.sendall(line)
    except OSError:
        pass
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except OSError:
        pass
    s.close()
    return out


def call(emu: Any, method: str, params: dict | None = None, rid: str = "t") -> dict:
    """One request to ``emu`` (an Emulator or a socket path), one decoded reply."""
    path = getattr(emu, "socket_path", emu)
    line = json.dumps({"id": rid, "method": method, "params": params or {}}) + "\n"
    return json.loads(raw(path, line))


def ok(emu: Any, method: str, params: dict | None = None) -> dict:
    """Like :func:`call` but returns ``result`` and fails on an error reply."""
    reply = call(emu, method, params)
    assert "result" in reply, reply
    return reply["result"]


def apply_tab(
    emu: Any, argv: list[str] | None, label: str = "/p/a", ws: str = "w1", cwd: str = "/tmp"
) -> str:
    """``layout.apply`` one pane running ``argv`` (a shell when None); returns its pane id."""
    root: dict[str, Any] = {"type": "pane", "label": label, "cwd": cwd}
    if argv is not None:
        root["command"] = argv
    params = {
        "workspace_id": ws,
        "tab_label": label.rsplit("/", 1)[-1],
        "focus": False,
        "root": root,
    }
    return ok(emu, "layout.apply", params)["layout"]["root"]["pane_id"]
