"""Tensor-core roles read off an einsum's structure (`roles.py`), and the fragment constraint on
a role several dims share, checked against an independent enumeration."""
from __future__ import annotations

import itertools
import json
import math

import pytest

from mapper.cli import main
from mapper.constraints import Constraints
from mapper.load import arch_from_dict, load_arch, load_workload, workload_from_dict
from mapper.mapspace import Mapspace, counting, sampling
from mapper.roles import RolesError, tensor_core_roles
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.units import Where

W = Where("<test>")
NATIVE = {"m": 16, "n": 8, "k": 16}


def einsum(text: str, sizes: dict) -> object:
    return workload_from_dict({"name": "w", "einsum": text, "sizes": sizes, "dtype": 16}, W)


def named(workload, roles) -> dict:
    return {name: "·".join(workload.dims[d] for d in dims) for name, dims in zip(roles.names, roles.dims)}


@pytest.mark.parametrize("text, expected, batch", [
    ("Z[m,n] += A[m,k] * B[k,n]", {"m": "m", "n": "n", "k": "k"}, ""),
    ("Z[n,m] += B[k,n] * A[m,k]", {"m": "m", "n": "n", "k": "k"}, ""),           # by name, any order
    ("S[h,i,j] += Q[h,i,d] * K[h,j,d]", {"m": "i", "n": "j", "k": "d"}, "h"),      # attention scores
    ("O[h,i,d] += P[h,i,j] * V[h,j,d]", {"m": "i", "n": "d", "k": "j"}, "h"),      # attention values
    ("O[n,k,p,q] += I[n,c,p+r,q+s] * W[k,c,r,s]", {"m": "n·p·q", "n": "k", "k": "c·r·s"}, ""),
    ("O[n,k,p,q] += I[n,c,2*p+r,2*q+s] * W[k,c,r,s]", {"m": "n·p·q", "n": "k", "k": "c·r·s"}, ""),
    ("Y[i,j] += X[i,l] * V[j,l]", {"m": "i", "n": "j", "k": "l"}, ""),
    ("Y[j] += X[l] * V[l,j]", {"m": "", "n": "j", "k": "l"}, ""),                  # a GEMV: m is 1
])
def test_roles_follow_the_einsum(text, expected, batch):
    dims = sorted({c for c in text if c.isalpha() and c.islower()})
    workload = einsum(text, {d: 4 for d in dims})
    roles = tensor_core_roles(workload, NATIVE)
    assert named(workload, roles) == expected
    assert "·".join(workload.dims[d] for d in roles.batch) == batch
    assert roles.by_name == (text.startswith("Z"))


def test_a_dim_named_m_on_the_second_operand_swaps_the_sides():
    workload = einsum("Z[m,j] += B[l,j] * A[m,l]", {"m": 4, "j": 4, "l": 4})
    assert named(workload, tensor_core_roles(workload, NATIVE)) == {"m": "m", "n": "j", "k": "l"}


def test_no_reduction_dim_no_tensor_core_roles():
    with pytest.raises(RolesError, match="reduces over no dim"):
        tensor_core_roles(einsum("Y[i,j] += X[i,j] * V[i,j]", {"i": 4, "j": 4}), NATIVE)
    with pytest.raises(RolesError, match="1 operand"):
        tensor_core_roles(einsum("Y[i] += X[i]", {"i": 4}), NATIVE)
    with pytest.raises(RolesError, match="no dim 'x'"):
        tensor_core_roles(einsum("Y[i,j] += X[i,l] * V[l,j]", {"i": 4, "j": 4, "l": 4}), {"x": 4})


def test_an_elementwise_einsum_on_a_gpu_is_refused_with_what_to_do(tmp_path, capsys):
    path = tmp_path / "add.yaml"
    path.write_text("name: add\neinsum: 'Y[i,j] += X[i,j] * V[i,j]'\nsizes: {i: 64, j: 64}\ndtype: bf16\n")
    assert main(["mapspace", "h100", str(path)]) == 2
    err = capsys.readouterr().err
    assert "compute.native_shape.k" in err and "reduces over no dim" in err and "--mapspace unaligned" in err
    assert main(["mapspace", "h100", str(path), "--mapspace", "unaligned"]) == 0


def small_gpu(native: dict, capacity: str = "unlimited") -> object:
    return arch_from_dict({
        "name": "tiny-gpu", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "max_stages": 1, "energy": {"read": 100, "write": 100, "update": 100},
                    "bandwidth": "8 B/cycle"},
                   {"name": "SMEM", "capacity": capacity, "max_stages": 2, "energy": {"read": 6, "write": 6, "update": 6},
                    "instances": 2, "mesh": [2, 1]},
                   {"name": "RF", "capacity": capacity, "instances": 2, "mesh": [2, 1],
                    "energy": {"read": 1, "write": 1, "update": 1}}],
        "compute": {"mesh": [2, 1], "instances": 2, "energy": 0.5, "native_shape": native}}, W)


