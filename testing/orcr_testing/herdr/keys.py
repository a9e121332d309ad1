"""herdr key-combo strings to the bytes a terminal app receives (legacy xterm encoding).

All keys of a request are encoded before any byte is written, so one bad key
fails the whole request with ``invalid_key`` (as herdr does).
"""

from __future__ import annotations

_NAMED = {
    "enter": b"\r",
    "return": b"\r",
    "esc": b"\x1b",
    "escape": b"\x1b",
    "tab": b"\t",
    "backspace": b"\x7f",
    "bs": b"\x7f",
    "space": b" ",
    "up": b"\x1b[A",
    "down": b"\x1b[B",
    "right": b"\x1b[C",
    "left": b"\x1b[D",
    "home": b"\x1b[H",
    "end": b"\x1b[F",
    "pageup": b"\x1b[5~",
    "pagedown": b"\x1b[6~",
    "insert": b"\x1b[2~",
    "delete": b"\x1b[3~",
    "del": b"\x1b[3~",
    "minus": b"-",
    "plus": b"+",
    "slash": b"/",
    "backslash": b"\\",
    "comma": b",",
    "period": b".",
    "dot": b".",
    "backtick": b"`",
    "semicolon": b";",
    "colon": b":",
    "equal": b"=",
    "equals": b"=",
    "quote": b"'",
    "doublequote": b'"',
    "lbracket": b"[",
    "rbracket": b"]",
}
_FKEYS = {
    1: b"\x1bOP",
    2: b"\x1bOQ",
    3: b"\x1bOR",
    4: b"\x1bOS",
    5: b"\x1b[15~",
    6: b"\x1b[17~",
    7: b"\x1b[18~",
    8: b"\x1b[19~",
    9: b"\x1b[20~",
    10: b"\x1b[21~",
    11: b"\x1b[23~",
    12: b"\x1b[24~",
}
_MODS = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "c": "ctrl",
    "alt": "alt",
    "option": "alt",
    "meta": "alt",
    "m": "alt",
    "shift": "shift",
    "s": "shift",
    "cmd": "super",
    "super": "super",
    "hyper": "hyper",
}


class InvalidKey(ValueError):
    """A key string herdr would refuse (``invalid_key``)."""


def _base(name: str) -> bytes:
    low = name.lower()
    if low in _NAMED:
        return _NAMED[low]
    if low.startswith("f") and low[1:].isdigit() and int(low[1:]) in _FKEYS:
        return _FKEYS[int(low[1:])]
    if len(name) == 1 and name.isprintable():
        return name.encode()
    raise InvalidKey(f"invalid key {name!r}")


def encode_key(key: str) -> bytes:
    """One combo (``enter``, ``ctrl+c``, ``C-c``, ``shift+tab``, ``alt+x``, ``A``)."""
    if not key:
        raise InvalidKey("empty key")
    sep = "-" if ("-" in key and "+" not in key and len(key) > 1 and key[1] == "-") else "+"
    parts = key.split(sep) if len(key) > 1 else [key]
    if parts[-1] == "" and len(parts) > 1:  # "ctrl++"
        parts = parts[:-2] + [sep]
    *mods, name = parts
    flags = set()
    for mod in mods:
        if mod.lower() not in _MODS or (sep == "+" and len(mod) == 1):
            raise InvalidKey(f"invalid key {key!r}: unknown modifier {mod!r}")
        flags.add(_MODS[mod.lower()])
    if "shift" in flags and name.lower() == "tab":
        flags.discard("shift")
        base = b"\x1b[Z"
    else:
        base = _base(name)
        if "shift" in flags and len(base) == 1 and base.isalpha():
            base = base.upper()
        flags.discard("shift")
    if "ctrl" in flags:
        flags.discard("ctrl")
        if len(base) != 1:
            raise InvalidKey(f"invalid key {key!r}: ctrl only combines with a character")
        ch = base.lower() if base.isalpha() else base
        if ch == b" " or ch == b"@":
            base = b"\x00"
        elif b"a" <= ch <= b"z" or ch in b"[\\]^_":
            base = bytes([ch[0] & 0x1F])
        elif ch == b"?":
            base = b"\x7f"
        else:
            raise InvalidKey(f"invalid key {key!r}")
    if "alt" in flags:
        flags.discard("alt")
        base = b"\x1b" + base
    if flags:  # super/hyper have no legacy encoding
        raise InvalidKey(f"invalid key {key!r}: {', '.join(sorted(flags))} is not encodable")
    return base


def encode_keys(keys: list[str]) -> list[bytes]:
    """Encode every key or raise :class:`InvalidKey` for the first bad one."""
    return [encode_key(k) for k in keys]
