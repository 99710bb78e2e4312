"""What a search minimises, and the deterministic order among equally good mappings."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import Costs
from ..errors import SpecError
from ..mapping import MappingTable
from ..spec import Arch

KINDS = ("edp", "energy", "cycles", "bytes")


@dataclass(frozen=True)
class Objective:
    kind: str = "edp"
    level: int | None = None          # for `bytes`: the level whose traffic counts
    level_name: str = ""

    @property
    def name(self) -> str:
        return f"bytes:{self.level_name}" if self.kind == "bytes" else self.kind

    def score(self, costs: Costs) -> np.ndarray:
        if self.kind == "energy":
            return costs.energy_pj
        if self.kind == "cycles":
            return costs.cycles
        if self.kind == "edp":
            return costs.energy_pj * costs.cycles
        return costs.level_traffic[self.level].astype(float)


def parse_objective(text: str, arch: Arch) -> Objective:
    """`edp`, `energy`, `cycles` or `bytes:LEVEL` (bytes moved through that level)."""
    kind, _, level = text.partition(":")
    if kind not in KINDS or (kind == "bytes") != bool(level):
        raise SpecError("--objective", "", f"expected edp, energy, cycles or bytes:LEVEL, got {text!r}")
    if kind != "bytes":
        return Objective(kind)
    if level not in arch.level_names:
        raise SpecError("--objective", "", f"no level {level!r} (levels: {', '.join(arch.level_names)})")
    return Objective("bytes", arch.level_names.index(level), level)


def ranking_keys(objective: Objective, costs: Costs, table: MappingTable) -> list[np.ndarray]:
    """Sort keys, most significant first: objective, energy, cycles, then the mapping's own
    contents, so that equally good mappings are ordered the same way by every strategy."""
    content = [table.factors.reshape(-1, len(table)), table.order.reshape(-1, len(table)),
               table.keep.reshape(-1, len(table)).astype(np.int64), table.stages]
    return [objective.score(costs), costs.energy_pj, costs.cycles] + [row for block in content for row in block]


def best_row(objective: Objective, costs: Costs, table: MappingTable, mask=None) -> int | None:
    """Index of the best valid row, or None. Only the rows with the smallest score are
    ranked by the remaining keys (the score is the first key)."""
    valid = costs.valid if mask is None else costs.valid & mask
    rows = np.flatnonzero(valid)
    if not len(rows):
        return None
    score = objective.score(costs)[rows]
    rows = rows[score == score.min()]
    if len(rows) == 1:
        return int(rows[0])
    keys = [k[rows] for k in ranking_keys(objective, costs, table)]
    return int(rows[np.lexsort(keys[::-1])[0]])


def key_of(objective: Objective, costs: Costs, table: MappingTable, row: int) -> tuple:
    return tuple(k[row].item() for k in ranking_keys(objective, costs, table))
