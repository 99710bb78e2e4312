"""The capacity curve (`explain --capacity`): each point the search's proven least outer
traffic at that capacity, equal to exhaustive search's; never rising with capacity; its
regimes and thresholds read off its own points; the square-root law on a 4096^3 GEMM; bad
flags refused in one line."""
import json
import math

import pytest

from mapper.cli import main
from mapper.errors import SpecError
from mapper.explain.capacity_curve import arch_with_capacity, capacity_curve, curve_level
from mapper.load import load_arch, load_workload, workload_from_dict
from mapper.mapspace import Mapspace, counting
from mapper.search import Exhaustive, SearchContext, parse_objective
from mapper.units import Where, parse_byte_grid

TWO_LEVEL = "tests/data/two-level-arch.yaml"
TINY = "tests/data/sweep-tiny-arch.yaml"        # DRAM / a 64 B buffer / 2 x 2 register files


def einsum(text, sizes, name="w"):
    return workload_from_dict({"name": name, "einsum": text, "sizes": sizes, "dtype": "int8",
                               "dtypes": {"Z": "int16"}}, Where("test"))


SMALL = {   # small spaces, so that exhaustive search is quick at every capacity
    "gemm": ("Z[m,n] += A[m,k] * B[k,n]", {"m": 8, "n": 12, "k": 16}),
    "gemv": ("Z[m] += A[m,k] * B[k]", {"m": 16, "k": 24}),
    "conv1d": ("Z[k,p] += A[c,p+r] * B[k,c,r]", {"k": 4, "c": 4, "p": 8, "r": 3}),
}


def least_traffic_exhaustively(arch, workload, level, capacity, outer=0):
    """Exhaustive search's least outer traffic with `level`'s capacity set: the ground truth."""
    derived = arch_with_capacity(arch, level, capacity)
    result = Exhaustive().run(Mapspace(derived, workload), parse_objective(f"bytes:{arch.level_names[outer]}",
                                                                           derived), SearchContext())
    return result.score


SLOW_ON_TINY = pytest.mark.slow      # 3-5 s each: the register files' mesh widens the space
CASES = [pytest.param(TWO_LEVEL, "Buffer", shape, id=f"two-level-{shape}") for shape in SMALL] + [
    pytest.param(TINY, "Buf", shape, id=f"tiny-{shape}", marks=() if shape == "gemv" else SLOW_ON_TINY)
    for shape in SMALL]


@pytest.mark.parametrize("arch_path,level,shape", CASES)
def test_each_point_is_the_exhaustive_optimum_and_the_curve_never_rises(arch_path, level, shape):
    arch, workload = load_arch(arch_path), einsum(*SMALL[shape], name=shape)
    curve = capacity_curve(arch, workload, None, level, time_limit=None)
    assert len(curve.points) >= 3
    lv = curve_level(arch, level)
    for point in curve.points:
        assert point.proven
        assert point.outer_bytes == least_traffic_exhaustively(arch, workload, lv, point.capacity)
    traffic = [p.outer_bytes for p in curve.points]
    assert all(later <= earlier for earlier, later in zip(traffic, traffic[1:]))
    assert min(traffic) >= curve.compulsory_bytes * (1 - 1e-12)
    for capacity in curve.infeasible:       # said to fit nothing: nothing does
        assert not counting.funnel(Mapspace(arch_with_capacity(arch, lv, capacity), workload)).after["capacity"]


def test_the_previous_optimum_carries_forward_even_when_the_search_is_cut_short():
    # one mapping priced per point: without the previous point's mapping as an incumbent the
    # points would be whatever the first look found, rising and falling
    arch, workload = load_arch(TWO_LEVEL), load_workload("gemm-1024")
    curve = capacity_curve(arch, workload, None, "Buffer", max_evaluations=1, options={"cpsat_seconds": 0})
    traffic = [p.outer_bytes for p in curve.points]
    assert all(later <= earlier for earlier, later in zip(traffic, traffic[1:]))


