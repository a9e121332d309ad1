"""The echo agent: a tiny real terminal agent for demos and tests.

Run as ``python -m orcr_providers.echo_agent --transcript PATH``. It answers
each prompt with the prompt's own text and writes a JSONL transcript that
:mod:`orcr_providers.echo_reader` reads (format: ``docs/providers/echo.md``).

Leading directives change a turn: ``[sleep N]`` works N seconds first,
``[fail]`` ends the turn with an error, ``[exit]`` ends the process after
the turn, ``[sh] CMD`` (to the end of its line) runs CMD with ``sh -c`` in the
agent's directory and answers with its output first: a scripted agent that
really edits files and commits (docs/tasks.md's playbook example). On a terminal it runs a small raw-mode TUI with bracketed paste;
with stdin not a terminal it reads lines and prints answers, and at end of
input finishes the queued turns and exits.

One thread, one ``select`` loop: a working turn is a deadline, so keystrokes
typed while it works land in the composer, and an Enter pressed meanwhile
queues the prompt for when the turn ends.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import sys
import time
from collections import deque

from orcr_providers import __version__
from orcr_providers.echo_input import InputParser

HEADER = "orcr echo agent"
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
_DIRECTIVE = re.compile(r"\s*\[(?:(sleep)\s+(\d+(?:\.\d*)?|\.\d+)|(fail)|(exit))\]", re.IGNORECASE)
#: ``[sh] CMD``: the command is the rest of the directive's line
_SH = re.compile(r"\s*\[sh\][ \t]*([^\n]*)", re.IGNORECASE)


class Plan:
    """What a prompt asks for once its leading directives are taken off.

    Plain classes, not dataclasses: ``dataclasses`` imports ``inspect``, ~8 ms of every
    echo agent's start."""

    __slots__ = ("sleep", "fail", "exit", "text", "commands")

    def __init__(self) -> None:
        self.sleep = 0.0
        self.fail = False
        self.exit = False
        self.text = ""
        self.commands: list[str] = []


def parse_prompt(text: str) -> Plan:
    plan = Plan()
    pos = 0
    while m := _DIRECTIVE.match(text, pos) or _SH.match(text, pos):
        if m.re is _SH:
            plan.commands.append(m.group(1).strip())
        elif m.group(1):
            plan.sleep += float(m.group(2))
        elif m.group(3):
            plan.fail = True
        else:
            plan.exit = True
        pos = m.end()
    plan.text = text[pos:].strip()
    return plan


