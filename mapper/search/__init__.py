"""Search strategies over a mapspace: exhaustive, random, greedy and joint."""
from .exhaustive import Exhaustive, SpaceTooLargeError
from .greedy import Greedy
from .joint import Joint
from .objective import Objective, parse_objective
from .random_search import RandomSearch
from .result import SearchResult

STRATEGIES = ("joint", "greedy", "exhaustive", "random")


def make_strategy(name: str, time_limit: float | None = None, seed: int = 0, samples: int = 200_000,
                  exhaustive_limit: int = 20_000_000, cpsat_seconds: float = 2.0, incumbents: tuple = (),
                  workers: int | None = None):
    if name == "exhaustive":
        return Exhaustive(limit=exhaustive_limit, time_limit=time_limit)
    if name == "random":
        return RandomSearch(samples=samples, seed=seed, time_limit=time_limit)
    if name == "greedy":
        return Greedy(time_limit=time_limit)
    if name == "joint":
        return Joint(time_limit=time_limit, cpsat_seconds=cpsat_seconds, incumbents=incumbents, workers=workers)
    raise ValueError(f"unknown strategy {name!r}")


__all__ = ["Exhaustive", "Greedy", "Joint", "Objective", "RandomSearch", "STRATEGIES", "SearchResult",
           "SpaceTooLargeError", "make_strategy", "parse_objective"]