def test_regimes_and_thresholds_follow_from_the_points():
    arch, workload = load_arch(TWO_LEVEL), einsum(*SMALL["gemm"])
    curve = capacity_curve(arch, workload, None, "Buffer", time_limit=None)
    points = curve.points
    floor = curve.compulsory_bytes
    for p in points:
        at_floor = math.isclose(p.outer_bytes, floor, rel_tol=1e-9)
        assert (p.regime == "compulsory") == at_floor
    sizes = {t.what: t for t in curve.thresholds}
    assert sizes["working set"].size_bytes == floor == sum(t.size_bytes for w, t in sizes.items() if w != "working set")
    for t in curve.thresholds:
        if t.what == "working set" or t.capacity is None:
            continue
        i = [p.capacity for p in points].index(t.capacity)
        # from its threshold on, the tensor moves its size; just below, more (unless from the start)
        assert all(math.isclose(p.tensor_bytes[t.what], t.size_bytes) for p in points[i:])
        assert t.from_start == (i == 0)
        if i:
            assert points[i - 1].tensor_bytes[t.what] > t.size_bytes
    assert points[-1].regime == "compulsory"        # the default grid reaches the working set


def test_gemm_4096_matches_exhaustive_and_follows_the_square_root_law_before_its_threshold():
    arch, workload = load_arch(TWO_LEVEL), load_workload("gemm-4096")
    curve = capacity_curve(arch, workload, None, "Buffer", time_limit=None)
    by_capacity = {p.capacity: p for p in curve.points}
    for capacity in (2.0**16, 2.0**20, 2.0**24, 2.0**27):
        assert by_capacity[capacity].outer_bytes == least_traffic_exhaustively(arch, workload, 1, capacity)
    continuous = [p for p in curve.points if p.regime == "continuous"]
    assert len(continuous) >= 6 and continuous[-1].capacity < min(
        p.capacity for p in curve.points if p.regime != "continuous")
    # traffic x sqrt(S) stays within 30% over a 256x range of capacities (16x in traffic)
    products = [p.outer_bytes * math.sqrt(p.capacity) for p in continuous]
    assert max(products) / min(products) < 1.3
    assert continuous[0].outer_bytes / continuous[-1].outer_bytes > 8
    assert curve.points[-1].outer_bytes == curve.compulsory_bytes


@pytest.mark.parametrize("argv,flag,words", [
    (["--capacity", "Nowhere"], "--capacity", "no level 'Nowhere'"),
    (["--capacity", "DRAM"], "--capacity", "outermost"),
    (["--capacity", "Buffer", "--capacities", "0..8MiB:x2"], "--capacities", "> 0"),
    (["--capacity", "Buffer", "--capacities=-64KiB"], "--capacities", "'-64KiB'"),
    (["--capacity", "Buffer", "--capacities", "8KiB..1KiB:x2"], "--capacities", "below the start"),
    (["--capacity", "Buffer", "--capacities", "1KiB..1MiB"], "--capacities", ":x2"),
    (["--capacities", "1KiB..1MiB:x2"], "--capacities", "needs --capacity"),
])
def test_bad_capacity_flags_are_one_line_naming_the_flag(capsys, argv, flag, words):
    assert main(["explain", TWO_LEVEL, "gemm-256", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mapper: error: {flag}") and words in lines[0], lines
    assert captured.out == ""


def test_the_command_prints_the_table_json_and_plot(capsys, tmp_path):
    args = ["explain", TWO_LEVEL, "gemm-256", "--capacity", "Buffer", "--capacities", "1KiB..256KiB:x4"]
    assert main(args + ["--json", "--plot", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["capacity_bytes"] for p in out["points"]] == [1024 * 4**i for i in range(5)]
    assert out["outer"] == "DRAM" and out["objective"] == "bytes:DRAM"
    assert all(p["proven"] for p in out["points"]) and len(out["plots"]) == 1
    assert (tmp_path / out["plots"][0].rsplit("/", 1)[-1]).stat().st_size > 10_000
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Buffer capacity" in text and "working set" in text and "compulsory floor" in text


def test_the_capacity_grid_reads_sizes_and_geometric_ranges():
    where = Where("--capacities")
    assert parse_byte_grid("8KiB..64KiB:x2", where) == (8192, 16384, 32768, 65536)
    assert parse_byte_grid("1MiB, 64KiB,64KiB", where) == (65536, 2**20)
    with pytest.raises(SpecError, match="more than 64"):
        parse_byte_grid("1..1TiB:x2,1..3:x2,5..1TiB:x2", where)
