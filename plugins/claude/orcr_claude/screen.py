"""Claude Code's screen before the first prompt: ready, or a question first.

Recognised from real screens (plugins/claude/tests/fixtures/screens, captured
from Claude Code 2.1.332 in tmux): the folder-trust check ("Quick safety
check: Is this a project you created or one you trust?", 1.x asked "Do you
trust the files in this folder?"), the custom API key approval ("Detected a
custom API key in your environment") and the first-run setup (theme picker,
security notes, terminal setup); any other question in its dialog frame
("Enter to confirm · Esc to cancel", e.g. "Make auto mode your default
permission mode?") waits for a person too. The input is ready when a horizontal rule is
directly followed by the ``❯`` (2.x) or ``│ >`` (1.x box) composer line.
"""

from __future__ import annotations

import re

from orcr_core.contracts import InputState, LaunchSpec, ScreenState
from orcr_core.kit.screens import choose, clock_text, keys_hint, menu, reset_at, trust_question

TRUST = (
    "Is this a project you created or one you trust",
    "Do you trust the files in this folder",
)
API_KEY = ("Detected a custom API key",)
ONBOARDING = (
    "Choose the text style that looks best with your terminal",
    "Security notes:",
    "Use Claude Code's terminal setup",
    "Let's get started.",
)
#: the footer of every Claude Code selection dialog (trust, API key, settings questions)
QUESTION = "Enter to confirm"
#: the footer of a question asked mid-turn: a permission prompt ("Esc to cancel · Tab to
#: amend"), an AskUserQuestion ("Enter to select · ↑/↓ to navigate · Esc to cancel")
MID_TURN = "Esc to cancel"
_DASHES = re.compile(r"^\s*╌{10,}")
_RULE = re.compile(r"^\s*[╭─]─{10,}")
_COMPOSER = re.compile(r"^[│\s]*[❯>](\s|$)")
#: 1.x draws its dialogs in a box with numbered options: "│ ❯ 1. Yes, proceed   │"
_BOXED = re.compile(r"^│(.*?)│?\s*$")
_NUMBER = re.compile(r"^\d+\.\s*")


def _options(lines: list[str]) -> list[tuple[bool, str]]:
    """The dialog's menu, unboxed (1.x) and without option numbers (1.x)."""
    unboxed = [m.group(1).rstrip() if (m := _BOXED.match(ln)) else ln for ln in lines]
    return [(hl, _NUMBER.sub("", text)) for hl, text in menu(unboxed, "❯")]


def _below_answered_dialog(lines: list[str]) -> list[str]:
    """1.0.x leaves an answered dialog on the screen and draws its input below it
    (1.0.98-trust-answered.txt): with an input below the last dialog footer, only
    what follows that footer counts."""
    footer = max((i for i, ln in enumerate(lines) if QUESTION in ln), default=None)
    if footer is None:
        return lines
    rest = lines[footer + 1 :]
    for above, line in zip(rest, rest[1:], strict=False):
        if _RULE.match(above) and _COMPOSER.match(line):
            return rest
    return lines


#: a turn waiting out the plan's usage limit; Claude Code (2.1.234+) goes on by itself at
#: the reset. Seen on a real pane (issue 38): "Usage limit reached · continuing
#: automatically at 7pm · esc or type to cancel"; Claude Code's docs: "... at 3:45pm · esc
#: to cancel". The reset line ("Usage limit reset · continuing automatically") is not it.
#: The real 2.1.332 logged in to a plan (screens/2.1.332-usage-limit-plan.txt) ends the
#: turn and waits under its composer: "Continuing automatically at 12:24am · Esc to
#: cancel" ("shortly" instead of "at 7pm" once the reset is past). Only a line offering
#: to cancel is the wait: the message "● Usage limit reached · set to continue
#: automatically at 12:24am" stays in the conversation above once Esc cancelled it.
USAGE_LIMIT = re.compile(
    r"(?:Usage limit reached(?: again)? · continuing automatically|Continuing automatically)"
    r" (?:at ([0-9:]+\s*[ap]m)\b|shortly) · [Ee]sc\b"
)


def usage_limit(screen: str) -> ScreenState | None:
    """``waiting`` (``usage_limit``) when the screen shows a turn waiting out a usage limit."""
    found = list(USAGE_LIMIT.finditer(screen))
    if not found:
        return None
    m = found[-1]  # the last one: an older notice may stay in the scrollback above
    until = reset_at(m.group(1)) if m.group(1) else None
    return ScreenState(
        "waiting",
        kind="usage_limit",
        reason=f"usage limit until {clock_text(until)}" if until else "usage limit",
        until=until,
    )


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
    if (limit := usage_limit(screen)) is not None:
        return limit
    lines = _below_answered_dialog(screen.splitlines())
    text = "\n".join(lines)
    attach = f"orcr agent attach {spec.path}"
    if any(s in text for s in TRUST):
        keys = choose(_options(lines), lambda t: t.startswith("Yes"))
        return trust_question("Claude Code", "claude", spec, keys)
    if any(s in text for s in API_KEY):
        keys = choose(_options(lines), lambda t: t == "Yes" or t.startswith("Yes"))
        how = f" (`{keys_hint(spec.path, keys)}` uses it)" if keys else ""
        return ScreenState(
            "dialog",
            kind="api_key",
            reason=(
                "Claude Code asks whether to use the API key in its environment "
                f"(ANTHROPIC_API_KEY) — answer it with `{attach}`{how}"
            ),
            answer_keys=keys,
        )
    if any(s in text for s in ONBOARDING):
        return ScreenState(
            "dialog",
            kind="onboarding",
            reason=(
                "Claude Code shows its first-run setup (theme, security notes) — "
                f"finish it with `{attach}`; it is asked once per config dir"
            ),
        )
    asked = _mid_turn(lines, spec)
    if asked is not None:
        return asked
    for above, line in zip(lines, lines[1:], strict=False):
        if _RULE.match(above) and _COMPOSER.match(line):
            return ScreenState("ready")
    if QUESTION in text:  # another question in Claude Code's dialog frame
        asked = next((ln.strip() for ln in lines if ln.strip().endswith("?")), "a question")
        return ScreenState(
            "dialog",
            kind="question",
            reason=f"Claude Code asks {asked!r} before its input — answer it with `{attach}`",
        )
    return ScreenState("unknown")


