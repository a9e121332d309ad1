"""Logical key names (``enter``, ``ctrl+c``, ``shift+tab``) to tmux ``send-keys`` names."""

from __future__ import annotations

from orcr_core.contracts import DriverError

NAMED: dict[str, str] = {
    "enter": "Enter",
    "return": "Enter",
    "escape": "Escape",
    "esc": "Escape",
    "tab": "Tab",
    "backtab": "BTab",
    "backspace": "BSpace",
    "bspace": "BSpace",
    "delete": "DC",
    "del": "DC",
    "insert": "IC",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "PPage",
    "pgup": "PPage",
    "pagedown": "NPage",
    "pgdn": "NPage",
    "space": "Space",
    **{f"f{n}": f"F{n}" for n in range(1, 13)},
}
MODIFIERS = {"ctrl": "C-", "control": "C-", "alt": "M-", "meta": "M-", "shift": "S-"}


def tmux_key(key: str) -> tuple[bool, str]:
    """One logical key -> ``(literal, value)`` for ``send-keys [-l] value``.

    A single printable character is sent literally; named keys and modifier
    combinations (``ctrl+c``, ``alt+enter``, ``ctrl+shift+up``) map to tmux key
    names. ``shift+tab`` is tmux's ``BTab``. Anything else is refused rather
    than typed as text.
    """
    if len(key) == 1 and key.isprintable():
        return True, key
    parts = key.strip().lower().split("+")
    *mods, base = parts
    if not base or any(m not in MODIFIERS for m in mods):
        raise DriverError(f"unknown key {key!r}", code="unknown_key")
    if mods == ["shift"] and base == "tab":
        return False, "BTab"
    if base in NAMED:
        name = NAMED[base]
    elif len(base) == 1 and base.isprintable() and mods:
        name = base
    else:
        raise DriverError(
            f"unknown key {key!r}; use a single character, one of {', '.join(sorted(NAMED))}, "
            "or a combination such as ctrl+c or alt+enter",
            code="unknown_key",
        )
    prefix = "".join(dict.fromkeys(MODIFIERS[m] for m in mods))
    return False, prefix + name
