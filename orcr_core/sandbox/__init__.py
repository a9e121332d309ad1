"""The sandbox room: an unattended agent sees its own checkout and nothing it should not.

``policy`` resolves what an agent's sandbox allows, at admission (config, the
request) and at launch (the provider's declared state paths, hosts and variables);
``bwrap`` is the engine (bubblewrap) that turns a policy into a wrapped argv;
``enter`` is the tiny launcher that runs in the pane, cuts the environment to the
policy's allowlist and execs bubblewrap; ``proxy`` is the ``allow_net`` allowlist (a
proxy outside, a bridge inside). docs/sandbox.md; docs/decisions.md says why
bubblewrap directly and not ``srt``.

This package imports no peewee, pluggy or croniter: ``enter`` runs in every
sandboxed pane and must start fast.
"""

from __future__ import annotations


class SandboxError(Exception):
    """A sandbox that cannot be had: ``code`` is the admission refusal's."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
