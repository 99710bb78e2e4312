"""The brute-force simulator (tests/brute_force.py) against Timeloop's own figures.

tests/data/timeloop_cases.yaml holds Timeloop runs (problem, architecture, mapping and the
per-level, per-dataspace access counts Timeloop reported). Each case is converted to the
simulator's plain-data input and every reads / fills / updates per instance and every utilized
instance count must match exactly. A few small hand-computed cases follow.
"""

import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from brute_force import simulate  # noqa: E402

CASES_FILE = Path(__file__).parent / "data" / "timeloop_cases.yaml"
CASES = yaml.safe_load(CASES_FILE.read_text())["cases"]


# ----------------------------------------------------------------------------------------------
# Converting a Timeloop case


def parse_index(text):
    """'R + P' -> {'R': 1, 'P': 1}; '2*P + R' -> {'P': 2, 'R': 1}."""
    axis = {}
    for term in text.split("+"):
        match = re.fullmatch(r"\s*(?:(\d+)\s*\*\s*)?([A-Za-z_]\w*)\s*", term)
        assert match, f"cannot parse index {text!r}"
        axis[match.group(2)] = axis.get(match.group(2), 0) + int(match.group(1) or 1)
    return axis


def convert(case):
    """(problem, nest, compute_fanout) for simulate() from one Timeloop case."""
    problem = {
        "dims": dict(case["problem"]["instance"]),
        "tensors": {ds["name"]: {"axes": [parse_index(ix) for ix in ds["index"]],
                                 "output": bool(ds["read_write"])}
                    for ds in case["problem"]["data_spaces"]},
    }
    arch = {level["name"]: level for level in case["architecture"]}
    nest = []
    for entry in case["mapping_nest_outer_to_inner"]:
        temporal = [(l["dim"], l["bound"]) for l in entry["loops"] if l["type"] == "temporal"]
        spatial = [(l["dim"], l["bound"], l["type"][-1]) for l in entry["loops"]
                   if l["type"] in ("spatial_x", "spatial_y")]
        assert len(temporal) + len(spatial) == len(entry["loops"])
        if arch[entry["level"]]["class"] == "dummy_storage":
            # A dummy level keeps nothing: its fanout belongs to the level above it.
            assert not entry["keeps"] and not temporal and nest
            nest[-1]["spatial"] += spatial
            continue
        nest.append({"name": entry["level"], "temporal": temporal, "spatial": spatial,
                     "keep": set(entry["keeps"])})

    def mesh(level):
        x = level.get("meshX") or level["instances"]
        return x, level["instances"] // x

    compute = case["architecture"][-1]
    innermost = arch[nest[-1]["name"]]
    fanout = tuple(c // s for c, s in zip(mesh(compute), mesh(innermost)))
    return problem, nest, fanout


def timeloop_counts(case):
    """{(level, dataspace): (utilized instances, reads, fills, updates)} as Timeloop reported."""
    counts = {}
    for level in case["stats_per_level_inner_to_outer"]:
        if level["kind"] != "storage":
            continue
        for name, ds in level["dataspaces"].items():
            counts[level["level"], name] = (ds["utilized_instances"], ds["reads_per_instance"],
                                            ds["fills_per_instance"], ds["updates_per_instance"])
    return counts


def simulated_counts(result):
    counts = {}
    for level, stats in result["levels"].items():
        for name, c in stats["tensors"].items():
            counts[level, name] = (stats["instances"], c["reads"], c["fills"], c["updates"])
    return counts


SLOW_MACS = 10**6      # a brute-force run of more MACs takes tens of seconds: the slow run only


@pytest.mark.parametrize("case", [
    pytest.param(case, id=case["id"], marks=[pytest.mark.slow] * (
        case["stats_per_level_inner_to_outer"][0]["computes_total"] > SLOW_MACS)) for case in CASES])
def test_matches_timeloop(case):
    problem, nest, fanout = convert(case)
    result = simulate(problem, nest, fanout)
    compute = case["stats_per_level_inner_to_outer"][0]
    assert compute["kind"] == "compute"
    assert result["macs"] == compute["computes_total"]
    assert simulated_counts(result) == timeloop_counts(case)


# ----------------------------------------------------------------------------------------------
# Hand-computed cases


GEMM = {"A": {"axes": [{"m": 1}, {"k": 1}], "output": False},
        "B": {"axes": [{"k": 1}, {"n": 1}], "output": False},
        "Z": {"axes": [{"m": 1}, {"n": 1}], "output": True}}


def counts(result, level, tensor):
    c = result["levels"][level]["tensors"][tensor]
    return c["reads"], c["fills"], c["updates"]


def test_one_level_gemm():
    # m=4, k=2, n=3: 24 MACs, each reading one A and one B word and updating one Z word.
    problem = {"dims": {"m": 4, "k": 2, "n": 3}, "tensors": GEMM}
    nest = [{"name": "Buf", "temporal": [("m", 4), ("n", 3), ("k", 2)], "spatial": [],
             "keep": {"A", "B", "Z"}}]
    result = simulate(problem, nest)
    assert result["macs"] == 24
    assert result["levels"]["Buf"]["instances"] == 1
    assert counts(result, "Buf", "A") == (24, 0, 0)
    assert counts(result, "Buf", "B") == (24, 0, 0)
    # 12 outputs: 24 updates, the first write of each element needs no read.
    assert counts(result, "Buf", "Z") == (24 - 12, 0, 24)


def test_multicast_across_spatial_dim_not_indexing_tensor():
    # GLB fans n=2 out to two PEs. A[m,k] does not depend on n, so both PEs fetch the same A
    # tile in the same step: one GLB read serves both. B and Z depend on n: no multicast.
    problem = {"dims": {"m": 2, "k": 3, "n": 2}, "tensors": GEMM}
    nest = [{"name": "GLB", "temporal": [("m", 2)], "spatial": [("n", 2, "x")],
             "keep": {"A", "B", "Z"}},
            {"name": "PE", "temporal": [("k", 3)], "spatial": [], "keep": {"A", "B", "Z"}}]
    result = simulate(problem, nest)
    assert result["levels"]["PE"]["instances"] == 2
    # Each PE: A tile = 1 x 3 (row m), fetched once per m -> 6 words; B tile = 3 x 1 (its
    # column), the same for both m -> 3 words; Z tile = 1 word per m -> 2 words, no refetch.
    assert counts(result, "PE", "A") == (6, 6, 0)
    assert counts(result, "PE", "B") == (6, 3, 0)
    assert counts(result, "PE", "Z") == (6 - 2, 0, 6)
    # GLB: A requests identical across the two PEs -> 6 reads, not 12. B requests differ -> 6.
    assert counts(result, "GLB", "A") == (6, 0, 0)
    assert counts(result, "GLB", "B") == (6, 0, 0)
    # Z: each PE writes back its 1-word tile per m, different elements -> 4 updates, 4 distinct.
    assert counts(result, "GLB", "Z") == (0, 0, 4)


def test_spatial_reduction():
    # GLB fans k=2 out to two PEs; Z[m,n] does not depend on k, so both PEs write back the same
    # Z tile in the same step: it is reduced on the way up and arrives as one update.
    problem = {"dims": {"m": 2, "k": 2, "n": 3}, "tensors": GEMM}
    nest = [{"name": "GLB", "temporal": [("m", 2)], "spatial": [("k", 2, "y")],
             "keep": {"A", "B", "Z"}},
            {"name": "PE", "temporal": [("n", 3)], "spatial": [], "keep": {"A", "B", "Z"}}]
    result = simulate(problem, nest)
    assert result["levels"]["PE"]["instances"] == 2
    # Each PE holds a 1 x 3 Z row per m: 6 words fetched, 6 distinct -> no fills; 6 MACs.
    assert counts(result, "PE", "Z") == (6 - 6, 0, 6)
    # GLB receives 3 words per m (reduced across the two PEs), all 6 distinct -> no reads.
    assert counts(result, "GLB", "Z") == (0, 0, 6)
    # B[k,n]: each PE has its own k, the whole n range: 3 words, once.
    assert counts(result, "PE", "B") == (6, 3, 0)
    assert counts(result, "GLB", "B") == (6, 0, 0)


def test_spatial_reduction_at_the_macs():
    # One buffer fanning k=4 out to 4 MAC units: each step the 4 units update the same Z
    # element, reduced to one update.
    problem = {"dims": {"m": 3, "k": 4, "n": 1}, "tensors": GEMM}
    nest = [{"name": "Buf", "temporal": [("m", 3)], "spatial": [("k", 4, "x")],
             "keep": {"A", "B", "Z"}}]
    result = simulate(problem, nest, compute_fanout=(4, 1))
    assert result["macs"] == 12
    assert counts(result, "Buf", "Z") == (0, 0, 3)
    assert counts(result, "Buf", "A") == (12, 0, 0)   # 4 distinct A[m, k] per step
    assert counts(result, "Buf", "B") == (12, 0, 0)   # B[k, 0] differ by k -> 4 per step


def test_strided_window_counts_holes():
    # O[p] += I[2*p + r] * W[r], p=4, r=2. The inner buffer holds, per p step, I[2p .. 2p+1]
    # (2 words); consecutive windows do not overlap, so every step is a whole new tile.
    problem = {"dims": {"p": 4, "r": 2},
               "tensors": {"I": {"axes": [{"p": 2, "r": 1}], "output": False},
                           "W": {"axes": [{"r": 1}], "output": False},
                           "O": {"axes": [{"p": 1}], "output": True}}}
    nest = [{"name": "Mem", "temporal": [("p", 4)], "spatial": [], "keep": {"I", "W", "O"}},
            {"name": "Buf", "temporal": [("r", 2)], "spatial": [], "keep": {"I", "W", "O"}}]
    result = simulate(problem, nest)
    assert counts(result, "Buf", "I") == (8, 8, 0)
    assert counts(result, "Mem", "I") == (8, 0, 0)
    # Now p is inner (tile at Buf = I[2*0+r .. 2*3+r] = 7 words with 3 holes) and r outer.
    nest = [{"name": "Mem", "temporal": [("r", 2)], "spatial": [], "keep": {"I", "W", "O"}},
            {"name": "Buf", "temporal": [("p", 4)], "spatial": [], "keep": {"I", "W", "O"}}]
    result = simulate(problem, nest)
    # r=0: box [0, 6] (7 words, holes at 1, 3, 5); r=1: box [1, 7], slid by +1 -> 1 new word.
    assert counts(result, "Buf", "I") == (8, 8, 0)
    assert counts(result, "Mem", "I") == (8, 0, 0)
    # The 8 MACs read 8 words out of the buffer; W[r] is 1 word per r step.
    assert counts(result, "Buf", "W") == (8, 2, 0)


def test_window_jumping_back_refetches_whole_tile():
    # O[k,p] += I[p + r] * W[k,r] with k outer, r middle, p inner (p=4 in the buffer).
    # Per k: r = 0, 1, 2 slides the 4-word window forward (4 + 1 + 1 words); when k steps and
    # r wraps to 0 the window jumps back by 2: a change of direction refetches all 4 words.
    problem = {"dims": {"k": 2, "r": 3, "p": 4},
               "tensors": {"I": {"axes": [{"p": 1, "r": 1}], "output": False},
                           "W": {"axes": [{"k": 1}, {"r": 1}], "output": False},
                           "O": {"axes": [{"k": 1}, {"p": 1}], "output": True}}}
    nest = [{"name": "Mem", "temporal": [("k", 2), ("r", 3)], "spatial": [],
             "keep": {"I", "W", "O"}},
            {"name": "Buf", "temporal": [("p", 4)], "spatial": [], "keep": {"I", "W", "O"}}]
    result = simulate(problem, nest)
    assert counts(result, "Buf", "I") == (24, 12, 0)
    assert counts(result, "Mem", "I") == (12, 0, 0)
    # O: the 1 x 4 tile for k=0 stays for r = 0..2, then k=1: 8 words, 8 distinct.
    assert counts(result, "Buf", "O") == (24 - 8, 0, 24)
    assert counts(result, "Mem", "O") == (0, 0, 8)


def test_partial_sum_refetch():
    # k outermost, m inner: each Z element is visited twice (k = 0, 1) with other elements in
    # between, so the buffer evicts partial sums and fetches them back.
    problem = {"dims": {"m": 3, "k": 2, "n": 1}, "tensors": GEMM}
    nest = [{"name": "Mem", "temporal": [("k", 2), ("m", 3)], "spatial": [],
             "keep": {"A", "B", "Z"}},
            {"name": "Buf", "temporal": [], "spatial": [], "keep": {"Z"}}]
    result = simulate(problem, nest)
    # Buf: 6 one-word tiles fetched, 3 distinct -> 3 fills; 6 MAC updates, 3 first writes.
    assert counts(result, "Buf", "Z") == (3, 3, 6)
    # Mem: 6 write-backs from Buf, 3 distinct elements -> 3 read-modify-writes.
    assert counts(result, "Mem", "Z") == (3, 0, 6)
    # A and B bypass Buf: the MACs read them from Mem directly.
    assert counts(result, "Mem", "A") == (6, 0, 0)
    assert set(result["levels"]["Buf"]["tensors"]) == {"Z"}


def test_rejects_bad_factorisation():
    problem = {"dims": {"m": 4, "k": 2, "n": 1}, "tensors": GEMM}
    nest = [{"name": "Buf", "temporal": [("m", 2), ("k", 2)], "spatial": [],
             "keep": {"A", "B", "Z"}}]
    with pytest.raises(ValueError):
        simulate(problem, nest)
