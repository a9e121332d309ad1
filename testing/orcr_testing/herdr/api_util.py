"""Helpers shared by the emulator's request handlers."""

from __future__ import annotations

import os
import re
from typing import Any

from orcr_testing.herdr.transport import ApiError

OK = {"type": "ok"}
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _env(env: Any) -> dict[str, str]:
    env = env or {}
    for key, value in env.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise ApiError("invalid_env", f"invalid environment variable {key!r}")
    return dict(env)


def _cwd(emu, cwd: str | None) -> str:
    if cwd:
        return cwd
    if emu.state.focused_ws in emu.state.workspaces:
        return emu.state.workspaces[emu.state.focused_ws].cwd
    return os.getcwd()


def _tab(emu, tab_id: str):
    tab = emu.state.find_tab(tab_id)
    if tab is None:
        raise ApiError("tab_not_found", f"tab {tab_id} not found")
    return tab
