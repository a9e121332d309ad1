"""Claude Code's project directory name for a cwd (TRANSCRIPTS.md section 1.1).

Claude Code (JavaScript) replaces every UTF-16 code unit outside ``[A-Za-z0-9]``
with ``-``; above 200 units it keeps the first 200 and appends ``-`` plus the
base-36 absolute value of the Java-style 32-bit hash of the original cwd. The
rule loses information, so it is the last resort after globbing for the id.
"""

from __future__ import annotations

_MAX = 200
_DIGITS36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def java_hash(text: str) -> int:
    """``h = int32(h * 31 + unit)`` over the UTF-16 code units (as String.hashCode)."""
    h = 0
    for unit in _utf16_units(text):
        h = (h * 31 + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def base36(n: int) -> str:
    """Lower-case base 36 of ``n >= 0``, as JavaScript's ``n.toString(36)``."""
    if n == 0:
        return "0"
    digits = []
    while n:
        n, r = divmod(n, 36)
        digits.append(_DIGITS36[r])
    return "".join(reversed(digits))


def project_slug(cwd: str) -> str:
    slug = "".join(
        chr(u) if (48 <= u <= 57 or 65 <= u <= 90 or 97 <= u <= 122) else "-"
        for u in _utf16_units(cwd)
    )
    if len(slug) > _MAX:
        slug = slug[:_MAX] + "-" + base36(abs(java_hash(cwd)))
    return slug