def _mid_turn(lines: list[str], spec: LaunchSpec) -> ScreenState | None:
    """A question in the middle of a turn (fixtures 2.1.332-permission.txt,
    2.1.332-ask-user.txt): the screen ends with its footer under a numbered menu."""
    shown = [ln for ln in lines if ln.strip()]
    if not shown or MID_TURN not in shown[-1] or QUESTION in shown[-1]:
        return None
    options = menu(lines, "❯", last=True)
    if not options or not any(text.startswith("1.") for _, text in options):
        return None
    at = max(i for i, ln in enumerate(lines) if ln.lstrip().startswith("❯"))
    question = next((ln.strip() for ln in reversed(lines[:at]) if ln.strip().endswith("?")), "")
    attach = f"orcr agent attach {spec.path}"
    if not question.startswith("Do you want"):
        return ScreenState(
            "dialog",
            kind="question",
            reason=f"Claude Code asks {question or 'a question'!r} — answer it with `{attach}`",
        )
    keys = choose(options, lambda t: t.startswith("1. Yes"))
    how = f", or `{keys_hint(spec.path, keys)}` for “1. Yes”" if keys else ""
    return ScreenState(
        "dialog",
        kind="permission",
        reason=f"Claude Code asks permission{_asked_for(lines, at)}: {question} — "
        f"answer it with `{attach}`{how}",
        answer_keys=keys,
    )


def _asked_for(lines: list[str], at: int) -> str:
    """What the permission prompt is for: its header and the framed command, if shown."""
    rule = max((i for i in range(at) if _RULE.match(lines[i])), default=None)
    if rule is None:
        return ""
    body = [ln.strip() for ln in lines[rule + 1 : at] if ln.strip()]
    header = body[0] if body else ""
    framed = next(
        (
            lines[i + 1].strip()
            for i in range(rule, at - 1)
            if _DASHES.match(lines[i]) and lines[i + 1].strip()
        ),
        "",
    )
    what = f"{header} `{framed[:80]}`" if framed else header
    return f" ({what})" if what else ""


#: what shows a turn running: the footer (2.1.332-working.txt) and the spinner line say it
RUNNING = ("esc to interrupt",)


def input_state(screen: str) -> InputState:
    """The composer's text (the lines from the ``❯`` line under the last rule to the
    next rule, the prompt mark and 1.x's box borders taken off) and whether a turn
    runs ("esc to interrupt"); the composer is None when no rule-and-``❯`` input shows
    (a dialog replaced it)."""
    lines = screen.splitlines()
    running = next((s for s in RUNNING if s in screen), None)
    start = None
    for i, (above, line) in enumerate(zip(lines, lines[1:], strict=False)):
        if _RULE.match(above) and _COMPOSER.match(line):
            start = i + 1
    if start is None:
        return InputState(None, running)
    body = [_COMPOSER.sub("", lines[start], count=1)]
    for line in lines[start + 1 :]:
        if _RULE.match(line) or line.lstrip().startswith("╰"):
            break
        body.append(line)
    text = "\n".join(ln.strip().strip("│").strip() for ln in body).strip()
    return InputState(text, running)


#: a turn that ended on the API's 429 (captured from the real 2.1.332,
#: tests/fake_models/limits.py ``anthropic_usage_limit``): with an API key "API Error:
#: Request rejected (429) · This request would exceed your account's rate limit. Please
#: try again later."; with a claude.ai plan's login "You've hit your 5-hour limit ·
#: resets 12:24am (UTC)" (screens/2.1.332-usage-limit-plan.txt: the turn ends there in the
#: transcript, ``isApiErrorMessage``, ``error: rate_limit``, while the pane says
#: "Continuing automatically at 12:24am · Esc to cancel" and the CLI goes on by itself
#: at the reset, a new turn orcr follows)
LIMIT_ERROR = re.compile(
    r"^API Error: .*\(429\)|^API Error: 429\b|"
    r"^You[’']ve hit your (?:[\w-]+ )?limit(?: · resets ([0-9:]+\s*[ap]m)\b)?"
)


def limit_error(error: str) -> ScreenState | None:
    """``waiting`` (``usage_limit``, ``until`` when it names the reset) when a turn's
    error is a 429 or the plan's usage limit."""
    m = LIMIT_ERROR.search(error)
    if m is None:
        return None
    until = reset_at(m.group(1)) if m.group(1) else None
    reason = f"usage limit until {clock_text(until)}" if until else "usage limit"
    return ScreenState("waiting", kind="usage_limit", reason=reason, until=until)