CONV = "O[f,p] += I[c,p+r] * W[f,c,r]"           # m = p, n = f, k = c·r (two dims share k)
FRAGMENT = {"m": 1, "n": 2, "k": 4}


def _factor_rows(size: int, slots: int):
    return [f for f in itertools.product(range(1, size + 1), repeat=slots) if math.prod(f) == size]


def test_a_fused_role_admits_exactly_the_innermost_products_that_are_multiples():
    """Independently of the mapspace's masks: the factor combinations of the space are those
    whose innermost tiles meet every role (f a multiple of 2 or whole below it, c x r a
    multiple of 4 or both whole below it) and that fit the fanout."""
    arch, workload = small_gpu(FRAGMENT), einsum(CONV, {"f": 2, "c": 4, "p": 4, "r": 3})
    space = Mapspace(arch, workload, Constraints())
    innermost = len(arch.levels) - 1
    slots = space.slots

    def inner(row):
        return math.prod(f for f, (lv, _) in zip(row, slots) if lv == innermost)

    def fits_fanout(rows):
        for lv in range(len(arch.levels)):
            for axis, limit in zip((1, 2), arch.fanout(lv)):
                if math.prod(f for row in rows for f, slot in zip(row, slots) if slot == (lv, axis)) > limit:
                    return False
        return True

    def meets(need, tile, size):
        return tile % need == 0 or (tile == size and size < need)

    dims = {name: workload.dims.index(name) for name in workload.dims}
    expected = set()
    for combo in itertools.product(*[_factor_rows(size, len(slots)) for size in workload.sizes]):
        tile = {name: inner(combo[d]) for name, d in dims.items()}
        if meets(2, tile["f"], 2) and meets(4, tile["c"] * tile["r"], 12) and fits_fanout(combo):
            expected.add(combo)
    yielded = set()
    for table in sampling.all_tables(space):
        for row in range(len(table)):
            yielded.add(tuple(tuple(int(table.factors[lv, kind, d, row]) for lv, kind in slots)
                              for d in range(len(workload.dims))))
    assert yielded == expected and len(expected) > 10


def test_joint_equals_exhaustive_with_a_fused_role():
    arch, workload = small_gpu(FRAGMENT, "96 B"), einsum(CONV, {"f": 2, "c": 4, "p": 2, "r": 3})
    space = Mapspace(arch, workload, Constraints())
    c, r = workload.dims.index("c"), workload.dims.index("r")
    for goal in ("edp", "energy"):
        objective = parse_objective(goal, arch)
        exact = Exhaustive().run(space, objective)
        joint = Joint().run(space, objective)
        assert joint.optimal and joint.mapping == exact.mapping
        inner = joint.mapping.levels[-1]
        tiles = dict(inner.temporal)
        for d, bound, _ in inner.spatial:
            tiles[d] = tiles.get(d, 1) * bound
        assert (tiles.get(c, 1) * tiles.get(r, 1)) % 4 == 0


def test_a_fused_role_no_tile_can_meet_runs_whole_fragments():
    """k = c·r = 3 x 3: no product of tiles is a multiple of 4, so any is allowed and the unit
    runs whole fragments of it, padding included (an implicit GEMM's ragged last k step)."""
    arch, workload = small_gpu(FRAGMENT), einsum(CONV, {"f": 2, "c": 3, "p": 2, "r": 3})
    space = Mapspace(arch, workload, Constraints())
    best = Exhaustive().run(space, parse_objective("energy", arch))
    inner = {workload.dims[d]: b for d, b in best.mapping.levels[-1].temporal}
    tile = inner.get("c", 1) * inner.get("r", 1)
    assert tile in (1, 3, 9) and best.evaluation.macs_executed == workload.macs // tile * (-(-tile // 4) * 4)
    assert best.evaluation.macs_executed > workload.macs


def test_gpu_attention_and_convolutions_need_no_renaming(capsys):
    assert main(["search", "h100", "attention-qk", "--time-limit", "30", "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["search"]
    assert search["optimal"] and search["mapspace"]["roles"] == "m = i, n = j, k = d (inferred; batch: h)"
    assert main(["mapspace", "h100", "conv-resnet50-conv3"]) == 0
    assert "compute roles: m = n·p·q, n = k, k = c·r·s (inferred)" in capsys.readouterr().out
    space = Mapspace(load_arch("h100"), load_workload("conv-resnet50-conv3"), Constraints())
    assert counting.funnel(space).after["occupancy"] > 0
