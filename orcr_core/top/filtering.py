"""What ``orcr top`` shows and in what order: the ``/`` filter and the ``s`` sorts."""

from __future__ import annotations

from dataclasses import dataclass

from orcr_core.paths import glob_match, is_glob
from orcr_core.top.rows import STATUS_RANK, STATUSES, Row

#: ``s`` cycles through these
SORTS = ("path", "status", "age")


@dataclass
class Filter:
    """``/`` input: status words (``idle working``), ``stalled``, ``parked``, path globs
    (``review/*``, ``nightly/**``) or path substrings; kinds AND, terms of a kind OR."""

    statuses: frozenset[str] = frozenset()
    paths: tuple[str, ...] = ()
    stalled: bool = False
    text: str = ""
    parked: bool = False

    @classmethod
    def parse(cls, text: str) -> Filter:
        statuses, paths, stalled, parked = set(), [], False, False
        for term in text.split():
            if term in STATUSES:
                statuses.add(term)
            elif term == "stalled":
                stalled = True
            elif term == "parked":
                parked = True
            else:
                paths.append(term)
        return cls(frozenset(statuses), tuple(paths), stalled, text.strip(), parked)

    def __bool__(self) -> bool:
        return bool(self.statuses or self.paths or self.stalled or self.parked)

    def matches(self, row: Row) -> bool:
        if self.statuses and row.status not in self.statuses:
            return False
        if self.stalled and not row.stalled:
            return False
        if self.parked and not row.parked:
            return False
        if self.paths and not any(_path_match(p, row.path) for p in self.paths):
            return False
        return True

    @property
    def glob(self) -> str | None:
        """The one path glob of this filter, if that is all it is (``K`` kills it)."""
        if len(self.paths) == 1 and is_glob(self.paths[0]):
            return self.paths[0]
        return None


def loop_shown(flt: Filter, name: str) -> bool:
    """A loop with no matching agents still shows when the filter names it."""
    if flt.statuses or flt.stalled or flt.parked:
        return False
    return any(_path_match(p, name) or p.rstrip("/*") == name for p in flt.paths)


def _path_match(term: str, path: str) -> bool:
    return glob_match(term, path) if is_glob(term) else term in path


def sort_key(sort: str):
    if sort == "status":
        return lambda r: (STATUS_RANK.get(r.status, 9), r.path)
    if sort == "age":  # oldest first
        return lambda r: (r.created or 0.0, r.path)
    return lambda r: r.path
