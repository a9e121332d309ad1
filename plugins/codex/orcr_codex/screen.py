"""Codex's screen before the first prompt: ready, or a question first.

Recognised from real screens (plugins/codex/tests/fixtures/screens, captured
from Codex 0.171.0 in tmux): the folder-trust question Codex asks in a git
repository it has not been told to trust ("Trust this folder?" with "1. Trust
and continue"; earlier releases: "allow Codex to work in this folder" /
"Do you trust the contents of this directory") and its sign-in screen. The
input is ready when a line starts with the ``›`` composer (and is no menu
option) with the status line under it (``gpt-5 default · /path``): 0.171
draws its composer while it is still connecting to its app-server, with only
"? for shortcuts" under it, and may ask the trust question after that
(0.171.0-booting.txt), so a bare composer is not ready yet. Codex 0.104 has
no such status line: its ready input shows "100% context left" under the
composer instead (0.104.0-ready.txt).
"""

from __future__ import annotations

import re

from orcr_core.contracts import InputState, LaunchSpec, ScreenState
from orcr_core.kit.screens import choose, clock_text, keys_hint, menu, reset_at, trust_question

TRUST = (
    "Trust this folder?",
    "allow Codex to work in this folder",
    "Do you trust the contents of this directory",
)
TRUST_YES = ("Trust and continue", "Yes")
LOGIN = ("Sign in with ChatGPT",)
#: the footer of an approval asked mid-turn ("Would you like to run the following command?")
APPROVAL_FOOTER = "enter to confirm or esc to cancel"
_COMPOSER = re.compile(r"^›(\s|$)")
_OPTION = re.compile(r"^›\s+\d+\.\s")
#: 0.104's status line: "? for shortcuts    100% context left" (no model · path line)
_CONTEXT = re.compile(r"\d+% context left")


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
    lines = screen.splitlines()
    text = "\n".join(lines)
    attach = f"orcr agent attach {spec.path}"
    if any(s in text for s in TRUST):
        options = [(hl, re.sub(r"^\d+\.\s*", "", t)) for hl, t in menu(lines, "›")]
        keys = choose(options, lambda t: t.startswith(TRUST_YES))
        return trust_question("Codex", "codex", spec, keys)
    if any(s in text for s in LOGIN):
        return ScreenState(
            "dialog",
            kind="login",
            reason=(
                f"Codex asks to sign in — sign in with `{attach}`, or configure an API key "
                "(a model provider's env_key) in its config"
            ),
        )
    asked = _approval(lines, spec)
    if asked is not None:
        return asked
    for i, line in enumerate(lines):
        if _COMPOSER.match(line) and not _OPTION.match(line):
            if any(" · " in below or _CONTEXT.search(below) for below in lines[i + 1 :]):
                return ScreenState("ready")
    return ScreenState("unknown")


def _approval(lines: list[str], spec: LaunchSpec) -> ScreenState | None:
    """An approval asked mid-turn (fixture 0.171.0-approval.txt): the screen ends with
    its footer under a numbered menu, the question and the command above it."""
    shown = [ln for ln in lines if ln.strip()]
    if not shown or APPROVAL_FOOTER not in shown[-1].lower():
        return None
    options = [(hl, re.sub(r"^\d+\.\s*", "", t)) for hl, t in menu(lines, "›", last=True)]
    if not options:
        return None
    question = next((ln.strip() for ln in reversed(lines) if ln.strip().endswith("?")), "")
    command = next((ln.strip()[2:] for ln in lines if ln.strip().startswith("$ ")), "")
    keys = choose(options, lambda t: t.startswith("Yes"))
    how = f", or `{keys_hint(spec.path, keys)}` for “Yes”" if keys else ""
    what = f" (`{command[:80]}`)" if command else ""
    return ScreenState(
        "dialog",
        kind="permission",
        reason=f"Codex asks: {question or 'for approval'}{what} — "
        f"answer it with `orcr agent attach {spec.path}`{how}",
        answer_keys=keys,
    )


#: what shows a turn running: "• Working (3s • esc to interrupt)"
RUNNING = ("esc to interrupt",)


def input_state(screen: str) -> InputState:
    """The composer's text (the last ``›`` line that is no menu option and has the
    status line under it, with the lines that continue it) and whether a turn runs
    ("esc to interrupt"); None for the composer when none shows (an approval)."""
    lines = screen.splitlines()
    running = next((s for s in RUNNING if s in screen), None)
    start = None
    for i, line in enumerate(lines):
        if _COMPOSER.match(line) and not _OPTION.match(line):
            if any(" · " in below or _CONTEXT.search(below) for below in lines[i + 1 :]):
                start = i
    if start is None:
        return InputState(None, running)
    body = [_COMPOSER.sub("", lines[start], count=1)]
    for line in lines[start + 1 :]:
        if not line.strip() or " · " in line or _CONTEXT.search(line):
            break
        body.append(line)
    return InputState("\n".join(ln.strip() for ln in body).strip(), running)


#: Codex's usage-limit error, which ends the turn (errored): its own words, from its
#: source (codex-rs/core/src/error.rs, ``UsageLimitReachedError``): "You've hit your
#: usage limit." then, by plan, an upgrade or admin hint, and " Try again at 3:28 PM."
#: (" or try again at ..." after a hint; "Aug 8th, 2026 12:30 PM" for another day;
#: "later." with no reset known). The real 0.171.0 writes it with a typographic
#: apostrophe ("You’ve", fixture screens/0.171.0-usage-limit.txt, captured against a
#: 429 ``usage_limit_reached``); an API key's spent credits (429 ``insufficient_quota``)
#: end the turn with "Quota exceeded. Check your plan and billing details." (captured
#: too): a usage limit with no reset.
USAGE_LIMIT = re.compile(r"You[’']ve hit your usage limit\b|Quota exceeded\. Check your plan")
_RETRY = re.compile(r"[Tt]ry again at (.+?)\.?\s*$")
_DAY = re.compile(r"^([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th), (\d{4}) (\d{1,2}:\d{2} [AP]M)$")


def usage_limit(text: str) -> ScreenState | None:
    """``waiting`` (``usage_limit``, ``until``) when a turn's error is Codex's usage limit."""
    if not USAGE_LIMIT.search(text):
        return None
    until = None
    if m := _RETRY.search(text):
        when = m.group(1).strip()
        if d := _DAY.match(when):
            import time
            from datetime import datetime

            at = datetime.strptime(f"{d[1]} {d[2]} {d[3]} {d[4]}", "%b %d %Y %I:%M %p")
            until = time.mktime(at.timetuple())
        else:
            until = reset_at(when)
    if until is None:
        return ScreenState("waiting", kind="usage_limit", reason="usage limit")
    return ScreenState(
        "waiting", kind="usage_limit", reason=f"usage limit until {clock_text(until)}", until=until
    )
