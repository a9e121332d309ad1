"""Helpers for a provider's ``screen_state`` hook: reading a TUI's selection menu, and
the folder-trust question every CLI asks the same way.

Both Claude Code and Codex ask their start-up questions as a vertical menu
with one highlighted option marked by a pointer (``❯`` or ``›``). The keys
that choose an option are the arrow presses from the highlighted one to it,
then Enter: computed from the screen, never assumed, so an answer is right
whichever option a menu opens on.
"""

from __future__ import annotations

import re

from orcr_core.contracts import LaunchSpec, ScreenState


def menu(lines: list[str], pointer: str, last: bool = False) -> list[tuple[bool, str]]:
    """The menu options on ``lines``: ``[(highlighted, text)]`` in screen order.

    An option is a line whose first visible character is ``pointer`` (the
    highlighted one) or that is indented like the options around it; the first
    run of such lines that holds the pointer is the menu (the last run with
    ``last``: a question asked mid-turn sits under prompts echoed with the same mark).
    """
    marked = re.compile(rf"^(\s*){re.escape(pointer)}\s+(\S.*)$")
    order = range(len(lines) - 1, -1, -1) if last else range(len(lines))
    for i in order:
        line = lines[i]
        m = marked.match(line)
        if m is None:
            continue
        start = i
        while start > 0 and _option_like(lines[start - 1]):
            start -= 1
        end = i + 1
        while end < len(lines) and _option_like(lines[end]):
            end += 1
        out = []
        for j in range(start, end):
            mm = marked.match(lines[j])
            out.append((True, mm.group(2).strip()) if mm else (False, lines[j].strip()))
        return out
    return []


def _option_like(line: str) -> bool:
    """An unmarked option: indented text, not blank (the menu ends at a blank line)."""
    return bool(line.strip()) and line.startswith("  ") and len(line) - len(line.lstrip()) <= 6


def choose(options: list[tuple[bool, str]], wanted) -> tuple[str, ...]:
    """The keys that move the highlight to the first option ``wanted(text)`` accepts
    and press Enter; ``()`` when no option matches or none is highlighted."""
    at = next((i for i, (hl, _) in enumerate(options) if hl), None)
    to = next((i for i, (_, text) in enumerate(options) if wanted(text)), None)
    if at is None or to is None:
        return ()
    step = "down" if to > at else "up"
    return (*[step] * abs(to - at), "enter")


def keys_hint(path: str, keys: tuple[str, ...]) -> str:
    """``orcr agent send PATH --key down --key enter``, for a blocked reason."""
    return f"orcr agent send {path} " + " ".join(f"--key {k}" for k in keys)


def trust_question(cli: str, provider: str, spec: LaunchSpec, keys: tuple[str, ...]) -> ScreenState:
    """The CLI (``cli``, as people call it) asks whether to trust the agent's folder:
    a dialog a person answers, or orcr with ``keys`` when ``providers.<provider>.trust_cwd``
    is set."""
    return ScreenState(
        "dialog",
        kind="trust",
        reason=(
            f"{cli} asks whether to trust {spec.cwd} — answer it with "
            f"`orcr agent attach {spec.path}`, or set providers.{provider}.trust_cwd = true"
        ),
        answer_keys=keys,
        answer_option="trust_cwd",
    )


_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?(?![\w:])", re.IGNORECASE)


def reset_at(clock: str, now: float | None = None) -> float | None:
    """The next local time a TUI's reset clock names (``7pm``, ``6:40pm``, ``3:28 PM``,
    ``19:00``), as Unix seconds; None when ``clock`` names no time of day."""
    import time

    m = _CLOCK.search(clock)
    if m is None or (m.group(2) is None and m.group(3) is None):
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3):
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m.group(3).lower().startswith("p") else 0)
    if hour > 23 or minute > 59:
        return None
    now = time.time() if now is None else now
    t = time.localtime(now)
    at = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, minute, 0, 0, 0, -1))
    return at if at > now - 60 else at + 86400  # a reset already past is tomorrow's


def clock_text(at: float) -> str:
    """``19:00``: a reset time as orcr shows it (local, 24 h)."""
    import time

    return time.strftime("%H:%M", time.localtime(at))
