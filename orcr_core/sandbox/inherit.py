"""Agents spawning agents stay inside: a child's sandbox is no wider than its parent's.

An agent started through the socket of a sandboxed agent (its own socket, the only
one it can reach: :mod:`orcr_core.server.agent_sockets`) is admitted with
:func:`narrow`: always sandboxed, with its parent's lists (``allow_read``,
``allow_write``, ``pass_env``, ``allow_net``, the hidden dirs) unless it asks for a
narrower ``allow_net``, the parent's deny list plus the config's, and a cwd (the
folder a ``--worktree`` is made from too) that its parent may write. Whatever is
wider is refused (``sandbox_wider``), naming it; nothing is silently cut, so an
agent that asked for more learns it did not get it. The grandchildren go through
the same rule with the child as the parent, so the narrowing holds at every depth.

Standard library only (admission imports it; :mod:`enter` never does).
"""

from __future__ import annotations

import os
from typing import Any

from orcr_core.sandbox import SandboxError


def within(path: str, roots: list[str]) -> bool:
    """Whether ``path`` is one of ``roots`` or inside one."""
    path = os.path.normpath(path)
    return any(
        path == r or path.startswith(r.rstrip("/") + "/") for r in map(os.path.normpath, roots)
    )


def net_within(child: list[str], parent: list[str]) -> list[str]:
    """The entries of ``child`` that ``parent``'s ``allow_net`` does not allow."""
    if parent == ["*"]:
        return []
    if child == ["*"]:
        return ["*"]
    allowed = {e.lower().rstrip(".") for e in parent}
    wider = []
    for entry in child:
        key = entry.lower().rstrip(".")
        if key in allowed:
            continue
        host, _, port = key.rpartition(":")
        if host and port in ("443", "80") and host in allowed:  # host allows 443 and 80
            continue
        wider.append(entry)
    return wider


def writable(parent: dict[str, Any]) -> list[str]:
    """What the parent may write, besides its own data dir: its cwd, ``allow_write``
    and its provider's state paths."""
    return [parent["cwd"], *parent.get("allow_write", []), *parent.get("state", [])]


def _refuse(who: str, what: str) -> SandboxError:
    return SandboxError(
        "sandbox_wider",
        f"an agent started from inside the sandboxed agent {who} runs in a sandbox no "
        f"wider than its parent's: {what}",
    )


def narrow(
    parent: dict[str, Any],
    *,
    requested: bool | None,
    allow_net: list[str] | None,
    source_cwd: str,
    provider: str,
    state: list[str],
    env: list[str],
    deny_read: list[str],
    hide: list[str],
    env_allow: tuple[str, ...],
) -> dict[str, Any]:
    """The child's lists (the keys of a policy), or :class:`SandboxError`
    ``sandbox_wider`` naming what was wider than ``parent``'s policy.

    ``requested``: the request's ``sandbox`` (False is refused); ``allow_net``: the
    request's (None: the parent's); ``source_cwd``: the folder the child runs in or its
    worktree is made from; ``state``/``env``: what the child's provider declares (its
    state paths, its variables); ``deny_read``/``hide``: the child's own, added to the
    parent's."""
    who = parent.get("path") or parent.get("uuid") or "?"
    if requested is False:
        raise _refuse(who, "--no-sandbox (sandbox off) is wider; leave it out or give --sandbox")
    net = list(parent["allow_net"]) if allow_net is None else list(allow_net)
    wider = net_within(net, parent["allow_net"])
    if wider:
        raise _refuse(
            who,
            f"allow_net {', '.join(wider)} is not in its allow_net "
            f"({', '.join(parent['allow_net']) or 'none: no network'})",
        )
    can_write = writable(parent)
    if not within(source_cwd, can_write):
        raise _refuse(
            who,
            f"cwd {source_cwd} is outside what it may write ({', '.join(can_write)})",
        )
    if provider != parent.get("provider"):  # another CLI's state and key: the parent's?
        outside = [p for p in state if not within(p, can_write)]
        if outside:
            raise _refuse(
                who,
                f"provider {provider} writes {', '.join(outside)}, which it may not write",
            )
        keeps = {*env_allow, *parent.get("env", []), *parent.get("pass_env", [])}
        extra = [v for v in env if v not in keeps]
        if extra:
            raise _refuse(
                who, f"provider {provider} is given {', '.join(extra)}, which it is not given"
            )
    lineage = [*parent.get("lineage", []), parent["uuid"]]
    return {
        "allow_read": list(parent["allow_read"]),
        "allow_write": list(parent["allow_write"]),
        "pass_env": list(parent["pass_env"]),
        "allow_net": net,
        "deny_read": list(dict.fromkeys([*parent["deny_read"], *deny_read])),
        "hide": list(dict.fromkeys([*parent["hide"], *hide])),
        "parent": parent["uuid"],
        "lineage": lineage,
    }
