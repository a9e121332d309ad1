"""Running tmux commands: argv building, tmux's own argument parsing, errors.

Every call is one ``tmux`` client process started with an argv list (never a
shell) on orcr's dedicated server (``-L name``, or ``-S path`` when the
configured socket contains a ``/``), so the user's own tmux servers are never
touched. ``-f /dev/null`` keeps the user's ``~/.tmux.conf`` (hooks,
``default-command``, ``remain-on-exit``...) out of orcr's server; ``-u`` asks
for UTF-8 whatever the locale says.

tmux re-parses the arguments it is given in two ways that matter here:

* any argument ending in ``;`` separates commands (``tmux a x\\; b`` runs two
  commands); :func:`tmux_arg` escapes that, so a literal ``;`` survives;
* some option values are format-expanded (``new-window -c`` and ``-n``,
  ``rename-window``): :func:`no_format` doubles ``#`` for those.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence

from orcr_core.contracts import DriverError

#: Oldest tmux orcr supports: ``new-window -e`` and pane options need 3.2.
MIN_VERSION = (3, 2)
INSTALL_HINT = "install tmux >= 3.2 (apt-get install tmux, dnf install tmux or brew install tmux)"

_ABSENT = (
    "no server running",
    "server exited unexpectedly",
)
_ABSENT_CONNECT = re.compile(
    r"error connecting to .*\((No such file or directory|Connection refused)\)"
)
#: "no current target" is a live server holding no session at all (one another client's
#: new-session has started but not yet made its session): nothing by that name exists.
_NOT_FOUND = re.compile(
    r"can't find (pane|window|session)|no such (pane|window|session)|no current target"
)


#: codes of errors tmux may recover from: orcr holds its queue meanwhile
RETRYABLE = ("tmux_timeout", "tmux_socket_dir_missing")


class TmuxError(DriverError):
    """A failed tmux call; ``output`` is what it printed before failing."""

    def __init__(self, message: str, code: str = "tmux_error", output: str = ""):
        super().__init__(message, code=code, retryable=code in RETRYABLE)
        self.output = output


def tmux_arg(arg: str) -> str:
    """Escape one argument so tmux's command-line parser keeps it verbatim.

    tmux splits commands at arguments ending in ``;`` and turns a trailing
    ``\\;`` into ``;``; inserting a backslash before a trailing ``;`` undoes
    both (``x;`` -> ``x\\;`` -> ``x;``; ``x\\;`` -> ``x\\\\;`` -> ``x\\;``).
    """
    if arg.endswith(";"):
        return arg[:-1] + "\\;"
    return arg


def no_format(value: str) -> str:
    """Protect a value tmux format-expands (``#`` starts a format)."""
    return value.replace("#", "##")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``tmux 3.3a`` -> (3, 3); ``tmux next-3.4`` -> (3, 4); ``tmux master`` -> None."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def version_ok(text: str) -> bool:
    """True for tmux >= 3.2, and for builds with no number (``master``, ``openbsd-7.4``),
    which are development or base-system builds newer than 3.2."""
    version = parse_version(text)
    if version is None:
        return "master" in text or "openbsd" in text
    return version >= MIN_VERSION


class Tmux:
    """One tmux server (socket) reached through the ``tmux`` binary."""

    def __init__(self, binary: str = "tmux", socket: str = "orcr", timeout: float = 10.0):
        self.binary = binary
        self.socket = socket or "orcr"
        self.timeout = timeout
        self._resolved: str | None = None  # the binary's path on orcr's PATH, once found

    @property
    def socket_flags(self) -> list[str]:
        return ["-S", self.socket] if "/" in self.socket else ["-L", self.socket]

    def argv(self, *commands: Sequence[str]) -> list[str]:
        """The full client argv running ``commands`` in order, as one command group.

        One group means tmux runs them back to back inside the server, and
        stops at the first failing one.
        """
        out = [self.binary, "-u", "-f", "/dev/null", *self.socket_flags]
        for i, command in enumerate(commands):
            if i:
                out.append(";")
            out.extend(tmux_arg(a) for a in command)
        return out

    def check_socket_dir(self) -> None:
        """Raise (retryable) when the socket is a path whose directory does not exist."""
        if "/" not in self.socket:
            return
        parent = os.path.dirname(os.path.expanduser(self.socket)) or "."
        if not os.path.isdir(parent):
            raise TmuxError(
                f"the directory of tmux.socket {self.socket} does not exist (removed?): tmux "
                f"cannot be reached or started; queued agents wait until {parent} is back "
                f"(mkdir -p {parent}; a tmux server that lost its socket recreates it on SIGUSR1)",
                code="tmux_socket_dir_missing",
            )

    def attach_argv(self, target: str) -> list[str]:
        """What a user runs in a terminal to attach to ``target``."""
        return [self.binary, *self.socket_flags, "attach-session", "-t", target]

    @staticmethod
    def _env(path: str | None = None) -> dict[str, str] | None:
        """The client's environment: orcr's own without ``$TMUX``/``$TMUX_PANE`` (inside
        a user's tmux they name *their* server; never let it leak). None when orcr's
        own is that already: the client inherits it, and no copy of the environment
        is built and encoded for each of the thousands of calls (bench/lifetime.py)."""
        if path is None and "TMUX" not in os.environ and "TMUX_PANE" not in os.environ:
            return None
        env = dict(os.environ)
        env.pop("TMUX", None)
        env.pop("TMUX_PANE", None)
        if path is not None:
            env["PATH"] = path
        return env

    def run(
        self, *commands: Sequence[str], input: bytes | None = None, path: str | None = None
    ) -> str:
        """Run commands; return stdout. Raise :class:`DriverError` with a stable code.

        ``path`` is the client's ``PATH``: tmux gives a new pane the PATH of the
        client that asked for it, overriding the server's and even ``-e PATH=``.

        Codes: ``tmux_not_found``, ``tmux_timeout`` (retryable),
        ``tmux_socket_dir_missing`` (retryable: the socket path's directory is
        gone, so tmux can neither be reached nor started; an outage until it is
        back), ``server_not_running``, ``not_found`` (pane/window/session), ``tmux_error``.
        """
        argv = self.argv(*commands)
        # tmux itself is found on orcr's PATH (never on the one handed to a pane), once:
        # a search of every PATH directory per call was a good part of each call's CPU
        if self._resolved is None:
            self._resolved = shutil.which(self.binary)
        argv[0] = self._resolved or self.binary
        try:
            proc = subprocess.run(
                argv,
                input=input if input is not None else b"",
                capture_output=True,
                timeout=self.timeout,
                env=self._env(path),
                check=False,
            )
        except FileNotFoundError as exc:
            self._resolved = None  # moved or removed: looked for again next time
            self.check_socket_dir()
            raise self._not_found() from exc
        except subprocess.TimeoutExpired as exc:
            raise DriverError(
                f"tmux did not answer within {self.timeout:g}s: {' '.join(argv[5:])}",
                code="tmux_timeout",
                retryable=True,
            ) from exc
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0:
            # a socket path whose directory is gone is why tmux failed (it can neither
            # be reached nor started there): checked on failure, not before each call
            self.check_socket_dir()
            err = proc.stderr.decode("utf-8", "replace").strip()
            name = commands[0][0] if commands else ""
            raise TmuxError(
                f"tmux {name} failed: {err or f'exit status {proc.returncode}'}",
                code=classify(err),
                output=out,
            )
        return out

    def _not_found(self) -> DriverError:
        return DriverError(
            f"tmux binary {self.binary!r} not found; {INSTALL_HINT}", code="tmux_not_found"
        )

    def version(self) -> str:
        """``tmux -V`` as printed (``tmux 3.3a``)."""
        try:
            proc = subprocess.run(
                [self.binary, "-V"], capture_output=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError as exc:
            raise self._not_found() from exc
        except subprocess.TimeoutExpired as exc:
            raise DriverError(
                "tmux -V did not answer", code="tmux_timeout", retryable=True
            ) from exc
        text = proc.stdout.decode("utf-8", "replace").strip()
        if proc.returncode != 0 or not text:
            raise DriverError(f"{self.binary} -V failed: {proc.stderr.decode().strip()}")
        return text


def classify(stderr: str) -> str:
    """A stable code for a tmux error message."""
    if any(s in stderr for s in _ABSENT) or _ABSENT_CONNECT.search(stderr):
        return "server_not_running"
    if _NOT_FOUND.search(stderr):
        return "not_found"
    return "tmux_error"
