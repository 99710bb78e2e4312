"""The joint search's tuning: how it shares its time and sizes its steps.

None of these changes what a finished walk returns (the optimum, ranked as exhaustive search
ranks); they change how fast it gets there and what it holds when stopped early. They are
recorded in every result (`--json`: `search.settings.tuning`). docs/SEARCH.md says what each
trades and docs/RESULTS.md what the bench cases measured.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JointTuning:
    # the coarse start (`coarse.py`, opt-in): a share of the time limit, within bounds, on
    # spaces large enough to need it, keeping a reserve of what is left for the walk
    coarse_share: float = 0.25
    coarse_max_seconds: float = 10.0
    coarse_min_seconds: float = 1.0
    coarse_min_space: float = 2e6           # pruned mappings below which the walk alone is quick
    coarse_reserve_seconds: float = 0.5     # of the seconds left, kept from the coarse search: at
    coarse_reserve_share: float = 0.2       # least this, or this share of them
    # CP-SAT's proposals: skipped with less than this to the command's deadline (beside the
    # time to import OR-Tools, estimated in units of this process's start-up: both scale with
    # the machine's load; docs/RESULTS.md)
    cpsat_min_left_seconds: float = 1.0
    # seconds into the walk before CP-SAT's proposals start: on the bench cases they change no
    # result or proof (docs/RESULTS.md, "Ablations"), and OR-Tools' import and the solve took
    # 0.3-0.45 s of CPU where the walk ended soon after (pe-array 1000^3, energy)
    cpsat_after: float = 5.0
    ortools_import_per_startup: float = 1.5
    # polishing new incumbents by local search
    # after each dive into one keep vector's part: on two cores worker 0 polishes while the
    # other walks, which on most pe-array GEMMs proved the optimum before the first polish
    # ended (1024^3: 304k of the 351k mappings priced were polish at 0.5 s; docs/RESULTS.md)
    part_polish_seconds: float = 0.1
    polish_every: float = 5.0               # seconds between the walk's polishes, at least
    walk_polish_after: float = 2.0          # seconds into the walk before its first polish
    parts_search_after: float = 5.0         # in parts, on several cores or under an evaluation
                                            # budget: seconds into worker 0's walk before its
                                            # local search across parts (it takes a core from
                                            # a walk that often ends first)
    dive_patience: int = 6                  # dives in a row that find nothing better end them
                                            # (shared among the workers of a walk on several cores)
    polished_dive_patience: int = 1         # the same for dives into parts each polished by a
                                            # local search (at most this many, per worker): each
                                            # costs ~20k mappings, and once one finds nothing
                                            # the walk does better (docs/RESULTS.md)
    # the walk's slices
    priced_cells: int = 2_000_000           # factor slots (rows x levels x kinds x dims) priced together
    min_run: int = 8                        # depth-1 nodes of one part walked together, at least
    chunk_seconds: float = 0.2              # wall seconds a chunk may take near a deadline,
    chunk_share: float = 0.25               # or this share of the seconds left, when that is more
    first_chunk: int = 2_000                # rows of the first chunk, before any has been timed,
    assumed_row_seconds: float = 5e-4       # and fewer near the deadline at this rate
    # on several cores (`parallel.py`)
    split_depth: int = 2                    # where the walk is split into units between workers
    claim_batch: int = 16                   # units a worker claims at a time
