"""The chain's lower bound on outermost-level traffic, in the spirit of Orojenesis (Huang et al.,
"Mind the Gap: Attainable Data Movement and Operational Intensity Bounds for Tensor Algorithms",
ISCA 2024): no schedule of the graph, fused or not, moves fewer bytes at the outermost level
than every graph input (the first activations and every weight) read once plus every result
written once. Intermediates are taken as free, which tile-level fusion attains only while the
tiles they live in fit at the fusion level; `fits_on_chip` says, per intermediate, whether the
whole tensor would also fit there (all instances together), the threshold beyond which even
unfused kernels could keep it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..opgraph import OpGraph
from ..spec import Arch


@dataclass(frozen=True)
class ChainBound:
    outer_bytes: float                       # the bound
    inputs_bytes: float
    outputs_bytes: float
    fits_on_chip: tuple[tuple[str, bool], ...]


def chain_bound(arch: Arch, graph: OpGraph, level: int) -> ChainBound:
    inputs = sum(graph.tensor(t).bytes for t in graph.inputs)
    outputs = sum(graph.tensor(t).bytes for t in graph.outputs)
    on_chip = arch.levels[level].capacity * arch.levels[level].instances
    fits = tuple((t, graph.tensor(t).bytes <= on_chip) for t in graph.intermediates)
    return ChainBound(inputs + outputs, inputs, outputs, fits)
