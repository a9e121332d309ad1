"""The soak checker's report (bench/soak_check.py): each violation with the first
violating history excerpt, and the counts of what was checked."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Violation:
    rule: str
    seq: int
    message: str
    excerpt: list[dict] = field(default_factory=list)
    after: float = 0.0  # seconds from the first event to the violating one


@dataclass
class Report:
    violations: list[Violation]
    counts: Counter

    def summary(self) -> str:
        c = self.counts
        return (
            f"checked {c['events']} events: {c['agents']} agents ({c['ended']} ended), "
            f"{c['runs']} loop runs, {c['fires']} fires, {c['promotions']} promotions"
        )

    def excerpt(self) -> list[str]:
        """The first violation and its history excerpt; a count of the others."""
        if not self.violations:
            return []
        v = self.violations[0]
        lines = [f"VIOLATION {v.rule} at seq {v.seq} ({v.after:.0f}s in): {v.message}"]
        lines += ["  " + fmt(e) for e in v.excerpt]
        lines += [f"  then {x.rule} at seq {x.seq}: {x.message}" for x in self.violations[1:20]]
        rules = Counter(x.rule for x in self.violations)
        lines.append(f"all violations by rule: {dict(sorted(rules.items()))}")
        return lines


def fmt(e: dict) -> str:
    who = (e.get("agent") or e.get("run") or e.get("loop") or "-")[:8]
    return f"{e['seq']:>7} {e['kind']:<24} {who} {json.dumps(e['data'], sort_keys=True)[:160]}"
