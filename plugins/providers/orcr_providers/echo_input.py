"""Terminal input for the echo agent: bytes in, editing events out.

The parser is incremental: a read may end anywhere (inside a UTF-8 character,
an escape sequence or a bracketed-paste end marker) and the rest is kept for
the next ``feed``. Events are tuples:

- ``("text", str)``: literal text for the composer (typed or pasted; pasted
  newlines are kept as ``\\n``),
- ``("submit",)``: Enter (CR or LF outside a paste),
- ``("backspace",)``,
- ``("exit", "ctrl-c" | "ctrl-d")``.

Other escape sequences (arrows, function keys) and control bytes are dropped.
"""

from __future__ import annotations

import codecs

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
_MAX_CSI = 32  # longer "sequences" are garbage; drop the ESC and go on


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest proper prefix of ``marker`` that ``text`` ends with."""
    for k in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:k]):
            return k
    return 0


def _normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


class InputParser:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # an unfinished escape sequence or paste end marker
        self._paste: list[str] | None = None  # collected text while inside a paste

    @property
    def in_paste(self) -> bool:
        return self._paste is not None

    def feed(self, data: bytes, final: bool = False) -> list[tuple]:
        text = self._pending + self._decoder.decode(data, final)
        self._pending = ""
        events: list[tuple] = []
        typed: list[str] = []

        def flush_typed() -> None:
            if typed:
                events.append(("text", "".join(typed)))
                typed.clear()

        i, n = 0, len(text)
        while i < n:
            if self._paste is not None:
                end = text.find(PASTE_END, i)
                if end < 0:
                    keep = _partial_suffix(text[i:], PASTE_END)
                    self._paste.append(text[i : n - keep])
                    self._pending = text[n - keep :]
                    break
                self._paste.append(text[i:end])
                typed.append(_normalize_newlines("".join(self._paste)))
                self._paste = None
                i = end + len(PASTE_END)
                continue
            ch = text[i]
            if ch == "\x1b":
                consumed, seq = self._escape(text, i)
                if consumed == 0:  # incomplete: wait for the rest
                    self._pending = text[i:]
                    break
                if seq == PASTE_START:
                    self._paste = []
                i += consumed
                continue
            if ch in "\r\n":
                flush_typed()
                events.append(("submit",))
            elif ch in "\x7f\x08":
                flush_typed()
                events.append(("backspace",))
            elif ch == "\x03":
                flush_typed()
                events.append(("exit", "ctrl-c"))
            elif ch == "\x04":
                flush_typed()
                events.append(("exit", "ctrl-d"))
            elif ch == "\t" or ch >= " ":
                typed.append(ch)
            i += 1
        flush_typed()
        return events

    @staticmethod
    def _escape(text: str, i: int) -> tuple[int, str | None]:
        """(chars consumed, the sequence) for an ESC at ``text[i]``; (0, None) if incomplete."""
        n = len(text)
        if i + 1 >= n:
            return 0, None
        intro = text[i + 1]
        if intro == "[":
            for j in range(i + 2, min(n, i + _MAX_CSI)):
                if "\x40" <= text[j] <= "\x7e":
                    return j + 1 - i, text[i : j + 1]
            if n < i + _MAX_CSI:
                return 0, None
            return 1, None
        if intro == "O":  # SS3 (application-mode arrows, F1-F4)
            if i + 2 >= n:
                return 0, None
            return 3, None
        return 1, None  # a lone Escape (or Alt+key): drop the ESC, keep the key
