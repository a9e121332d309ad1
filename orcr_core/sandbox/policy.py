"""What an agent's sandbox allows: resolved at admission, completed at launch.

Admission (:func:`admission`) decides whether the agent is sandboxed (the request,
else ``[sandbox.<provider>] default``, else ``[sandbox] default``), checks that the
engine can start one (fail closed: ``sandbox_unavailable``, never unconfined), and
records the policy in launch.json: the paths hidden, the lists from the config and
the deny list. Launch (:func:`wrap`) adds what the provider declares (the state
paths its CLI writes, its API key variables) and wraps the argv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from typing import Any

from orcr_core.sandbox import SandboxError, bwrap, enter

#: always hidden, whatever allow_read or allow_write say (docs/sandbox.md)
DENY_ALWAYS = (
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.netrc",
    "~/.gnupg",
    "~/.docker",
    "~/.kube",
    "~/.git-credentials",
)

#: the variables every sandboxed agent keeps (plus ``LC_*``, orcr's ``ORCR_*`` identity,
#: the ones its provider sets or declares, and ``[sandbox] pass_env``)
ENV_ALLOW = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "TERM_PROGRAM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "NO_COLOR",
    "FORCE_COLOR",
)

LIST_KEYS = ("allow_read", "allow_write", "deny_read", "allow_net", "pass_env")

_HOSTPORT = re.compile(r"^(\*|[A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$")


def wanted(requested: bool | None, provider: str, config) -> bool:
    """``--sandbox``/``--no-sandbox``, else the provider's ``default``, else ``[sandbox]``'s."""
    if requested is not None:
        return bool(requested)
    value = config.get(f"sandbox.{provider}.default") if config is not None else None
    if value is None:
        value = config.get("sandbox.default", False) if config is not None else False
    return bool(value)


def _lists(provider: str, config) -> dict[str, list[str]]:
    """Each list key: ``[sandbox]``'s then ``[sandbox.<provider>]``'s (added, never removed)."""
    out: dict[str, list[str]] = {}
    for key in LIST_KEYS:
        values = list(config.get(f"sandbox.{key}", []) or []) if config is not None else []
        if config is not None:
            values += list(config.get(f"sandbox.{provider}.{key}", []) or [])
        out[key] = list(dict.fromkeys(values))
    return out


def check_net(entries: list[str]) -> None:
    """``allow_net``: ``[]`` (no network but the agent's own loopback), hosts (``host``:
    ports 443 and 80; ``host:port``) through the allowlist proxy, or ``["*"]`` alone
    (the machine's whole network, unconfined)."""
    for entry in entries:
        if not isinstance(entry, str) or not _HOSTPORT.match(entry):
            raise SandboxError(
                "invalid_sandbox",
                f"sandbox allow_net entry {entry!r} is not host, host:port or *",
            )
    if "*" in entries and entries != ["*"]:
        raise SandboxError(
            "invalid_sandbox",
            f"sandbox allow_net = {entries!r}: * (the whole network) stands alone; "
            "give * or a list of hosts",
        )


def _net(provider: str, config, hosts: tuple[str, ...]) -> list[str]:
    """``allow_net`` when the config sets it (either table), else the provider's hosts."""
    if config is not None and (
        config.get("sandbox.allow_net") is not None
        or config.get(f"sandbox.{provider}.allow_net") is not None
    ):
        return _lists(provider, config)["allow_net"]
    return list(hosts)


def mux_sockets(config) -> list[str]:
    """The multiplexers' sockets and their folders: a sandboxed agent that reached one
    could type into every other agent's pane. Denied like the deny list (a socket file
    gets /dev/null over it). tmux's default folder is under /tmp, herdr's under the
    config home; both are named here too in case they are moved."""
    uid = os.getuid()
    out = [os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{uid}")]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    out.append(os.path.join(xdg, "herdr"))
    for key in ("tmux.socket", "herdr.socket"):
        value = config.get(key, "") if config is not None else ""
        if isinstance(value, str) and "/" in value:
            out.append(os.path.expanduser(value))
    if os.environ.get("HERDR_SOCKET_PATH"):
        out.append(os.environ["HERDR_SOCKET_PATH"])
    return [os.path.abspath(p) for p in out]


def hidden_dirs(config) -> list[str]:
    """orcr's own store, config, socket and every agent's checkout: hidden (the agent's
    own data dir and checkout are bound back)."""
    from orcr_core import dirs
    from orcr_core.workspaces.plan import checkouts_dir

    out = [
        str(dirs.data_dir()),
        str(dirs.config_path().parent),
        str(dirs.socket_path().parent),
        str(checkouts_dir(config)),
        "/run",  # sockets (docker, dbus, the user's runtime dir) stay connectable read-only
    ]
    return list(dict.fromkeys(os.path.abspath(p) for p in out))


def admission(
    requested: bool | None,
    provider: str,
    cwd: str,
    data_dir: str,
    config,
    hosts: tuple[str, ...] = (),
    *,
    allow_net: list[str] | None = None,
    parent: dict[str, Any] | None = None,
    source_cwd: str | None = None,
    declared=None,
) -> dict[str, Any] | None:
    """The policy launch.json records, or None when the agent runs unsandboxed.

    Raises :class:`SandboxError`: ``sandbox_unavailable`` when the engine cannot start
    one here (with its error and the install line), or
    ``invalid_sandbox`` for a policy it cannot enforce. ``hosts``: the provider's model
    API hosts (``sandbox_hosts``), ``allow_net`` unless the config sets one;
    ``allow_net``: the request's (``--allow-net``), over both.

    ``parent``: the policy of the sandboxed agent whose socket the request came
    through (with its ``uuid``, ``path`` and ``provider``): the child is sandboxed and
    no wider (:func:`orcr_core.sandbox.inherit.narrow`, which refuses
    ``sandbox_wider``); ``source_cwd`` is the folder asked for (a worktree's source),
    ``declared()`` what the provider declares, (state paths, variables): recorded, a
    child of this agent is checked against them."""
    if parent is None and not wanted(requested, provider, config):
        if allow_net is not None:
            raise SandboxError(
                "invalid_sandbox", "--allow-net needs a sandbox (--sandbox or [sandbox] default)"
            )
        return None
    state, env = declared() if declared is not None else ([], [])
    if parent is not None:
        from orcr_core.sandbox import inherit

        if allow_net is not None:
            check_net(allow_net)
        home = os.path.expanduser("~")
        lists = inherit.narrow(
            parent,
            requested=requested,
            allow_net=allow_net,
            source_cwd=source_cwd or cwd,
            provider=provider,
            state=[_abs(os.path.expanduser(p), home) for p in state],
            env=env,
            deny_read=[_abs(p, home) for p in _lists(provider, config)["deny_read"]],
            hide=hidden_dirs(config),
            env_allow=ENV_ALLOW,
        )
        return _engine(config) | {
            "home": home, "cwd": cwd, "data_dir": data_dir, "state": state, "env": env,
            "socket_dir": socket_dir(data_dir), **lists,
        }  # fmt: skip
    lists = _lists(provider, config)
    lists["allow_net"] = (
        list(allow_net) if allow_net is not None else _net(provider, config, tuple(hosts))
    )
    check_net(lists["allow_net"])
    home = os.path.expanduser("~")
    return _engine(config) | {
        "home": home,
        "cwd": cwd,
        "data_dir": data_dir,
        "hide": hidden_dirs(config),
        "allow_read": [_abs(p, home) for p in lists["allow_read"]],
        "allow_write": [_abs(p, home) for p in lists["allow_write"]],
        "deny_read": [
            _abs(p, home) for p in (*DENY_ALWAYS, *mux_sockets(config), *lists["deny_read"])
        ],
        "allow_net": lists["allow_net"],
        "pass_env": lists["pass_env"],
        "state": state,
        "env": env,
        "socket_dir": socket_dir(data_dir),
    }


#: where an agent's own socket is inside its sandbox (a read-only bind of its folder)
INNER_SOCKET_DIR = "/run/orcr"


def socket_dir(data_dir: str) -> str:
    """The folder of the agent's own orcr socket, outside (``run/sbx/<uuid>``, next to
    orcr's socket, in its 0700 folder): bound read-only at :data:`INNER_SOCKET_DIR`,
    so a socket the server makes again after a restart is seen inside."""
    from orcr_core import dirs

    return str(dirs.socket_path().parent / "sbx" / os.path.basename(data_dir))


def declared(
    adapter, uuid: str, path: str, cwd: str, data_dir: str, options
) -> tuple[list[str], list[str]]:
    """(the state paths, the variables) a provider adapter declares for this agent."""
    from orcr_core.contracts import LaunchSpec

    paths = getattr(adapter, "sandbox_paths", None)
    spec = LaunchSpec(uuid=uuid, path=path, cwd=cwd, data_dir=data_dir, options=dict(options or {}))
    state = [str(p) for p in paths(spec)] if paths is not None else []
    return state, list(getattr(adapter, "sandbox_env", ()))


def _engine(config) -> dict[str, Any]:
    """The engine's part of a policy; ``sandbox_unavailable`` when it cannot start one."""
    program = config.get("sandbox.bwrap", "bwrap") if config is not None else "bwrap"
    reason = bwrap.unavailable(program)
    if reason:
        raise SandboxError("sandbox_unavailable", reason)
    return {"engine": "bwrap", "binary": bwrap.binary(program)}


def _abs(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    if not os.path.isabs(path):
        raise SandboxError(
            "invalid_sandbox", f"sandbox path {path!r} is not absolute (give /abs/path or ~/path)"
        )
    return os.path.normpath(path)


def _under(path: str, areas: list[str]) -> bool:
    return any(path.startswith(a.rstrip("/") + "/") for a in areas)


def _install_dirs(program: str, home: str) -> list[str]:
    """The folders a program under a hidden area (the home directory, ``/tmp``) runs
    from, read-only, or the sandbox would hide the program itself: a CLI's install
    (``~/.local``, ``~/.nvm/versions/node/vX``), a virtualenv (``~/.orcr``, a clone's
    ``.venv`` in /tmp) by the path it is called by as well as the one it resolves to;
    and, for orcr's own interpreter (the echo agent), the folders orcr's packages are
    imported from (an editable install in such a clone)."""
    areas = [a for a in (home, "/tmp") if a not in ("", "/")]
    found = shutil.which(program) if "/" not in program else program
    if not found:
        return []
    out = []
    for path in dict.fromkeys((os.path.abspath(found), os.path.realpath(found))):
        if _under(path, areas):
            top = os.path.dirname(os.path.dirname(path))
            out.append(top if top not in areas else os.path.dirname(path))
    if os.path.realpath(found) == os.path.realpath(sys.executable):
        for prefix in (sys.prefix, sys.base_prefix):
            if _under(prefix, areas):
                out.append(prefix)
        for name, module in list(sys.modules.items()):
            where = getattr(module, "__file__", None)
            if name.startswith("orcr") and "." not in name and where and _under(where, areas):
                out.append(os.path.dirname(os.path.dirname(where)))
    return list(dict.fromkeys(out))


def _git_dirs(cwd: str) -> tuple[list[str], list[str]]:
    """A git worktree's repository, which its ``.git`` file points into (hidden with the
    home or /tmp otherwise, so git fails in the checkout): the common dir read-only,
    and writable only what a commit in this checkout writes (objects, refs, logs, its
    own ``worktrees/<name>``); hooks and config stay read-only (a hook planted there
    would run unconfined in the user's next git command)."""
    try:
        with open(os.path.join(cwd, ".git")) as fh:
            line = fh.readline().strip()
    except OSError:  # no .git file: not a linked worktree (a folder is inside cwd)
        return [], []
    if not line.startswith("gitdir: "):
        return [], []
    gitdir = os.path.join(cwd, line[len("gitdir: ") :])
    try:
        with open(os.path.join(gitdir, "commondir")) as fh:
            common = os.path.normpath(os.path.join(gitdir, fh.read().strip()))
    except OSError:
        return [], []
    parts = ("objects", "refs", "logs")
    return [common], [gitdir, *(os.path.join(common, p) for p in parts)]


def wrap(policy: dict[str, Any], provider, spec, argv: list[str], env: dict[str, str]) -> list[str]:
    """The agent's argv inside its sandbox: the launcher (:mod:`orcr_core.sandbox.enter`),
    which keeps only the allowed variables, then bubblewrap, then ``argv``. No shell."""
    home = policy["home"]
    declared = getattr(provider, "sandbox_paths", None)
    state = []
    for path in declared(spec) if declared else []:
        path = os.path.expanduser(str(path))
        if path.endswith("/"):  # a state dir: made now, or its CLI would write into the void
            os.makedirs(path, exist_ok=True)
        state.append(_abs(path, home))
    read = list(policy["allow_read"])
    reads = getattr(provider, "sandbox_read", None)  # files it reads from a hidden place
    read += [_abs(os.path.expanduser(str(p)), home) for p in (reads(spec) if reads else [])]
    if argv:
        read += _install_dirs(argv[0], home)
    # orcr's own interpreter and packages, whatever argv runs: a CLI's hook calls back
    # into orcr (Gemini CLI's AfterAgent hook runs ``python .../orcr_gemini/hook.py``),
    # and from a clone or a virtualenv under /tmp or home both were hidden
    read += _install_dirs(sys.executable, home)
    write = [policy["cwd"], policy["data_dir"], *state, *policy["allow_write"]]
    git_read, git_write = _git_dirs(policy["cwd"])
    read += git_read
    write += git_write
    keep = [*ENV_ALLOW, *env, *getattr(provider, "sandbox_env", ()), *policy["pass_env"]]
    launcher = [sys.executable, "-I", "-S", enter.__file__]
    net = policy["allow_net"]
    proxy: list[str] = []
    if net and net != ["*"]:  # hosts: the proxy outside, the bridge inside, then argv
        sock = os.path.join(policy["data_dir"], "proxy.sock")
        proxy = ["--proxy", sock, ",".join(net)]
        argv = [*launcher, "--bridge", sock, "--", *argv]
        for path in (os.path.dirname(enter.__file__), sys.prefix, sys.base_prefix):
            if _under(path, [home, "/tmp"]):  # the launcher in a hidden home or /tmp (a clone)
                read.append(path)
    inner = bwrap.argv(
        engine=policy["binary"],
        cwd=policy["cwd"],
        home=home,
        hide=policy["hide"],
        read=read,
        write=write,
        deny=policy["deny_read"],
        net=policy["allow_net"],
        command=argv,
        own=(policy["cwd"], policy["data_dir"]),
        # what orcr starts the agent with next (its sandbox, its argv: a resume, a native
        # restore): in its writable data dir, so read-only over itself
        keep=(os.path.join(policy["data_dir"], "launch.json"),),
        socket=(policy["socket_dir"], INNER_SOCKET_DIR) if policy.get("socket_dir") else None,
    )
    keep = [k for k in dict.fromkeys(keep) if k != "ORCR_SOCKET"]
    # run as a file, isolated and without site (-I -S): it imports only the standard
    # library, and skipping site and orcr's imports saves ~100 ms per start
    return [*launcher, *proxy, *keep, "--", *inner]


#: the file in the agent's socket folder :func:`restore_argv` writes
RESTORE_ARGS = "launch.args"


def restore_argv(policy: dict[str, Any] | None, argv: list[str]) -> list[str]:
    """A sandboxed argv short enough for herdr's native restore (at most 64 elements,
    8 KiB): the launcher's arguments go into a file in the agent's socket folder and
    the launcher reads them from there (``enter.py --args-file``). That folder is
    orcr's, 0700, and bound read-only inside the sandbox: the agent cannot change
    what a restore runs outside it. Unchanged when not sandboxed (or a policy from
    before agents had a socket folder)."""
    launcher = [sys.executable, "-I", "-S", enter.__file__]
    folder = (policy or {}).get("socket_dir")
    if not folder or argv[: len(launcher)] != launcher:
        return argv
    path = os.path.join(folder, RESTORE_ARGS)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(argv[len(launcher) :], f)
    os.replace(tmp, path)
    return [*launcher, "--args-file", path]


def public(policy: dict[str, Any] | None) -> dict[str, Any] | None:
    """What ``agent get`` shows of a policy."""
    if not policy:
        return None
    return {
        "engine": policy["engine"],
        "allow_net": policy["allow_net"],
        "allow_read": policy["allow_read"],
        "allow_write": [policy["cwd"], *policy["allow_write"]],
        "deny_read": policy["deny_read"],
        "pass_env": policy["pass_env"],
        # started from inside a sandboxed agent: its parent's uuid, and every ancestor's
        "parent": policy.get("parent"),
        "lineage": policy.get("lineage", []),
    }
