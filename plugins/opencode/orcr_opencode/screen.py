"""OpenCode's screen: ready at its input, or a question.

Recognised from real screens (plugins/opencode/tests/fixtures/screens, captured
from OpenCode 1.18.33 in tmux). OpenCode asks no folder-trust or first-run
question when a model is configured; it draws its logo and the composer with the
placeholder ``Ask anything…`` and the footer ``ctrl+p commands``. After a turn the
composer is empty (no placeholder) and the footer still shows ``ctrl+p commands``;
while a turn runs the footer shows ``esc interrupt``. A tool that needs approval
(``permission`` ``ask`` in its config, or a folder outside the project) replaces
the composer with ``△ Permission required``, what it wants to do, and the choices
``Allow once   Allow always   Reject`` (``Allow once`` selected: Enter allows it,
Escape rejects it); choosing ``Allow always`` asks once more (``△ Always allow``
with ``Confirm   Cancel``).

A usage limit (fixtures 1.18.33-usage-limit-retrying.txt, captured from the real
OpenCode against an OpenAI-compatible API's 429 ``insufficient_quota``): OpenCode
retries with a growing backoff, the footer showing the error and ``[retrying in 8s
attempt #4]``, for about a minute (7 requests), then ends the turn with ``APIError: You
exceeded your current quota, ...``. Both are read as a usage limit (:func:`usage_limit`).
"""

from __future__ import annotations

import re
import time

from orcr_core.contracts import InputState, LaunchSpec, ScreenState
from orcr_core.kit.screens import clock_text

READY = ("Ask anything",)
FOOTER = "ctrl+p commands"
WORKING = "esc interrupt"
PERMISSION = "Permission required"
CHOICES = "Allow once"
ALWAYS = ("Always allow", "Confirm   Cancel")


#: a usage limit in OpenCode's words or the API's: OpenAI's "You exceeded your current
#: quota" (``insufficient_quota``), OpenCode Go's "5-hour usage limit reached. It will
#: reset in 2 hours 5 minutes." (its source, 1.18.33), its Zen's ``FreeUsageLimitError``
#: ("Free limit reached"); a plain rate limit (per minute) is not one
USAGE_LIMIT = re.compile(
    r"exceeded your current quota|insufficient_quota|usage limit\"? reached|"
    r"FreeUsageLimitError|GoUsageLimitError|Free limit reached",
    re.IGNORECASE,
)
#: the footer while OpenCode retries a request: "... [retrying in 8s attempt #4]"
RETRYING = re.compile(r"\[retrying (?:in \S+ )?attempt #\d+\]")
_RESET_IN = re.compile(r"reset in ((?:\d+ (?:day|hour|minute)s? ?)+)")
_UNITS = {"day": 86400, "hour": 3600, "minute": 60}


def usage_limit(text: str, now: float | None = None) -> ScreenState | None:
    """``waiting`` (``usage_limit``, ``until`` when OpenCode names the reset) when
    ``text`` (a turn's error, or the retry footer) is a usage limit."""
    if not USAGE_LIMIT.search(text):
        return None
    until = None
    if m := _RESET_IN.search(text):
        secs = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+) (day|hour|minute)", m[1]))
        until = (time.time() if now is None else now) + secs
    reason = f"usage limit until {clock_text(until)}" if until else "usage limit"
    return ScreenState("waiting", kind="usage_limit", reason=reason, until=until)


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
    retrying = [ln for ln in screen.splitlines() if RETRYING.search(ln)]
    if retrying and (limit := usage_limit(retrying[-1])) is not None:
        return limit  # retried until it gives up: a wait on the limit meanwhile
    lines = [ln.strip(" ┃╹") for ln in screen.splitlines()]
    text = "\n".join(lines)
    if PERMISSION in text and CHOICES in text:
        start = next(i for i, ln in enumerate(lines) if PERMISSION in ln)
        end = next((i for i, ln in enumerate(lines) if CHOICES in ln), len(lines))
        what = " ".join(ln.strip() for ln in lines[start + 1 : end] if ln.strip())
        what = f" ({what[:100]})" if what else ""
        return ScreenState(
            "dialog",
            kind="permission",
            reason=f"OpenCode asks for permission{what} — answer it with "
            f"`orcr agent attach {spec.path}`, or `orcr agent send {spec.path} --key enter` "
            "for “Allow once”",
            answer_keys=("enter",),
        )
    if all(s in text for s in ALWAYS):
        return ScreenState(
            "dialog",
            kind="permission",
            reason="OpenCode asks to confirm “Always allow” for a tool — answer it with "
            f"`orcr agent attach {spec.path}`",
        )
    if any(s in text for s in READY):
        return ScreenState("ready")
    if any(FOOTER in ln and WORKING not in ln for ln in lines):
        return ScreenState("ready")
    return ScreenState("unknown")


def input_state(screen: str) -> InputState:
    """The composer's text (the ``┃`` lines of the box that ends in ``╹▀▀▀`` at the
    bottom, its last line, the agent and model, left out; the placeholder counted as
    empty) and whether a turn runs (the footer's "esc interrupt"); None for the
    composer when no such box shows (a permission question replaced it)."""
    raw = screen.splitlines()
    running = WORKING if any(WORKING in ln for ln in raw) else None
    bottom = max((i for i, ln in enumerate(raw) if ln.strip().startswith("╹")), default=None)
    if bottom is None:
        return InputState(None, running)
    box: list[str] = []
    for line in reversed(raw[:bottom]):
        if not line.strip().startswith("┃"):
            break
        box.insert(0, line.strip()[1:].strip())
    text = "\n".join(box[:-1]).strip()
    return InputState("" if any(text.startswith(s) for s in READY) else text, running)
