"""Provider version pinning without a packaging dependency.

Specifiers are a comma-separated list of ``>=X``, ``>X``, ``<=X``, ``<X``,
``==X`` (``==2.1.*`` allowed), all of which must hold; ``||`` joins such lists
of which one must hold (``>=2.0,<2.1.176 || >=2.1.275,<2.2``: a range with a
known-bad stretch left out). Versions compare as tuples of their leading
integers (``2.1.38`` < ``2.1.233``; a pre-release tail such as
``0.104.0-alpha.1`` is ignored for ordering).
"""

from __future__ import annotations

import re

from orcr_core.contracts import ProviderError

_NUM = re.compile(r"\d+")


def version_tuple(version: str) -> tuple[int, ...]:
    head = re.split(r"[-+ ]", version.strip(), maxsplit=1)[0]
    return tuple(int(p) for p in _NUM.findall(head))


def matches(spec: str, version: str) -> bool:
    """True when ``version`` satisfies every clause of one ``||`` alternative of
    ``spec`` (empty spec: any)."""
    return any(_matches_all(part, version) for part in spec.split("||"))


def _matches_all(spec: str, version: str) -> bool:
    v = version_tuple(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"(>=|<=|==|>|<)\s*(.+)", clause)
        if m is None:
            raise ValueError(
                f"version clause {clause!r} in {spec!r} is not allowed; "
                "use >=, <=, ==, > or < and a version (==1.2.* for a series)"
            )
        op, target = m.groups()
        if op == "==" and target.endswith(".*"):
            t = version_tuple(target[:-2])
            if v[: len(t)] != t:
                return False
            continue
        t = version_tuple(target)
        n = max(len(v), len(t))
        a, b = v + (0,) * (n - len(v)), t + (0,) * (n - len(t))
        ok = {">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b, "==": a == b}[op]
        if not ok:
            return False
    return True


def check_version(provider: str, spec: str, version: str | None, options: dict) -> str | None:
    """Shared body of ``Provider.check_version``.

    ``None`` version (not seen yet) passes. Outside the range: raise, or with
    ``allow_unpinned`` return a warning.
    """
    if version is None or matches(spec, version):
        return None
    message = (
        f"{provider} {version} is outside the versions this adapter was checked against "
        f"({spec}); set [providers.{provider}] allow_unpinned = true to run it degraded"
    )
    if options.get("allow_unpinned"):
        return "warning: " + message
    raise ProviderError(message, code="unsupported_provider_version")
