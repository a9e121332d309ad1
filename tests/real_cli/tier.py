"""When the real_cli tier can run: the provider CLIs are found and nothing can leave the machine.

The tier drives the real agent CLIs pinned in ``tests/real_cli/VERSIONS`` (Claude Code,
Codex, Gemini CLI, pi and OpenCode) against the fake model servers in ``tests/fake_models``. It runs only when

- the CLIs are found: ``$ORCR_PROVIDER_BIN`` (a folder holding every command of
  ``tests/real_cli/VERSIONS``: ``claude``, ``codex``, ``gemini``, ``pi``, ``opencode``), else the cache
  ``scripts/install-provider-clis`` fills for those versions; and
- the process is in a loopback-only network namespace (``unshare -n`` with ``lo`` up):
  no network interface but ``lo`` is up and a route to a public address fails — so a
  CLI that ignored its base URL could reach no real API and no telemetry endpoint.

Otherwise the tier is reported as not run, with the reason and how to run it
(``scripts/provider-smoke``), the way the conformance group is.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = HERE / "VERSIONS"
HOW = "run it with scripts/provider-smoke (as root: installs the CLIs, runs the tier in unshare -n)"


def versions(path: Path = VERSIONS) -> dict[str, str]:
    """``{npm package: version}`` from a VERSIONS file (``#`` comments, blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            out[parts[0]] = parts[1]
    return out


def commands(path: Path = VERSIONS) -> list[str]:
    """The CLIs' commands (bin names) in a VERSIONS file: each line's third word."""
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and not parts[0].startswith("#"):
            out.append(parts[2])
    return out


def cache_bin(specs: dict[str, str] | None = None) -> Path:
    """Where ``scripts/install-provider-clis`` puts the bin folder for these versions
    (the same hash of the ``package@version`` lines, in file order)."""
    specs = versions() if specs is None else specs
    text = "".join(f"{pkg}@{ver}\n" for pkg, ver in specs.items())
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    base = os.environ.get("ORCR_PROVIDER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "orcr", "provider-clis"
    )
    return Path(base) / digest / "node_modules" / ".bin"


def provider_bin() -> tuple[Path | None, str]:
    """(the folder holding every CLI of VERSIONS, "") or (None, why not)."""
    env = os.environ.get("ORCR_PROVIDER_BIN")
    folder = Path(env) if env else cache_bin()
    missing = [n for n in commands() if not os.access(folder / n, os.X_OK)]
    if not missing:
        return folder, ""
    where = f"ORCR_PROVIDER_BIN={env}" if env else f"the cache {folder}"
    return None, f"no {' or '.join(missing)} in {where} (scripts/install-provider-clis fills it)"


def up_interfaces() -> list[str]:
    """Network interfaces of this process's namespace that are up, ``lo`` excluded
    (asked with SIOCGIFFLAGS: /sys/class/net shows the namespace /sys was mounted in)."""
    import fcntl
    import struct

    up = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            if name == "lo":
                continue
            req = struct.pack("16sH14x", name.encode()[:15], 0)
            try:
                flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
            except OSError:
                continue
            if flags & 0x1:  # IFF_UP
                up.append(name)
    finally:
        s.close()
    return up


def loopback_only() -> tuple[bool, str]:
    """(True, "") inside a loopback-only network namespace, else (False, why not)."""
    up = up_interfaces()
    if up:
        return False, f"network interfaces up besides lo: {', '.join(up)}"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: a UDP connect sends nothing, only routes
    except OSError as exc:
        if exc.errno not in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return False, f"a route test gave {exc}"
    else:
        return False, "a public address is routable"
    finally:
        s.close()
    lo = socket.socket()
    try:
        lo.bind(("127.0.0.1", 0))
    except OSError as exc:
        return False, f"loopback is down ({exc}); run ip link set lo up"
    finally:
        lo.close()
    return True, ""


def availability() -> tuple[Path | None, str]:
    """(bin folder, "") when the tier can run, else (None, the reason)."""
    folder, why = provider_bin()
    if folder is None:
        return None, why
    ok, why = loopback_only()
    if not ok:
        return None, f"not in a loopback-only network namespace ({why})"
    return folder, ""
