"""Gemini CLI's screen: ready, or a question first (start-up or mid-turn).

Recognised from real screens (plugins/gemini/tests/fixtures/screens, Gemini CLI
0.61.0 in tmux):

- ready: the composer's placeholder "Type your message or @path/to/file" (it shows
  while Gemini CLI still initializes too: a prompt typed then is queued, and sent);
- the folder-trust question "Do you trust the files in this folder?" (folder trust is
  on and the folder is in no ``trustedFolders.json`` entry), answered by "Trust
  folder" with ``trust_cwd = true``;
- the sign-in question "How would you like to authenticate for this project?" (no
  auth method chosen, or an invalid one);
- a permission question mid-turn: a box with "Allow execution of [Shell]?" (or
  "Apply this change?", "Allow execution of MCP tool ...?") over the menu
  "● 1. Allow once / 2. Allow for this session / 3. No, suggest changes (esc)";
  the tool and its command are the box's first line ("? Shell  touch x");
- a usage limit mid-turn: "Usage limit reached for all Pro models." over "Keep trying /
  Stop" (``waiting``, kind ``usage_limit``: it holds new gemini agents).

Gemini CLI draws its menus inside boxes (``│ ● 1. Allow once │``): the borders are
taken off before the menu is read.
"""

from __future__ import annotations

import re

from orcr_core.contracts import InputState, LaunchSpec, ScreenState
from orcr_core.kit.screens import (
    choose,
    clock_text,
    keys_hint,
    menu,
    reset_at,
    trust_question,
)

READY = "Type your message or @path/to/file"
#: what Gemini CLI prints under the trust question once it is answered (it restarts)
RESTART = "is restarting to apply the trust changes"
TRUST = ("Do you trust the files in this folder?", "Do you trust this folder?")
TRUST_YES = ("Trust folder",)
LOGIN = ("How would you like to authenticate",)
PERMISSION = re.compile(r"(Allow execution of .*\?|Apply this change\?|Allow .*\?)\s*$")
_BORDER_L = re.compile(r"^\s*[│┃]")
_BORDER_R = re.compile(r"[│┃]\s*$")
_NUMBER = re.compile(r"^\d+\.\s*")


def unbox(line: str) -> str:
    """A line without the box borders around it (one level)."""
    return _BORDER_R.sub("", _BORDER_L.sub("", line)).rstrip()


def _options(lines: list[str], last: bool = False) -> list[tuple[bool, str]]:
    return [(hl, _NUMBER.sub("", t)) for hl, t in menu(lines, "●", last=last)]


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
    lines = [unbox(ln) for ln in screen.splitlines()]
    attach = f"orcr agent attach {spec.path}"
    # a question answered stays drawn above what follows it ("Gemini CLI is restarting
    # to apply the trust changes...", then a new banner and composer): only the part
    # of the screen after the last of those counts for the start-up questions
    ready_at = max((i for i, ln in enumerate(lines) if READY in ln or RESTART in ln), default=-1)
    asked_at = max(
        (i for i, ln in enumerate(lines) if any(s in ln for s in TRUST + LOGIN)), default=-1
    )
    if 0 <= asked_at < ready_at:
        lines = lines[ready_at:]
    text = "\n".join(lines)
    if any(s in text for s in TRUST):
        keys = choose(_options(lines), lambda t: t.startswith(TRUST_YES))
        return trust_question("Gemini CLI", "gemini", spec, keys)
    if any(s in text for s in LOGIN):
        return ScreenState(
            "dialog",
            kind="login",
            reason=(
                f"Gemini CLI asks how to sign in — answer it with `{attach}`, or set "
                "GEMINI_API_KEY and security.auth.selectedType in its settings"
            ),
        )
    limit = usage_limit(text, spec)
    if limit is not None:
        return limit
    asked = _permission(lines, spec)
    if asked is not None:
        return asked
    if any(READY in ln for ln in lines):
        return ScreenState("ready")
    return ScreenState("unknown")


