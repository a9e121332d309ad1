"""The orcr socket protocol, shared by server and client. Import-light.

Newline-delimited JSON over a Unix socket. Requests ``{id, method, params}``;
replies ``{id, result}`` or ``{id, error: {code, message, cause?}}``; streamed
events ``{id, event}`` under the id of the ``watch.open`` / ``events.subscribe``
that opened the stream. The first request on a connection must be
``hello {protocol}``. Unknown fields are ignored. A frame longer than
``MAX_FRAME`` bytes is refused and the connection closed (the server keeps
serving everyone else).
"""

from __future__ import annotations

import json
import re

PROTOCOL_VERSION = 1
SUPPORTED = (1,)
MAX_FRAME = 4 * 1024 * 1024
#: the largest prompt ``agent.run`` and ``agent.send`` accept, in UTF-8 bytes; the
#: client checks it before sending, the server again on admission
MAX_PROMPT = 1024 * 1024
#: the longest per-turn timeout (``agent run|send --timeout``), in seconds: 7 days
MAX_TURN_TIMEOUT = 7 * 86400


def prompt_too_large(prompt: str) -> str | None:
    """Why ``prompt`` is refused for its size, or None when it fits."""
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size <= MAX_PROMPT:
        return None
    return (
        f"the prompt is {size} bytes, over the limit of {MAX_PROMPT} bytes (1 MiB); "
        "put the text in a file and give the agent its path"
    )


#: a UTF-16 surrogate: a byte that was not UTF-8 (Python decodes it with
#: ``surrogateescape`` to U+DC80..U+DCFF), or a lone surrogate from a JSON ``\\ud8xx``
_SURROGATE = re.compile("[\ud800-\udfff]")


def prompt_not_utf8(prompt: str) -> str | None:
    """Why ``prompt`` is refused as not valid UTF-8 (naming the first bad byte's
    offset), or None when it is valid: such text can never be typed into a pane."""
    m = _SURROGATE.search(prompt)
    if m is None:
        return None
    offset = len(prompt[: m.start()].encode("utf-8"))  # no surrogate before it
    cp = ord(m.group())
    what = f"byte 0x{cp - 0xDC00:02x}" if 0xDC80 <= cp <= 0xDCFF else f"lone surrogate U+{cp:04X}"
    return (
        f"the prompt is not valid UTF-8: {what} at byte offset {offset}; prompts are typed "
        "as UTF-8 text, so convert it first (for example iconv -f latin1 -t utf-8)"
    )


class ProtocolError(Exception):
    """An error reply: ``code`` is stable, ``message`` is for people."""

    def __init__(self, code: str, message: str, cause: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.cause = cause

    def to_dict(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.cause:
            err["cause"] = self.cause
        return err


def encode(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


class LineReader:
    """Reads ``\\n``-terminated frames from a socket, refusing oversized ones."""

    def __init__(self, sock, max_frame: int = MAX_FRAME):
        self.sock = sock
        self.buf = bytearray()
        self.max_frame = max_frame

    def peek_line(self) -> bytes | None:
        """The next complete frame if one is already buffered (nothing is read)."""
        i = self.buf.find(b"\n")
        return bytes(self.buf[:i]) if i >= 0 else None

    def readline(self) -> bytes | None:
        """One frame without its newline; None at EOF. Raises ProtocolError if too big."""
        while True:
            i = self.buf.find(b"\n")
            if i > self.max_frame or (i < 0 and len(self.buf) > self.max_frame):
                raise ProtocolError(
                    "frame_too_large",
                    f"a frame over {self.max_frame} bytes (4 MiB) was refused and the "
                    "connection closed",
                )
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 1]
                return line
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
