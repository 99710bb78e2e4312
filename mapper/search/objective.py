"""What a search minimises, and the deterministic order among equally good mappings.

`delay,energy` is Timeloop's priority objective (its mapper's `optimization-metrics: [delay,
energy]`): lexicographic, the fewest cycles first, then the least energy among those. Its score
is the cycles; the energy is the next ranking key, so every strategy that ranks by
`ranking_keys` / `best_row` honours it; the joint search's bounds for it are (cycles, energy)
pairs, compared by `beaten` (a subtree is dropped when its cycles bound is worse, or ties the
incumbent's cycles while its energy bound is worse).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..cost import Costs
from ..errors import SpecError
from ..mapping import MappingTable
from ..spec import Arch

KINDS = ("edp", "energy", "cycles", "bytes", "delay_energy")
LEXICOGRAPHIC = MappingProxyType({"delay,energy": "delay_energy", "cycles,energy": "delay_energy",
                                  "delay+energy": "delay_energy"})       # `+`: where commas separate objectives (sweep)
SLACK = 1e-9        # relative: bounds and scores are sums of the same terms in other orders
TIE = 1e-12         # relative: a cycles bound this close below the incumbent's ties it (rounding)


@dataclass(frozen=True)
class Objective:
    kind: str = "edp"
    level: int | None = None          # for `bytes`: the level whose traffic counts
    level_name: str = ""

    @property
    def name(self) -> str:
        if self.kind == "delay_energy":
            return "delay,energy"
        return f"bytes:{self.level_name}" if self.kind == "bytes" else self.kind

    @property
    def lexicographic(self) -> bool:
        """Bounds are (cycles, energy) pairs rather than one number."""
        return self.kind == "delay_energy"

    def score(self, costs: Costs) -> np.ndarray:
        if self.kind == "energy":
            return costs.energy_pj
        if self.kind in ("cycles", "delay_energy"):      # delay,energy: energy breaks ties (ranking_keys)
            return costs.cycles
        if self.kind == "edp":
            return costs.energy_pj * costs.cycles
        return costs.level_traffic[self.level].astype(float)


def parse_objective(text: str, arch: Arch) -> Objective:
    """`edp`, `energy`, `cycles`, `delay,energy` (lexicographic: cycles, then energy) or
    `bytes:LEVEL` (bytes moved through that level)."""
    text = LEXICOGRAPHIC.get(text.replace(" ", ""), text)
    kind, _, level = text.partition(":")
    if kind not in KINDS or (kind == "bytes") != bool(level):
        raise SpecError("--objective", "", f"expected edp, energy, cycles, delay,energy or bytes:LEVEL, "
                        f"got {text!r}")
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


def table_of_key(key: tuple, like: MappingTable) -> MappingTable:
    """The one mapping whose ranking key is `key` (its content keys are the whole mapping),
    shaped as `like`'s rows: how the workers of a walk on several cores pass mappings."""
    content = np.asarray(key[3:], dtype=np.int64)
    arrays, start = [], 0
    for array in (like.factors, like.order, like.keep, like.stages):
        size = int(np.prod(array.shape[:-1]))
        arrays.append(content[start:start + size].reshape(*array.shape[:-1], 1).astype(array.dtype))
        start += size
    return MappingTable(*arrays)


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


def cost_bound(objective: Objective, energy: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """The objective's bound from bounds on the energy and the cycles (not for `bytes`)."""
    if objective.kind == "energy":
        return energy
    if objective.kind == "cycles":
        return cycles
    if objective.lexicographic:          # delay,energy: (N, 2) pairs, compared by `beaten`
        return np.stack([cycles, energy], axis=-1)
    if objective.kind == "edp":
        return energy * cycles
    raise ValueError(f"no cost bound for objective {objective.name}")


def bound_primary(objective: Objective, bounds: np.ndarray) -> np.ndarray:
    """The part of a bound comparable with a score (a lexicographic bound's cycles)."""
    return bounds[..., 0] if objective.lexicographic else bounds


def bound_order(objective: Objective, bounds: np.ndarray) -> np.ndarray:
    """Most promising first: by the bound, or by cycles then energy for a lexicographic one."""
    if objective.lexicographic:
        return np.lexsort((bounds[:, 1], bounds[:, 0]))
    return np.argsort(bounds, kind="stable")


def beaten(objective: Objective, bounds: np.ndarray, key: tuple | None) -> np.ndarray:
    """Where nothing under a bound can beat the incumbent whose ranking key is `key` (None:
    no incumbent yet). One number: the bound exceeds the score. delay,energy: the cycles bound
    exceeds the incumbent's cycles, or ties them while the energy bound exceeds its energy
    (key[1], the second ranking key)."""
    if key is None:
        return np.zeros(np.shape(bounds)[:-1] if objective.lexicographic else np.shape(bounds), bool)
    if not objective.lexicographic:
        return bounds > key[0] * (1 + SLACK)
    cycles, energy = bounds[..., 0], bounds[..., 1]
    return (cycles > key[0] * (1 + SLACK)) | ((cycles >= key[0] * (1 - TIE)) & (energy > key[1] * (1 + SLACK)))


def outranked(objective: Objective, bounds, prefix: np.ndarray, key: tuple | None) -> np.ndarray:
    """Where every completion of a node ranks after the incumbent even though its objective
    bound may tie the incumbent's score: the bounds on the three leading ranking keys (score,
    energy, cycles) followed by the node's decided content (`prefix`, (P, N): the factors of
    its decided levels, the first entries of the content keys) compare above the incumbent's
    keys, lexicographically. Equally good mappings in another subtree are then never walked
    only to lose the tie on content. It takes equal costs to be computed equal, as they are
    where the same counts meet the same per-access energies."""
    n = prefix.shape[1]
    if key is None:
        return np.zeros(n, bool)
    columns = [bound_primary(objective, bounds.objective), bounds.energy, bounds.cycles, *prefix]
    greater, equal = np.zeros(n, bool), np.ones(n, bool)
    for column, value in zip(columns, key):
        greater |= equal & (column > value)
        equal &= column == value
    return greater
