"""CP-SAT's proposals under a wall-clock limit start only once the walk has gone on for
`cpsat_after` (`joint/strategy.py`, `Deferred.run_later`): a walk that proves the optimum
sooner never starts them, and a longer one still gets them, without changing the optimum."""
from mapper.mapspace import Mapspace
from mapper.search import Exhaustive, Joint, JointTuning, SearchContext, parse_objective

from test_mapspace import gemm, small_arch


def _search(cpsat_after: float):
    arch = small_arch(capacity="96 B", rf="8 B")
    space = Mapspace(arch, gemm(8, 4, 4), None)
    objective = parse_objective("edp", arch)
    joint = Joint(workers=1, local_search=False, dives=0, cpsat_seconds=1.0,
                  tuning=JointTuning(cpsat_after=cpsat_after))
    return space, objective, joint.run(space, objective, SearchContext(time_limit=60))


def test_a_walk_that_proves_before_cpsat_is_due_never_starts_it():
    space, objective, result = _search(cpsat_after=60.0)
    kinds = {event.kind: event for event in result.events}
    assert result.optimal and result.score == Exhaustive().run(space, objective).score
    assert "cpsat_proposed" not in kinds
    assert kinds["cpsat_skipped"].reason == "walk ended first"


def test_cpsat_due_at_once_proposes_from_inside_the_walk():
    space, objective, result = _search(cpsat_after=0.0)
    kinds = {event.kind: event for event in result.events}
    assert result.optimal and result.score == Exhaustive().run(space, objective).score
    # started between the walk's slices: it answered, or the walk ended first and cancelled it
    assert "cpsat_proposed" in kinds or kinds["cpsat_skipped"].reason == "walk ended"


def test_without_or_tools_the_walk_proves_alone(monkeypatch):
    """A checkout run where OR-Tools is not installed (a GPU machine's image): CP-SAT is skipped
    with that reason, not a traceback, and the walk still proves the optimum."""
    import sys
    for name in ["ortools"] + [name for name in sys.modules if name.startswith("ortools.")]:
        monkeypatch.setitem(sys.modules, name, None)            # `import ortools...` raises
    monkeypatch.delitem(sys.modules, "mapper.search.joint.cpsat", raising=False)
    space, objective, result = _search(cpsat_after=0.0)
    kinds = {event.kind: event for event in result.events}
    assert result.optimal and result.score == Exhaustive().run(space, objective).score
    assert kinds["cpsat_skipped"].reason == "no OR-Tools"
    assert "not installed" in kinds["cpsat_skipped"].text()
