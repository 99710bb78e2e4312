"""The joint search (`Joint`): branch and bound over every level at once, proving its optimum.

One module per part, each importing only those before it:
- `settings`: the tuning (`JointTuning`), recorded in every result;
- `parallel`: what forked workers share (claims of the walk's units, the best key);
- `synced`: the best key exchanged at counted points, on a work clock;
- `neighbourhood`: the local search around an incumbent;
- `parts`: the tree cut into parts, one per keep vector, each with its root bounds;
- `cut`: what rules out children before they are priced, and a worker's share of them;
- `walk`: the branch and bound's walk, best bound first, depth first (`Walk`, `WalkSetup`);
- `workers`: the walk run by forked workers at once;
- `dives`: sampled dives down the tree, for incumbents;
- `coarse`: the same search on a smaller shape, its answer carried back;
- `cpsat`: CP-SAT's proposals (the only module that imports OR-Tools);
- `incumbents`: where the walk's incumbents come from besides the walk;
- `strategy`: `Joint`, which runs them in order, on one core or several.
"""
from .settings import JointTuning
from .strategy import Joint

__all__ = ["Joint", "JointTuning"]
