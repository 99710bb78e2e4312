"""The link bounds split by how many instances a tile keeps busy (`bounds.link.UnitsBound`):
small tiles are what many busy SMs need, and they move more. Checked bin by bin against
the traffic of sampled mappings, and shown to bind where it matters (a 7-dim convolution on
h100, whose SMs fetch their own copies: no multicast from L2)."""
from __future__ import annotations

import numpy as np
import pytest

from mapper import evaluate_many, load_arch, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace, sampling
from mapper.search.bounds import LinkBounds

SMEM = 2        # h100's per-SM level; L2 (level 1) alone feeds it


def _space(workload):
    return Mapspace(load_arch("h100"), load_workload(workload), load_constraints("default"))


@pytest.mark.parametrize("workload, draws", [("gemm-512", 3000), ("conv-resnet50-conv1", 40_000),
                                             ("attention-qk", 20_000)])
def test_each_bin_is_below_the_traffic_of_every_mapping_in_it(workload, draws):
    """A mapping keeping b SMs busy, with shared-memory tile t and s stages, draws from L2 at
    least the bound of the bin holding b, over the tiles within t, at s stages (a strided
    7-dim convolution with a fused role, attention with a batch dim, a GEMM)."""
    space = _space(workload)
    links = LinkBounds(space)
    sample = sampling.sample(space, draws, np.random.default_rng(3))
    assert len(sample) > 100
    costs = evaluate_many(space.arch, space.workload, sample)
    tensors = space.workload.tensors
    l2 = space.arch.levels[1]
    drawn = sum((costs.level_updates if t.is_output else costs.level_reads)[1, i] * l2.word_bytes(t)
                for i, t in enumerate(tensors)) * costs.level_instances[1]
    busy = sample.factors[:SMEM, 1:].prod(axis=(0, 1, 2))       # spatial factors above SMEM
    spans = sample.factors[SMEM:].prod(axis=(0, 1))              # the tile SMEM holds
    assert (sample.keep[SMEM] == True).all()                     # noqa: E712 (the bound's premise)
    checked = 0
    for stages, bound in links.sent_bytes[SMEM]:
        rows = np.flatnonzero(sample.stages[SMEM] == stages)
        for low, (high, tiles) in zip([0] + [h for h, _ in bound.bins[:-1]], bound.bins):
            inside = rows[(busy[rows] > low) & (busy[rows] <= high)]
            if len(inside):
                assert (drawn[inside] >= tiles.below(spans[:, inside]) * (1 - 1e-9)).all(), (stages, high)
                checked += len(inside)
    assert checked == len(sample)


def test_many_busy_sms_cost_more_traffic_on_a_convolution():
    """ResNet-50 conv3 on h100: the least traffic into shared memory over tiles that can keep
    every SM busy is well above the least over all tiles (each SM fetches its own copy of the
    weights its neighbours also use), and the bins only grow with the SMs they allow. No split
    keeps more than 128 SMs at work (p and q split only as 1 or 7, so that m = p.q tiles of a
    multiple of 16 fit in their regions): the bins stop there (`split_floor`)."""
    links = LinkBounds(_space("conv-resnet50-conv3"))
    spans = np.array([[1, 128, 128, 28, 28, 3, 3]]).T          # the whole problem: every tile allowed
    for _, bound in links.sent_bytes[SMEM]:
        least = [float(np.atleast_1d(tiles.below(spans))[0]) for _, tiles in bound.bins]
        assert least == sorted(least)
    one_stage = links.sent_bytes[SMEM][0][1]
    least = [float(np.atleast_1d(tiles.below(spans))[0]) for _, tiles in one_stage.bins]
    assert one_stage.bins[-1][0] == 128 and least[-1] > 2.5 * least[0]
