"""Serving policies replayed on the same nights: which model each would serve, and how good that
model was on the following day.

A replay trains one candidate per night (pipeline/replay.py). A policy decides, night after night,
whether tonight's candidate replaces the model it served; what users get is that model on the
next day. So a policy is judged by the next-day AUC of what it served, never by how often it
pushed. Every policy sees only what the gate sees at night t (AUCs on day t, the paired bootstrap
interval of candidate - served); the oracle alone peeks at day t+1 (the better of tonight's
candidate and the served model there): the regret to it is what a rule leaves on the table.

Models are named by the night that trained them (its data date); the scores a night needs are
`Replay.models_to_score`, and `Replay.night` takes them and moves every policy one night on.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# rule(candidate AUC, served AUC, interval of candidate - served {"low", "high"} or None) -> push?
Rule = Callable[[float, float, dict | None], bool]


def push_unless_worse(cand: float, served: float, diff: dict | None, max_drop: float = 0.01) -> bool:
    """The gate's old default: push unless the candidate is more than `max_drop` below the served
    model AND the bootstrap interval of the difference excludes 0."""
    if cand >= served - max_drop:
        return True
    return diff is not None and diff.get("high") is not None and diff["high"] >= 0


def keep_unless_better(cand: float, served: float, diff: dict | None) -> bool:
    """Replace the served model only when the candidate scores at least as well on the eval day
    (the expected-value rule: the bootstrap mean of the difference is the point difference)."""
    return cand >= served


def better_with_confidence(cand: float, served: float, diff: dict | None) -> bool:
    """Replace only when the bootstrap interval of the difference lies above 0."""
    return diff is not None and diff.get("low") is not None and diff["low"] > 0


RULES: dict[str, Rule] = {
    "push_unless_worse": push_unless_worse,
    "keep_unless_better": keep_unless_better,
    "better_with_confidence": better_with_confidence,
    "always_push": lambda cand, served, diff: True,
}
# Policies with no rule: "gate" (the pipeline's real verdict and push), "never_retrain" (night 1's
# model forever), "oracle" (the next day's better of candidate and the gate's served model),
# "popularity" (the training window's item popularity, scored like a model by evaluate).
POLICIES = ("gate", *RULES, "never_retrain", "oracle", "popularity")


@dataclass
class Replay:
    """The policies' state across nights: the model each serves, and per night what it served."""

    served: dict[str, str | None] = field(default_factory=lambda: {p: None for p in POLICIES})
    first: str | None = None
    previous_candidate: str | None = None
    served_before: str | None = None     # the gate's model before the previous night (the oracle's other choice)

    def models_to_score(self, candidate: str | None) -> set[str]:
        """Tonight's candidate, every model a policy serves, and yesterday's candidate (the oracle's)."""
        names = {candidate, self.previous_candidate, self.served_before, *self.served.values()}
        return {n for n in names if n is not None and n != "popularity"}

    def night(self, date: str, candidate: str | None, aucs: dict[str, float | None],
              diffs: dict[str, dict | None], gate_pushed: bool, popularity_auc: float | None) -> dict[str, Any]:
        """Score last night's choices on today's day (`aucs`: model -> AUC on `date`), then let each
        policy choose tonight. `candidate` None: no candidate tonight (the night failed); every
        policy keeps its model. Returns {"next_day": {policy: AUC on date of what it served after
        the previous night}, "served": {policy: model served after tonight}}."""
        next_day = {p: aucs.get(m) if m else None for p, m in self.served.items() if p != "popularity"}
        next_day["popularity"] = popularity_auc
        if self.previous_candidate is not None:
            choices = [aucs.get(self.previous_candidate), aucs.get(self.served_before)]
            next_day["oracle"] = max((a for a in choices if a is not None), default=None)
        if candidate is not None:
            self._choose(candidate, aucs, diffs, gate_pushed)
        return {"date": date, "next_day": next_day, "served": dict(self.served)}

    def _choose(self, candidate: str, aucs: dict, diffs: dict, gate_pushed: bool) -> None:
        self.served_before = self.served["gate"]
        cand = aucs.get(candidate)
        for name, rule in RULES.items():
            served = self.served[name]
            if served is None or (cand is not None and aucs.get(served) is not None
                                  and rule(cand, aucs[served], diffs.get(served))):
                self.served[name] = candidate
        if gate_pushed:
            self.served["gate"] = candidate
        self.first = self.first or candidate
        self.served["never_retrain"] = self.first
        self.served["oracle"] = None          # decided with hindsight, per night, above
        self.served["popularity"] = "popularity"
        self.previous_candidate = candidate


def summary(nights: list[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Per policy over the nights that have a next day: mean next-day AUC, regret to the oracle
    (mean of oracle - policy where both exist) and nights scored."""
    out = {}
    for policy in POLICIES:
        pairs = [(n["next_day"].get(policy), n["next_day"].get("oracle")) for n in nights]
        have = [a for a, _ in pairs if a is not None]
        regret = [o - a for a, o in pairs if a is not None and o is not None]
        out[policy] = {"mean_next_day_auc": sum(have) / len(have) if have else None,
                       "regret_to_oracle": sum(regret) / len(regret) if regret else None,
                       "nights": len(have)}
    return out
