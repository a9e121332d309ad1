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
"""

from __future__ import annotations

from orcr_core.contracts import InputState, LaunchSpec, ScreenState

READY = ("Ask anything",)
FOOTER = "ctrl+p commands"
WORKING = "esc interrupt"
PERMISSION = "Permission required"
CHOICES = "Allow once"
ALWAYS = ("Always allow", "Confirm   Cancel")


def screen_state(screen: str, spec: LaunchSpec) -> ScreenState:
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
