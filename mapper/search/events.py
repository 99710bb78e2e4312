"""What a search records about its own run, as data: one frozen event per thing that happened.

`SearchResult.events` holds them in order. Programs read their fields (the sweep takes the warm
start's score from `WarmStart.score`); `text()` is the line a person reads in the report, and
`as_json()` the object `--json` prints (`{"event": kind, ...fields}`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import ClassVar, Literal

from .context import StopReason


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"

    def text(self) -> str:
        raise NotImplementedError

    def as_json(self) -> dict:
        out = {"event": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.as_json() if isinstance(value, Event) else (
                asdict(value) if isinstance(value, StopReason) else value)
        return out


def _score(value: float) -> str:
    return f"{value:.6g}"


@dataclass(frozen=True)
class WarmStart(Event):
    """The joint search started from this mapping's score: greedy's, or where a level is split
    into sub-levels the proven best with each of its tensors at one depth (`depths.merged`)."""
    score: float
    source: str = "greedy"
    kind: ClassVar[str] = "warm_start"

    def text(self) -> str:
        return f"warm start ({self.source}): {_score(self.score)}"


@dataclass(frozen=True)
class NoWarmStart(Event):
    reason: str
    kind: ClassVar[str] = "no_warm_start"

    def text(self) -> str:
        return f"no warm start: {self.reason}"


@dataclass(frozen=True)
class GivenIncumbents(Event):
    """Mappings given from outside (`--warm-start`, a sweep's neighbours): how many lie in the
    space, and the best score they brought (None: none beat the incumbent)."""
    given: int
    admitted: int
    best: float | None
    kind: ClassVar[str] = "given_incumbents"

    def text(self) -> str:
        best = "" if self.best is None else f"; best {_score(self.best)}"
        return f"{self.admitted} of {self.given} given incumbent(s) lie in the space{best}"


@dataclass(frozen=True)
class InParts(Event):
    """The tree was walked in parts, one per keep vector (`joint/parts.py`)."""
    parts: int
    smallest_bound: float
    kind: ClassVar[str] = "in_parts"

    def text(self) -> str:
        return (f"walked in {self.parts} parts, one per keep vector (`joint/parts.py`); "
                f"smallest root bound {_score(self.smallest_bound)}")


@dataclass(frozen=True)
class CpsatProposed(Event):
    tilings: int
    priced: int
    improved_to: float | None       # the new incumbent's score, None when none beat it
    kind: ClassVar[str] = "cpsat_proposed"

    def text(self) -> str:
        outcome = ("none beat the incumbent" if self.improved_to is None
                   else f"improved the incumbent to {_score(self.improved_to)}")
        return f"CP-SAT proposed {self.tilings} tilings ({self.priced} mappings priced); {outcome}"


@dataclass(frozen=True)
class CpsatSkipped(Event):
    reason: Literal["import", "no OR-Tools", "padded extents", "walk ended", "walk ended first"]
    kind: ClassVar[str] = "cpsat_skipped"

    def text(self) -> str:
        if self.reason == "import":
            return "CP-SAT proposals skipped: importing OR-Tools left too little time"
        if self.reason == "no OR-Tools":
            return "CP-SAT proposals skipped: OR-Tools is not installed (the walk proves without them)"
        if self.reason == "padded extents":
            return "CP-SAT proposals skipped (padded extents)"
        if self.reason == "walk ended first":
            return "CP-SAT proposals not started: the walk ended before they were due"
        return "CP-SAT stopped: the walk ended before it answered"


@dataclass(frozen=True)
class Dives(Event):
    """Sampled dives down the tree for incumbents; quick ones polish nothing they find."""
    made: int
    quick: bool
    before: float
    after: float
    kind: ClassVar[str] = "dives"

    def text(self) -> str:
        return (f"{self.made} {'quick ' if self.quick else ''}sampled dive(s): "
                f"{_score(self.before)} -> {_score(self.after)}")


@dataclass(frozen=True)
class LocalSearch(Event):
    rounds: int
    before: float
    after: float
    kind: ClassVar[str] = "local_search"

    def text(self) -> str:
        return f"local search: {self.rounds} improving round(s), {_score(self.before)} -> {_score(self.after)}"


@dataclass(frozen=True)
class CoarseStart(Event):
    """The same search on a smaller shape, its answer carried back (`joint/coarse.py`)."""
    outcome: Literal["no shape", "failed", "out of time", "does not carry", "carried"]
    shape: str = ""
    best: float | None = None       # the smaller shape's best score
    carried: float | None = None    # the incumbent it gave here, None when it did not beat it
    detail: str = ""                # why it failed
    kind: ClassVar[str] = "coarse_start"

    def text(self) -> str:
        head = f"coarse shape {self.shape}"
        if self.outcome == "no shape":
            return "no coarse shape (no dim shrinks, or the smaller shape has no mapping)"
        if self.outcome == "failed":
            return f"{head}: {self.detail}"
        if self.outcome == "out of time":
            return f"{head}: best {_score(self.best)}, not carried (out of time)"
        if self.outcome == "does not carry":
            return f"{head}: its best mapping does not carry over to this shape"
        carried = (f"; carried here: {_score(self.carried)}" if self.carried is not None
                   else "; carried here it does not beat the incumbent")
        return f"{head}: best {_score(self.best)}{carried}"


@dataclass(frozen=True)
class InParallel(Event):
    workers: int
    counted: bool = False       # on a work clock: units fixed by counts and hash, keys exchanged at counted points
    started: bool = True        # the others walked (on a work clock only once worker 0 had walked alone
    alone: int = 0              # for `alone` mappings; where its walk ended first, they never did)
    kind: ClassVar[str] = "in_parallel"

    def text(self) -> str:
        if self.counted and not self.started:
            others = "the other process" if self.workers == 2 else f"the other {self.workers - 1} processes"
            return (f"searched by one process: its walk ended within the first {self.alone:,} mappings, which it "
                    f"walks alone, and {others} never started (`joint/synced.py`)")
        if self.counted:
            return (f"searched by {self.workers} processes, the first alone for {self.alone:,} mappings, then each "
                    "walking the units of the tree fixed for it by counts and hashes, their best mappings "
                    "exchanged at counted points (`joint/synced.py`)")
        return (f"searched on {self.workers} cores, each walking the units of the tree it claimed first "
                "(`joint/parallel.py`)")


@dataclass(frozen=True)
class WorkerFailed(Event):
    worker: int
    error: str
    kind: ClassVar[str] = "worker_failed"

    def text(self) -> str:
        return f"worker {self.worker} failed ({self.error}); its share was walked here"


@dataclass(frozen=True)
class FromWorker(Event):
    """An event (`record`) of another worker of a search on several cores."""
    worker: int
    record: Event
    kind: ClassVar[str] = "from_worker"

    def text(self) -> str:
        return f"worker {self.worker}: {self.record.text()}"


@dataclass(frozen=True)
class StoppedEarly(Event):
    """The joint search's walk was stopped; its bound covers what it left unexplored (`proven`:
    that bound meets the score)."""
    by: StopReason
    proven: bool
    kind: ClassVar[str] = "stopped_early"

    def text(self) -> str:
        return (f"stopped by {self.by.text()}; the bound covers what was left unexplored"
                + ("; it meets the score, so the value is optimal (equally good "
                   "mappings were not all ranked)" if self.proven else ""))


@dataclass(frozen=True)
class NotCovered(Event):
    """Exhaustive search was stopped before it covered the space."""
    by: StopReason
    kind: ClassVar[str] = "not_covered"

    def text(self) -> str:
        return f"stopped by {self.by.text()} before covering the space"


@dataclass(frozen=True)
class RandomFallback(Event):
    """The budget ended before the search reached a valid mapping: the result is the best of
    random draws (`before`: what it had not reached)."""
    by: StopReason
    before: Literal["tree", "batch"]
    kind: ClassVar[str] = "random_fallback"

    def text(self) -> str:
        reached = "the tree reached a mapping" if self.before == "tree" else "any batch held a valid mapping"
        return f"{self.by.text()} ended the search before {reached}; the result is the best of random draws"


@dataclass(frozen=True)
class GreedyRule(Event):
    kind: ClassVar[str] = "greedy_rule"

    def text(self) -> str:
        return ("top-down: every tensor kept where it fits, the largest spatial split, then the fewest "
                "bytes into the next level, then the largest tile, one level at a time")


@dataclass(frozen=True)
class Backtracked(Event):
    dead_ends: int
    kind: ClassVar[str] = "backtracked"

    def text(self) -> str:
        return (f"{self.dead_ends} dead end(s) below a choice made it take the next choice "
                "of the level above")


@dataclass(frozen=True)
class Hurried(Event):
    """Greedy's budget ran out at `level`: it took the best choice priced so far there and a
    quick look at each level below."""
    by: StopReason
    level: str
    kind: ClassVar[str] = "hurried"

    def text(self) -> str:
        return (f"{self.by.text()} cut the search at level {self.level}: it took the best "
                "choice priced so far there and a quick look at each level below")


@dataclass(frozen=True)
class Draws(Event):
    drawn: int
    valid: int
    kind: ClassVar[str] = "draws"

    def text(self) -> str:
        return f"{self.drawn:,} draws, {self.valid:,} valid"


@dataclass(frozen=True)
class Interrupted(Event):
    kind: ClassVar[str] = "interrupted"

    def text(self) -> str:
        return "interrupted (Ctrl-C): the best mapping found so far"
