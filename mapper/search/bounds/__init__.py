"""Lower bounds on every mapping below a node of the search tree (`search/tree.py`), by which
the joint search drops whole subtrees unpriced and proves its result optimal.

One module per kind of bound, lowest first (each imports only those above it in this list):
- `energy`: what one word costs to move, and how many units one transfer can serve;
- `refetch`: what a node's own decided loops must fetch again (its keepers, its refetches);
- `operand`: what the innermost keepers must serve the compute units, over the splits still open;
- `cells`, `cell_prices`, `candidates`, `innermost`: the innermost level's keep sets, tiles and
  splits enumerated instead of assumed (its cells, what they cost whatever the keeps, its
  choices priced, and the bound per set of parents);
- `latency`: the latency no mapping hides;
- `grid`: the tiles a level can hold, and what a word fetched into it costs;
- `spread`: the traffic into each level as a function of how widely each tensor is shared;
- `link`: per undecided level, the cheapest traffic into it over every tile that fits it;
- `node`: a node's bounds on the objective, the energy and the cycles, from all of the above.
"""
from .grid import link_weight
from .link import LinkBounds, TileBound
from .node import NodeBounds, compute_bound, lower_bound, lower_bounds

__all__ = ["LinkBounds", "NodeBounds", "TileBound", "compute_bound", "link_weight", "lower_bound", "lower_bounds"]
