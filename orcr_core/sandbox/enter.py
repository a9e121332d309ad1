"""The launcher a sandboxed agent's pane runs, outside and then inside the sandbox.

Outside: ``python -I -S .../sandbox/enter.py [--proxy SOCKET HOSTS] NAME... --
BWRAP_ARGV...`` keeps only the named variables (``LC_*`` too) of the pane's own
environment (the multiplexer's ``TERM`` and orcr's identity are only known there), sets
``TMPDIR`` to the private ``/tmp``, starts the allowlist proxy when ``allow_net`` names
hosts (:mod:`proxy`: its socket, the comma-separated hosts) and runs bubblewrap as
its child (:func:`_run` says why not an exec). No shell.

Inside (``--bridge SOCKET -- ARGV...``): starts the bridge to the proxy and execs the
agent. Standard library only, and run as a file: it starts on every sandboxed start.

``--args-file FILE``: the arguments above, read from ``FILE`` (a JSON list). herdr's
native restore takes a command of at most 64 elements and 8 KiB, which a sandbox's
bubblewrap argv exceeds: orcr reports this short form instead, the file in the
agent's socket folder (orcr's, read-only inside the sandbox: :func:`policy.restore_argv`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

PROXY_ENV = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy")


def environment(keep: list[str], env: dict[str, str], proxied: bool = False) -> dict[str, str]:
    """``env`` cut to ``keep`` and ``LC_*``, with ``TMPDIR=/tmp``; with ``proxied``, the
    proxy variables name the bridge and nothing bypasses it."""
    wanted = set(keep)
    out = {k: v for k, v in env.items() if k in wanted or k.startswith("LC_")}
    out["TMPDIR"] = "/tmp"
    if proxied:
        proxy = _proxy_module()
        for var in PROXY_ENV:
            out[var] = f"http://127.0.0.1:{proxy.BRIDGE_PORT}"
        for var in ("NO_PROXY", "no_proxy"):
            out.pop(var, None)
    return out


def _proxy_module():
    spec = importlib.util.spec_from_file_location(
        "orcr_sandbox_proxy", os.path.join(os.path.dirname(os.path.abspath(__file__)), "proxy.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exec(command: list[str], env: dict[str, str]) -> None:
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        sys.exit(f"orcr sandbox: cannot run {command[0]}: {exc}")


def _run(command: list[str], env: dict[str, str]) -> None:
    """Run bubblewrap as a child and wait, with its exit status for ours. Not an exec:
    bubblewrap's ``--die-with-parent`` is signalled when the *thread* that forked its
    process exits, and a multiplexer may start a pane from a worker thread that ends
    soon after (herdr's emulator serves each request on one): the agent was SIGKILLed
    right after its start. Its parent is now this process, which lives as long as it.
    The terminal's Ctrl+C and Ctrl+\\ reach the agent itself (the whole foreground
    group gets them): ignored here; SIGTERM and SIGHUP are passed on."""
    import signal

    pid = os.fork()
    if pid == 0:
        _exec(command, env)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: os.kill(pid, signum))
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # ended by a signal: end by it too
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def main(args: list[str]) -> None:
    if args[:1] == ["--args-file"] and len(args) == 2:
        try:
            with open(args[1]) as f:
                args = json.load(f)
        except (OSError, ValueError) as exc:
            sys.exit(f"orcr sandbox: cannot read the launch arguments {args[1]}: {exc}")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            sys.exit(f"orcr sandbox: {args[1]} holds no list of arguments")
    if "--" not in args or args.index("--") == len(args) - 1:
        sys.exit("usage: python -I -S enter.py [--proxy SOCKET HOSTS] NAME... -- BWRAP_ARGV...")
    cut = args.index("--")
    head, command = args[:cut], args[cut + 1 :]
    if head[:1] == ["--bridge"]:  # inside: the agent's way to the proxy, then the agent
        _proxy_module().start_bridge(head[1])
        _exec(command, dict(os.environ))
    proxied = head[:1] == ["--proxy"]
    if proxied:
        _proxy_module().start_proxy(head[1], head[2].split(","))
        head = head[3:]
    _run(command, environment(head, dict(os.environ), proxied))


if __name__ == "__main__":
    main(sys.argv[1:])
