"""The accelerator check's members rows: a grid's members as one vmapped step against the
compiled step in turn (bench/throughput_tables/members.py), at batch 128.

The goal on a GPU: 32 VTFN-GRU members reach at least 10x one member's examples/s. Each
row notes both modes, the faster one and, for more than one member, its gain over the
model's one-member row.
"""

from __future__ import annotations

import functools

from bench.accelerator.rows import Recorder
from bench.cases.catalogue import CaseSizes
from bench.throughput_tables.members import MIN_SECONDS, member_row

# Model -> the member counts its rows time (1 first: the gains are read against it).
MEMBER_ROWS = {"VTFN-GRU": (1, 8, 32), "VTFN-BOW": (1, 32), "I2CE-paper-scale": (1, 32)}
TOY_MEMBER_ROWS = {"VTFN-GRU": (1, 4)}
MEMBER_ROUNDS = 3


def members(rec: Recorder, sizes: CaseSizes, toy: bool, share: float) -> None:
    """One row per model and member count, each ending by ``share`` of the budget."""
    one_member: dict[str, float] = {}

    def measure(name: str, count: int) -> dict:
        size = "demo" if toy else "paper"
        row = member_row(name, size, sizes, count, MEMBER_ROUNDS, MIN_SECONDS)
        vmapped = row["packed_examples_per_second"]
        best = max(vmapped or 0.0, row["sequential_examples_per_second"])
        if count == 1:
            one_member[name] = row["sequential_examples_per_second"]
        gain = f", {best / one_member[name]:.1f}x one member" if name in one_member else ""
        shown = "does not fit" if vmapped is None else f"{vmapped:,.0f} ex/s"
        ratio = "" if vmapped is None else f" ({row['vmapped_over_in_turn']:.2f}x)"
        note = (
            f"vmapped {shown}, in turn {row['sequential_examples_per_second']:,.0f} ex/s: "
            f"{row['mode']}{ratio}{gain if count > 1 else ''}"
        )
        return {**row, "throughput": best, "unit": "examples/s", "note": note}

    for name, counts in (TOY_MEMBER_ROWS if toy else MEMBER_ROWS).items():
        for count in counts:
            rec.row(
                f"{name} members x{count}",
                "float32",
                functools.partial(measure, name, count),
                kind="members",
                share=share,
                batch=128,
                members=count,
            )
