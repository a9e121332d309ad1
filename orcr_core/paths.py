"""Agent path grammar. Import-light: the CLI validates early with it too.

A path is 1 to ``MAX_DEPTH`` segments of ``[a-z0-9_]+`` joined by ``/``, each
at most ``MAX_SEGMENT`` characters, at most ``MAX_PATH`` in all. The first
segment is the level-1 scope: it names the multiplexer workspace.
"""

from __future__ import annotations

import re

SEGMENT = re.compile(r"[a-z0-9_]+")
MAX_DEPTH = 8
MAX_SEGMENT = 64
MAX_PATH = 255


class PathError(ValueError):
    code = "invalid_path"


def validate(path: str, what: str = "path") -> str:
    """Return ``path`` if valid, else raise PathError naming the problem and the rule."""
    article = "an" if what[:1].lower() in "aeiou" else "a"
    rule = (
        f"{article} {what} is 1-{MAX_DEPTH} segments of lowercase letters, digits and _ "
        f"joined by '/', each at most {MAX_SEGMENT} characters, e.g. review/file_1"
    )
    if not isinstance(path, str) or not path:
        raise PathError(f"empty {what}; {rule}")
    if len(path) > MAX_PATH:
        raise PathError(f"{what} is {len(path)} characters, over the limit of {MAX_PATH}")
    if path.startswith("/") or path.endswith("/"):
        end = "starts" if path.startswith("/") else "ends"
        fixed = f"write {path.strip('/')!r}; " if path.strip("/") else ""
        raise PathError(
            f"{what} {path!r} {end} with '/': an orcr path is a name, not a file path "
            f"(a new agent's path is relative to $ORCR_PATH; a leading / means 'from the "
            f"top' only in a TARGET, e.g. orcr agent get /other/x); {fixed}{rule}"
        )
    segments = path.split("/")
    if len(segments) > MAX_DEPTH:
        raise PathError(
            f"{what} {path!r} has {len(segments)} segments, over the limit of {MAX_DEPTH}"
        )
    for seg in segments:
        if not seg:
            raise PathError(f"{what} {path!r} has an empty segment; {rule}")
        if len(seg) > MAX_SEGMENT:
            raise PathError(f"{what} segment {seg[:20]!r}... is over {MAX_SEGMENT} characters")
        if not SEGMENT.fullmatch(seg):
            bad = sorted({c for c in seg if not re.fullmatch(r"[a-z0-9_]", c)})
            raise PathError(
                f"{what} segment {seg!r} has characters {''.join(bad)!r} not allowed; {rule}"
            )
    return path


def join(scope: str | None, rel: str) -> str:
    return f"{scope}/{rel}" if scope else rel


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def in_scope(target: str, scope: str | None) -> str:
    """The agent ``target`` names from inside ``scope`` (``ORCR_PATH``), as ``agent
    run --path`` places one: a path (or glob) is relative to the scope; one that
    already starts with the scope (the full path ``run`` printed) is taken as is;
    a leading ``/`` names a path from the top (``/other/agent``); a uuid is a uuid."""
    if target.startswith("/"):
        return target.lstrip("/")
    if not scope or UUID.fullmatch(target) or target == scope or target.startswith(scope + "/"):
        return target
    return join(scope, target)


def is_glob(target: str) -> bool:
    return any(c in target for c in "*?[")


def glob_match(pattern: str, path: str) -> bool:
    """``*`` matches within one segment, ``**`` across segments."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, path) is not None
