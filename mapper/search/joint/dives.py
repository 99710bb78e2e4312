"""Sampled dives down the tree, for incumbents: at every level the child of best bound among a
random sample, down to a mapping that is offered. A few dives find a good mapping quickly on
spaces whose walk takes long; the bound it sets prunes the rest of the walk."""
from __future__ import annotations

import time

import numpy as np

from ..context import Budget
from ..objective import beaten, bound_order
from ..result import Incumbent
from ..tree import Nodes
from .neighbourhood import improve
from .parts import Part
from .walk import Walk

SAMPLES = 4_000         # children drawn at each level of a dive, at most


def dive_parts(walk: Walk, parts: list[Part], count: int, share: Budget, polish: bool) -> int:
    """Up to `count` dives, one per part in turn (best bound first) among the parts whose
    bound is below the incumbent, round after round: a part's best mappings are often far
    from another's, and the walk reaches the later parts only after the earlier ones.
    With several parts and `polish`, each dive's mapping is improved by a local search
    inside its part before it is offered: across parts the local search drifts to the keep
    vector of the incumbent, and would never polish a part whose dive does not beat it
    first. Quick dives (no `polish`) only offer what they find. Returns the dives made."""
    setup = walk.setup
    patience = -(-setup.tuning.dive_patience // setup.divers)   # shared among the workers
    with walk.polishing(polish):        # quick dives polish nothing they find: the walk comes next
        if len(parts) == 1:
            walk.use(parts[0])
            return dive(walk, parts[0].roots, -(-count // setup.divers), share,
                        np.random.default_rng(setup.seed + setup.worker), patience=patience)
        return _dive_into_parts(walk, parts, count, share, patience)


def _dive_into_parts(walk: Walk, parts: list[Part], count: int, share: Budget, patience: int) -> int:
    """One dive per part in turn (every workers-th part on several cores), each offered to the
    part's own best first and polished inside its part when the walk polishes."""
    setup = walk.setup
    if walk.polish:     # each costs a local search: fewer in a row that find nothing end them
        patience = min(patience, setup.tuning.polished_dive_patience)
    rngs = [np.random.default_rng(setup.seed + i) for i in range(len(parts))]
    made, fruitless = 0, 0
    while made < count and not share.spent() and not walk.budget.spent():
        eligible = [i for i, p in enumerate(parts)
                    if not beaten(walk.objective, p.first, walk.incumbent.bar)][setup.worker::setup.divers]
        if not eligible:
            break
        for i in eligible[:count - made]:
            if fruitless >= patience or share.spent():
                return made     # the dives have stopped finding better: the walk's turn
            walk.use(parts[i])
            best, polish = walk.incumbent, walk.polish
            local = Incumbent(parts[i].space, walk.objective, walk.context)
            with walk.offering_to(local):
                made += dive(walk, parts[i].roots, 1, share, rngs[i])
            before = best.key
            if local.table is not None:
                if polish:          # the local search is on (`Joint.local_search`)
                    improve(parts[i].space, local, walk.context.budget(setup.tuning.part_polish_seconds),
                            seed=setup.seed, stop=share.spent)
                best.offer(local.table)
            best.evaluated += local.evaluated
            fruitless = 0 if best.key != before else fruitless + 1
    return made


def dive(walk: Walk, roots: Nodes, count: int, share: Budget, rng: np.random.Generator,
         samples: int = SAMPLES, patience: int | None = None) -> int:
    """Up to `count` dives from the roots (fewer when `patience` dives in a row find nothing
    better), each taking at every level the child of best bound among `samples` drawn at
    random, down to a mapping that is offered; every new incumbent is polished by local
    search (when the walk polishes). Returns the dives made."""
    tree = walk.tree
    made, fruitless = 0, 0
    while made < count and not share.spent() and not walk.budget.spent():
        if patience is not None and fruitless >= patience:
            break
        made += 1
        before = walk.incumbent.key
        node = roots.take(np.array([int(rng.integers(len(roots)))]))
        while len(node) and node.depth < tree.leaf_depth and not share.spent():
            total = int(tree.factor_children(node)[0])
            # one loop order per factor choice (the smallest): the dive samples tilings and
            # keeps widely; the local search then tries the other orders of what it finds
            most = walk.pacing.chunk_rows(node.depth + 1)
            draws = min(total, max(1, min(samples, most // tree.expansion(node.depth, True))))
            picks = np.unique(rng.integers(0, total, size=draws))
            started, polished = time.perf_counter(), walk.pacing.polish_seconds
            children = tree.children_at(node, picks, first_order_only=True)
            priced = walk.price(children, force_polish=not share.spent())
            walk.pacing.timed(children, started, polished, len(children))
            if priced is None:
                break
            rows, bounds, _ = priced
            node = children.take(rows[[int(bound_order(walk.objective, bounds.objective)[0])]])
        fruitless = 0 if walk.incumbent.key != before else fruitless + 1
    return made
