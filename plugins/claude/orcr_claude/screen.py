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

from orcr_core.contracts import LaunchSpec, ScreenState
from orcr_core.screens import choose, keys_hint, menu

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


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
    lines = _below_answered_dialog(screen.splitlines())
    text = "\n".join(lines)
    attach = f"orcr agent attach {spec.path}"
    if any(s in text for s in TRUST):
        keys = choose(_options(lines), lambda t: t.startswith("Yes"))
        return ScreenState(
            "dialog",
            kind="trust",
            reason=(
                f"Claude Code asks whether to trust {spec.cwd} — answer it with `{attach}`, "
                "or set providers.claude.trust_cwd = true"
            ),
            answer_keys=keys,
            answer_option="trust_cwd",
        )
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
