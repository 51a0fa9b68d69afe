"""A replay's table (replay.md) and picture (replay.png), from its replay.json (pipeline/replay.py)."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from pipeline import replay_policies as P

# Training a policy pays per night: the rules share the nightly full training; never_retrain
# trains once; popularity never trains (an incremental replay is its own run, with its own seconds).
TRAINS_NIGHTLY = {"gate", *P.RULES, "oracle"}


def train_seconds(nights: list[dict[str, Any]], policy: str) -> float:
    seconds = [n["seconds"].get("train", 0.0) for n in nights if "train" in n["seconds"]]
    if not seconds or policy == "popularity":
        return 0.0
    if policy == "never_retrain":
        return seconds[0] / len(nights)
    return statistics.mean(seconds)


def policy_rows(state: dict[str, Any]) -> list[list[str]]:
    nights, summary = state["nights"], state.get("summary") or P.summary(state["nights"])
    rows = []
    for policy in P.POLICIES:
        s = summary[policy]
        rows.append([policy, _f(s["mean_next_day_auc"]), _f(s["regret_to_oracle"]), str(s["nights"]),
                     f"{train_seconds(nights, policy):.0f}"])
    return rows


def night_rows(state: dict[str, Any]) -> list[list[str]]:
    rows, nights = [], state["nights"]
    for k, n in enumerate(nights):
        following = nights[k + 1]["next_day"].get("gate") if k + 1 < len(nights) else None
        rows.append([n["date"], _f(n.get("candidate_auc")), _f(n.get("served_auc")), _f(n.get("popularity_auc")),
                     n.get("verdict") or f"refused ({n.get('refused', '?').split(':')[0]})",
                     str(n.get("served_version")), _f(following), f"{sum(n['seconds'].values()):.0f}",
                     f"{n.get('bytes_written', 0) / 2**20:.1f}"])
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def markdown(state: dict[str, Any]) -> str:
    policies = table(["policy", "mean next-day AUC", "regret to oracle", "nights", "train s / night"],
                     policy_rows(state))
    nights = table(["data date", "candidate AUC", "served AUC", "popularity AUC", "verdict", "served version",
                    "served model next day", "seconds", "MiB written"], night_rows(state))
    return f"{policies}\n\n{nights}\n"


def picture(state: dict[str, Any], out: Path) -> Path:
    """Each policy's next-day AUC per night (what users got), popularity dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nights = state["nights"]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for policy in P.POLICIES:
        points = [(k, n["next_day"].get(policy)) for k, n in enumerate(nights) if n["next_day"].get(policy) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, "--" if policy in ("popularity", "oracle") else "-", marker=".", label=policy,
                    linewidth=2.2 if policy == "gate" else 1.0)
    ticks = list(range(0, len(nights), max(1, len(nights) // 10)))
    ax.set_xticks(ticks, [nights[k]["date"] for k in ticks], rotation=30, fontsize=7)
    ax.set_ylabel("AUC on the day after the night (of the model served)")
    ax.set_title("Replay: what each policy served, judged the next day")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def write_outputs(root: Path, state: dict[str, Any]) -> None:
    (root / "replay.md").write_text(markdown(state))
    picture(state, root / "replay.png")


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"