def run_sh(command: str) -> str:
    """``[sh] CMD``: run it in this directory (the agent waits for it), its output and,
    when it failed, its exit status (``[sh: exit 3]``)."""
    import subprocess

    r = subprocess.run(
        ["sh", "-c", command], stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    out = (r.stdout + r.stderr).strip()
    return f"{out}\n[sh: exit {r.returncode}]".strip() if r.returncode else out


class Transcript:
    """Append-only JSONL; every line is flushed and fsync'd before it counts."""

    def __init__(self, path: str) -> None:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - lives as long as the process

    def write(self, record: dict) -> None:
        record = {**record, "ts": round(time.time(), 3)}
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        # A signal handler that leaves the loop must not cut a line in half.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def close(self) -> None:
        self._file.close()


class Job:
    __slots__ = ("turn", "prompt", "plan", "deadline")

    def __init__(self, turn: int, prompt: str, plan: Plan, deadline: float) -> None:
        self.turn = turn
        self.prompt = prompt
        self.plan = plan
        self.deadline = deadline


class _Stop(Exception):
    """Raised from a signal handler to leave the loop cleanly."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EchoAgent:
    def __init__(self, transcript: Transcript, out_fd: int, tty: bool) -> None:
        self.transcript = transcript
        self.out_fd = out_fd
        self.tty = tty
        self.parser = InputParser()
        self.composer = ""
        self.queue: deque[str] = deque()
        self.job: Job | None = None
        self.turn = 0
        self.history: deque[tuple[str, str]] = deque(maxlen=50)
        self.exit_reason: str | None = None
        self.dirty = True
        self.out_gone = False

    # -- turns -------------------------------------------------------------

    def submit(self) -> None:
        if not self.composer.strip():
            self.composer = ""  # an empty (or blank) composer submits nothing
            return
        self.queue.append(self.composer)
        self.composer = ""
        self.dirty = True

    def advance(self, now: float) -> None:
        """Finish a turn whose time has come; start the next queued prompt."""
        while self.exit_reason is None:
            if self.job is not None:
                if now < self.job.deadline:
                    return
                self._finish(self.job)
                self.job = None
                continue
            if not self.queue:
                return
            self._start(self.queue.popleft(), now)

    def _start(self, prompt: str, now: float) -> None:
        self.turn += 1
        plan = parse_prompt(prompt)
        self.transcript.write({"type": "prompt", "turn": self.turn, "text": prompt})
        self.job = Job(self.turn, prompt, plan, now + plan.sleep)
        self.history.append(("you", prompt))
        self.dirty = True

    def _finish(self, job: Job) -> None:
        if job.plan.commands:
            job.plan.text = "\n".join([*map(run_sh, job.plan.commands), job.plan.text]).strip()
        if job.plan.fail:
            error = job.plan.text or "failed on request ([fail])"
            self.transcript.write(
                {"type": "turn_end", "turn": job.turn, "status": "errored", "error": error}
            )
            self.history.append(("error", error))
            self._say(f"error: {error}")
        else:
            self.transcript.write({"type": "answer", "turn": job.turn, "text": job.plan.text})
            usage = {
                "input_tokens": len(job.prompt.split()),  # the prompt's words
                "output_tokens": len(job.plan.text.split()),  # the answer's words
                "model": "echo",
            }
            self.transcript.write(
                {"type": "turn_end", "turn": job.turn, "status": "completed", "usage": usage}
            )
            self.history.append(("echo", job.plan.text))
            self._say(f"echo: {job.plan.text}")
        if job.plan.exit:
            self.exit_reason = "exit"
        self.dirty = True

    def interrupt(self) -> None:
        """Close an open turn as interrupted (the process is leaving mid-turn)."""
        if self.job is not None:
            self.transcript.write(
                {"type": "turn_end", "turn": self.job.turn, "status": "interrupted"}
            )
            self.job = None

    # -- input -------------------------------------------------------------

    def handle(self, data: bytes, final: bool = False) -> None:
        for event in self.parser.feed(data, final):
            kind = event[0]
            if kind == "text":
                self.composer += event[1]
            elif kind == "backspace":
                self.composer = self.composer[:-1]
            elif kind == "submit":
                self.submit()
            elif kind == "exit":
                self.exit_reason = event[1]
                return
            self.dirty = True

    # -- output ------------------------------------------------------------

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data and not self.out_gone:
            try:
                data = data[os.write(self.out_fd, data) :]
            except BlockingIOError:
                select.select([], [self.out_fd], [], 1.0)
            except OSError:  # the terminal hung up or the reader left
                self.out_gone = True

    def _say(self, line: str) -> None:
        if not self.tty:
            self._write(line.replace("\n", "\\n") + "\n")

    def draw(self) -> None:
        if not self.tty or not self.dirty:
            return
        self.dirty = False
        try:
            cols, rows = os.get_terminal_size(self.out_fd)
        except OSError:
            cols, rows = 80, 24
        cols, rows = max(cols, 20), max(rows, 4)
        state = f"working (turn {self.job.turn})" if self.job else "idle"
        if self.queue:
            state += f", {len(self.queue)} queued"
        lines = [f"{HEADER} · {state}", ""]
        room = rows - len(lines) - 1
        shown = [f"{who}: {text}".replace("\n", "↵") for who, text in self.history]
        lines += shown[-room:] if room > 0 else []
        lines += [""] * (rows - 1 - len(lines))
        lines = [line[: cols - 1] for line in lines]
        composer = ("> " + self.composer.replace("\n", "↵"))[-(cols - 1) :]
        self._write("\x1b[H\x1b[2J" + "\r\n".join(lines) + "\r\n" + composer)


def _loop(agent: EchoAgent, in_fd: int) -> None:
    eof = False
    while agent.exit_reason is None:
        agent.advance(time.monotonic())
        agent.draw()
        if agent.exit_reason is not None:
            break
        timeout = None
        if agent.job is not None:
            timeout = max(0.0, agent.job.deadline - time.monotonic())
        if eof:
            if agent.job is None and not agent.queue:
                agent.exit_reason = "eof"
                break
            time.sleep(timeout or 0)
            continue
        ready, _, _ = select.select([in_fd], [], [], timeout)
        if not ready:
            continue
        try:
            data = os.read(in_fd, 4096)
        except OSError:  # EIO: the terminal hung up
            agent.exit_reason = "hangup"
            break
        if not data:
            if agent.tty:
                agent.exit_reason = "hangup"
                break
            eof = True
            agent.handle(b"", final=True)
            agent.submit()  # a last line without its newline still counts
            continue
        agent.handle(data)


def _raise_stop(signum, _frame):
    raise _Stop(signal.Signals(signum).name.lower())


def _turns_in(path: str) -> int:
    """The highest turn number an earlier run of the agent wrote to ``path``."""
    last = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("turn"), int):
                    last = max(last, record["turn"])
    except FileNotFoundError:
        pass
    return last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orcr_providers.echo_agent")
    parser.add_argument("--transcript", required=True, help="the JSONL transcript to append to")
    parser.add_argument(
        "--resume", action="store_true", help="continue the transcript's turns where they stopped"
    )
    parser.add_argument("--version", action="version", version=f"orcr echo agent {__version__}")
    args = parser.parse_args(argv)
    turns_before = _turns_in(args.transcript) if args.resume else 0

    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    tty = os.isatty(in_fd)
    transcript = Transcript(args.transcript)
    record = {"type": "session", "version": __version__, "pid": os.getpid(), "cwd": os.getcwd()}
    if os.environ.get("ORCR_ID"):
        record["orcr_id"] = os.environ["ORCR_ID"]
    transcript.write(record)
    agent = EchoAgent(transcript, out_fd, tty)
    agent.turn = turns_before

    saved = None
    if tty:
        import termios
        import tty as ttymod

        saved = termios.tcgetattr(in_fd)
        ttymod.setraw(in_fd, termios.TCSANOW)
        agent._write("\x1b[?2004h")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    try:
        _loop(agent, in_fd)
    except _Stop as stop:
        agent.exit_reason = stop.reason
    except KeyboardInterrupt:
        agent.exit_reason = "ctrl-c"
    finally:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        agent.interrupt()
        transcript.write({"type": "exit", "reason": agent.exit_reason or "error"})
        transcript.close()
        if saved is not None:
            agent._write("\x1b[?2004l\r\n")
            try:
                import termios

                termios.tcsetattr(in_fd, termios.TCSADRAIN, saved)
            except OSError:
                pass  # the terminal is gone
    return 0


if __name__ == "__main__":
    sys.exit(main())
