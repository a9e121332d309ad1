"""herdr's public identifiers: ``w<N>``, ``<ws>:t<N>``, ``<ws>:p<N>`` and terminal ids."""

from __future__ import annotations

import itertools
import time

ALPHABET = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"
_terminal_counter = itertools.count(1)


def encode_number(n: int) -> str:
    """Bijective base-32 (``src/workspace.rs::encode_public_number``): 1..9, A.., 0=32, 11=33."""
    if n < 1:
        raise ValueError(f"public numbers start at 1, got {n}")
    out = ""
    while n > 0:
        n -= 1
        out = ALPHABET[n % 32] + out
        n //= 32
    return out


def decode_number(text: str) -> int:
    n = 0
    for ch in text:
        idx = ALPHABET.find(ch)
        if idx < 0:
            raise ValueError(f"not a public number: {text!r}")
        n = n * 32 + idx + 1
    return n


def new_terminal_id() -> str:
    """``term_<hex micros><hex counter>``: fresh for every pane and every restart."""
    return f"term_{int(time.time() * 1_000_000):x}{next(_terminal_counter):x}"