#: Gemini CLI's usage-limit question (fixture 0.61.0-usage-limit.txt, captured from the
#: real CLI against the Gemini API's 429 for a spent daily quota): a box with "Usage limit
#: reached for all Pro models." (or "... for gemini-2.5-flash."), "Access resets at
#: 3:45 PM UTC." when the quota names its reset (its source: ``getResetTimeMessage``),
#: "/stats model for usage details", "/model to switch models." over the menu
#: "● 1. Keep trying / 2. Stop". The turn waits on it until someone chooses.
USAGE_LIMIT = re.compile(r"Usage limit reached for (.+?)\.\s*$")
_RESETS = re.compile(r"Access resets at (\d{1,2}:\d{2}\s*[AP]M)\b")


def usage_limit(text: str, spec: LaunchSpec) -> ScreenState | None:
    """``waiting`` (``usage_limit``) while Gemini CLI asks what to do about a usage limit
    ("Keep trying" or "Stop"): it does not go on by itself, so the reason says how to
    answer; the hold on new gemini agents lasts while the question shows (5 minutes past
    the last sighting, or until the reset it names)."""
    lines = text.splitlines()
    at = max((i for i, ln in enumerate(lines) if USAGE_LIMIT.search(ln.strip())), default=None)
    if at is None or not any("Keep trying" in ln for ln in lines[at:]):
        return None
    m = next((m for ln in lines[at:] if (m := _RESETS.search(ln))), None)
    until = reset_at(m.group(1)) if m else None
    clock = f" until {clock_text(until)}" if until else ""
    return ScreenState(
        "waiting",
        kind="usage_limit",
        reason=f"usage limit{clock}; Gemini CLI asks to keep trying or stop: "
        f"`orcr agent attach {spec.path}`",
        until=until,
    )


def _permission(lines: list[str], spec: LaunchSpec) -> ScreenState | None:
    """A tool's permission question (fixture 0.61.0-permission.txt): a question line
    over a numbered menu whose first option allows."""
    options = _options(lines, last=True)
    if not options or not any(t.startswith("Allow") for _, t in options):
        return None
    at = max(i for i, ln in enumerate(lines) if "●" in ln)
    question = next(
        (ln.strip() for ln in reversed(lines[:at]) if PERMISSION.search(ln.strip())), ""
    )
    if not question:
        return None
    start = max((i for i, ln in enumerate(lines[:at]) if ln.strip().startswith("? ")), default=-1)
    what = lines[start].strip()[2:].strip() if start >= 0 else ""
    what = re.sub(r"\s{2,}", ": ", what)
    keys = choose(options, lambda t: t.startswith("Allow once"))
    how = f", or `{keys_hint(spec.path, keys)}` for “Allow once”" if keys else ""
    shown = f" (`{what[:80]}`)" if what else ""
    return ScreenState(
        "dialog",
        kind="permission",
        reason=f"Gemini CLI asks: {question}{shown} — answer it with "
        f"`orcr agent attach {spec.path}`{how}",
        answer_keys=keys,
    )


#: what shows a turn running: "⠋ Thinking... (esc to cancel, 2m 30s)" (0.61.0-working.txt)
RUNNING = ("esc to cancel",)
_PROMPT = re.compile(r"^\s*>(\s|$)")
#: the line under the composer: "workspace (/directory)   sandbox"
_FOOTER = ("workspace (",)


def input_state(screen: str) -> InputState:
    """The composer's text (the last ``>`` line, the placeholder counted as empty, with
    the lines that continue it) and whether a turn runs ("esc to cancel"); None for
    the composer when none shows (a permission question replaced it)."""
    lines = [unbox(ln) for ln in screen.splitlines()]
    running = next((s for s in RUNNING if s in screen), None)
    start = max((i for i, ln in enumerate(lines) if _PROMPT.match(ln)), default=None)
    if start is None:
        return InputState(None, running)
    body = [_PROMPT.sub("", lines[start], count=1)]
    for line in lines[start + 1 :]:
        if not line.strip() or any(f in line for f in _FOOTER) or line.lstrip()[:1] in "╰─":
            break
        body.append(line)
    text = "\n".join(ln.strip() for ln in body).strip()
    return InputState("" if text.startswith(READY) else text, running)
