"""Search strategies over a mapspace: exhaustive, random, greedy and joint.

Each strategy is a frozen dataclass of its options with `run(space, objective, context)`; the
`SearchContext` carries what bounds the run (time limit, evaluation budget, clock, rows priced,
Ctrl-C). `make_strategy` builds one by name and refuses an option it does not take.

Inside this package, lowest first (each module imports only those before it): `context`,
`objective`, `events`, `result`, `tree`, `fitting_children`, `warm`, `bounds/`, then the
strategies `exhaustive`, `random_search`, `greedy` and `joint/` (which starts from greedy).
docs/SEARCH.md describes the design.
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ..errors import SpecError
from .context import Budget, SearchContext, StopReason
from .events import Event
from .exhaustive import Exhaustive, SpaceTooLargeError
from .greedy import Greedy
from .joint import Joint, JointTuning
from .objective import Objective, parse_objective
from .random_search import RandomSearch
from .result import SearchResult

REGISTRY = MappingProxyType({"joint": Joint, "greedy": Greedy, "exhaustive": Exhaustive, "random": RandomSearch})
STRATEGIES = tuple(REGISTRY)


def strategy_options(name: str) -> tuple[str, ...]:
    """The options strategy `name` takes (its fields but its name)."""
    return tuple(f.name for f in dataclasses.fields(REGISTRY[name]) if f.name != "name")


def make_strategy(name: str, options: dict | None = None, where: str = "strategy", label=None):
    """The strategy `name` with `options` (a dict of its fields); a `SpecError` at `where`,
    naming the option (as `label(option)` shows it, when given), for an unknown strategy or an
    option it does not take: an option silently dropped would change nothing while the user
    believes it did."""
    if name not in REGISTRY:
        raise SpecError(where, "strategy", f"expected one of {', '.join(STRATEGIES)}, got {name!r}")
    options = dict(options or {})
    accepted = strategy_options(name)
    for option in options:
        if option not in accepted:
            others = [other for other in STRATEGIES if option in strategy_options(other)]
            raise SpecError(where, (label(option) if label else None) or option,
                            f"the {name} strategy does not take this option"
                            + (f" ({' and '.join(others)} {'does' if len(others) == 1 else 'do'})"
                               if others else ""))
    return REGISTRY[name](**options)


__all__ = ["Budget", "Event", "Exhaustive", "Greedy", "Joint", "JointTuning", "Objective", "RandomSearch",
           "REGISTRY", "STRATEGIES", "SearchContext", "SearchResult", "SpaceTooLargeError", "StopReason",
           "make_strategy", "parse_objective", "strategy_options"]
