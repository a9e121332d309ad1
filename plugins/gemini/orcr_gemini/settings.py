"""The settings file that gives one of orcr's Gemini CLI agents its turn-end hook, and the
installed Gemini CLI's version.

Gemini CLI reads a *system* settings file from ``GEMINI_CLI_SYSTEM_SETTINGS_PATH``
(else ``/etc/gemini-cli/settings.json``), merged over the user's and the project's
settings. orcr writes one per agent (``<agent data dir>/gemini-settings.json``, or
under ``[providers.gemini] settings_dir``): the system settings file in use, if any,
plus an ``AfterAgent`` command hook running :mod:`orcr_gemini.hook`. The user's own
``~/.gemini/settings.json`` is never touched.

Gemini CLI skips a system settings file (with a "Security Warning" line) when the
file or any folder above it is writable by group or others — ``/tmp`` is — so orcr
checks the same rule first and, when it fails, starts the agent without the hook
(turn ends are then a guess, :mod:`orcr_gemini.turns`).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from orcr_core.contracts import LaunchSpec, ProviderError

FILE = "gemini-settings.json"
HOOK_NAME = "orcr-turn-end"
PACKAGE = "@google/gemini-cli"
DEFAULT_SYSTEM = "/etc/gemini-cli/settings.json"


def settings_path(spec: LaunchSpec) -> Path:
    where = spec.options.get("settings_dir") or spec.data_dir
    return Path(os.path.expanduser(str(where))) / FILE


def secure(path: Path) -> bool:
    """Gemini CLI's rule for a system settings file: neither it nor any folder above it
    is writable by group or others (a symlink is judged by what it points to)."""
    try:
        for p in [path, *path.parents]:
            st = os.stat(p)
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
    except OSError:
        return False
    return True


def hook_command() -> str:
    """The hook as a command line: the script file itself, run with ``-I -S`` (no site
    packages, no orcr import): Gemini CLI waits for it at every turn end, and importing
    orcr there took seconds on a loaded machine."""
    script = Path(__file__).with_name("hook.py")
    return f"{shlex.quote(sys.executable)} -I -S {shlex.quote(str(script))}"


def trust_known(home: Path, cwd: str) -> bool:
    """Whether Gemini CLI starts in ``cwd`` without asking about trust: folder trust
    off (``security.folderTrust.enabled: false`` in the user's settings,
    ``GEMINI_CLI_TRUST_WORKSPACE``), or ``cwd`` is in ``trustedFolders.json`` (trusted:
    itself or a folder above marked ``TRUST_FOLDER``, its parent marked
    ``TRUST_PARENT``; or marked ``DO_NOT_TRUST``)."""
    if os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") in ("true", "false"):
        return True
    try:
        user = json.loads((home / ".gemini" / "settings.json").read_text())
        if user.get("security", {}).get("folderTrust", {}).get("enabled") is False:
            return True
    except (OSError, ValueError, AttributeError):
        pass
    path = (
        os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
        or home / ".gemini" / "trustedFolders.json"
    )
    try:
        rules = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    here = os.path.realpath(cwd)
    for folder, level in rules.items() if isinstance(rules, dict) else []:
        folder = os.path.realpath(os.path.expanduser(str(folder)))
        if level == "TRUST_PARENT":
            folder = os.path.dirname(folder)
        if level == "DO_NOT_TRUST" and here == folder:
            return True
        if level in ("TRUST_FOLDER", "TRUST_PARENT") and (
            here == folder or here.startswith(folder.rstrip("/") + "/")
        ):
            return True
    return False


def write(spec: LaunchSpec, env: dict[str, str]) -> Path | None:
    """Write the agent's settings file; its path, or None when Gemini CLI would not
    load it there (nothing is written then)."""
    path = settings_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not secure(path.parent):
        return None
    base: dict[str, Any] = {}
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or os.environ.get(
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH", DEFAULT_SYSTEM
    )
    if system and os.path.abspath(system) != str(path):
        try:
            loaded = json.loads(Path(system).read_text())
            base = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            base = {}
    hooks = base.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        hooks = base["hooks"] = {}
    after = [h for h in hooks.get("AfterAgent") or [] if isinstance(h, dict)]
    after.append({"hooks": [{"type": "command", "name": HOOK_NAME, "command": hook_command()}]})
    hooks["AfterAgent"] = after
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(base, indent=1))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def hooked(spec: LaunchSpec) -> bool:
    """Whether the agent runs with orcr's hook (its settings file is there, loadable)."""
    if not spec.options.get("stop_hook", True):
        return False
    path = settings_path(spec)
    return path.is_file() and secure(path)


def installed_version(argv0: str, path_env: str | None = None) -> str | None:
    """The version of the Gemini CLI ``argv0`` runs: the ``package.json`` of the npm
    package its bin links into, else what ``argv0 --version`` prints; None when
    neither tells (it is not found, or not Gemini CLI)."""
    found = shutil.which(argv0, path=path_env)
    if not found:
        return None
    real = os.path.realpath(found)
    try:
        mtime = os.stat(real).st_mtime
    except OSError:
        return None
    return _version_of(real, mtime)


@lru_cache(maxsize=32)
def _version_of(real: str, mtime: float) -> str | None:
    for folder in Path(real).parents:
        pkg = folder / "package.json"
        if pkg.is_file():
            try:
                data = json.loads(pkg.read_text())
            except (OSError, ValueError):
                break
            if data.get("name") == PACKAGE and isinstance(data.get("version"), str):
                return data["version"]
            break
    try:
        out = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


def refuse_unparsable(value: Any, key: str) -> None:
    if not isinstance(value, str):
        raise ProviderError(
            f"providers.gemini.{key} = {value!r} is not allowed; use a folder path (a string)",
            code="bad_provider_option",
        )
