"""Hostile inputs, third round (issue 41): the surfaces added since the second round, each cause
found by fuzzing as a test built from the same kind of input.

Every refusal is one stderr line `mapper: error: FILE: KEY: ...` naming the file at fault and
exit status 2; every run ends within its time limit plus a second; nothing raises, hangs or
records an exception as a sweep point. The classes, in the issue's order:
- Timeloop files (`import-timeloop`, `evaluate` on them, `--ert`): NaN and infinities where an
  integer goes, a `split` that is no integer, a `block_size` or `width` of 1e308, a `keep` or
  `bypass` that is no list, a mapping where a name goes (`target`, an ERT action), an attribute
  whose name is no string;
- integers past Python's 4,300-digit text limit (a hex literal), in an op graph, a sweep file
  and a Triton config;
- sweep files and models: a size of '①', a count dividing by zero, a sequence of 2^31 - 1, an
  op-graph preset where one einsum goes, a model file beside the sweep file;
- emit and Triton configs: an op whose einsum is no matmul, a huge num_warps, blocks too large
  for shared memory;
- work bounded before it starts: a long chain, a prime size on a GPU, a dim of 62,773,913, the
  choice of groups in `fuse`.
"""
from __future__ import annotations

import contextlib
import json
import io
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

from mapper.cli import main
from mapper.errors import SpecError
from mapper.units import Where

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parent.parent
V04 = DATA / "timeloop_v04_targets"
TINY_ARCH = DATA / "sweep-tiny-arch.yaml"
TINY_MODEL = DATA / "sweep-tiny-model.yaml"
HUGE_HEX = "0x" + "f" * 5000          # an int of 6,021 digits: Python will not write it as text
GEMM = "Z[m,n] += A[m,k] * B[k,n]"


class _Late(BaseException):
    pass


def _late(signum, frame):
    raise _Late()


def run(argv: list[str], seconds: float = 30.0) -> tuple[int, str, str, float]:
    """(status, stdout, stderr, wall seconds) of the command in this process; a failure (not a
    hang of the test run) when it takes more than `seconds`."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main([str(a) for a in argv])
    except _Late:
        pytest.fail(f"still running after {seconds} s: mapper {' '.join(map(str, argv))}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return status, out.getvalue(), err.getvalue(), time.monotonic() - started


def refused(argv: list[str], path: Path, key: str = "", seconds: float = 30.0) -> str:
    """Assert one line `mapper: error: PATH: KEY...` and exit status 2; the message."""
    status, _, err, _ = run(argv, seconds)
    lines = [line for line in err.splitlines() if not line.startswith("mapper: note:")]
    assert status == 2 and len(lines) == 1, err[-2000:]
    assert lines[0].startswith(f"mapper: error: {path}: {key}"), lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- Timeloop files

def timeloop(tmp_path, arch=None, problem=None, mapping=None, ert=None) -> list[Path]:
    """The v0.4 test design's arch, problem, mapping and ERT in `tmp_path`, each text changed by
    its (old, new) pair."""
    paths = []
    for name, change in (("arch.yaml", arch), ("problem.yaml", problem), ("map_dummy.yaml", mapping),
                         ("ERT.yaml", ert)):
        text = (V04 / name).read_text()
        if change:
            assert change[0] in text, change
            text = text.replace(*change)
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    return paths


def both_commands(tmp_path, files: list[Path], culprit: Path, key: str) -> None:
    """`import-timeloop` and `evaluate --ert` on the same files each refuse them at `key`."""
    arch, problem, mapping, ert = files
    refused(["import-timeloop", arch, problem, mapping, "--ert", ert, "-o", tmp_path / "out"], culprit, key)
    refused(["evaluate", arch, problem, mapping, "--ert", ert, "--json"], culprit, key)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_timeloop_size_that_is_not_finite(tmp_path, value):
    """Classes 1, 2: NaN (ValueError) and infinities (OverflowError) in `yamlio.integer`."""
    files = timeloop(tmp_path, problem=("C: 4,", f"C: {value},"))
    both_commands(tmp_path, files, files[1], "problem.instance.C")


@pytest.mark.parametrize("value, cls", [(".nan", "3"), ("x", "3"), (".inf", "4"), ("-.inf", "4"), ("[1]", "5"),
                                        ("{a: 1}", "5"), ("1.5", "3")])
def test_timeloop_split_that_is_not_an_integer(tmp_path, value, cls):
    """Classes 3, 4, 5: `split` of a spatial directive read by `int()` in `mapping._spatial_loops`
    (ValueError, OverflowError, TypeError)."""
    files = timeloop(tmp_path, mapping=("permutation: KCRP}", f"permutation: KCRP, split: {value}}}"))
    both_commands(tmp_path, files, files[2], "mapping[1].split")


@pytest.mark.parametrize("key, attributes", [("block_size", "depth: 4096, width: 8, datawidth: 8, block_size: 1e308"),
                                             ("width", "depth: 4096, width: 1e308, datawidth: 8")])
def test_timeloop_block_of_1e308_words(tmp_path, key, attributes):
    """Class 6: an OverflowError in `arch._storage_level` (a float of 1e308 made an int, then
    multiplied into a float capacity)."""
    files = timeloop(tmp_path, arch=("{depth: 4096, width: 8, datawidth: 8}", "{" + attributes + "}"))
    both_commands(tmp_path, files, files[0], f"nodes[4].attributes.{key}")


@pytest.mark.parametrize("key, cls", [("keep", "7"), ("bypass", "8")])
@pytest.mark.parametrize("value", ["5", "1.5", "{a: 1}", "true"])
def test_timeloop_keep_or_bypass_that_is_no_list(tmp_path, key, cls, value):
    """Classes 7, 8: `list()` of a non-list in `mapping._read_keep`, once for keep, once for
    bypass (TypeError)."""
    files = timeloop(tmp_path, mapping=("permutation: RCPK}",
                                        f"permutation: RCPK}}\n- {{target: GlobalBuffer, type: datatype, {key}: {value}}}"))
    both_commands(tmp_path, files, files[2], f"mapping[3].{key}")


def test_timeloop_target_that_is_a_mapping(tmp_path):
    """Class 9: an unhashable `target` in `arch.ArchImport.target` (TypeError)."""
    files = timeloop(tmp_path, mapping=("target: GlobalBuffer", "target: {a: 1}"))
    both_commands(tmp_path, files, files[2], "mapping[2].target")


def test_ert_action_named_by_a_mapping(tmp_path):
    """Class 10: an unhashable action name in `ert.read_ert` (TypeError)."""
    files = timeloop(tmp_path, ert=("{name: read, energy: 2.0}", "{name: {a: 1}, energy: 2.0}"))
    both_commands(tmp_path, files, files[3], "ERT.tables[1].actions[0]")


def test_timeloop_attribute_whose_name_is_no_string(tmp_path):
    """Class 11: a non-string attribute name sorted with the others in `arch.translate`
    (TypeError)."""
    files = timeloop(tmp_path, arch=("{depth: 4096,", "{7: 1, depth: 4096,"))
    both_commands(tmp_path, files, files[0], "nodes[4].attributes")


# ----------------------------------------------------------------------------- numbers past 4,300 digits

def test_the_number_rule_writes_a_huge_integer_without_converting_it():
    """Classes 12-14 at their cause: an error message formatting an int Python will not write
    as text. The one validator refuses it, and `shown` / `amount` describe it."""
    from mapper.errors import amount, shown
    from mapper.validate import finite_number, integer
    huge = int(HUGE_HEX, 16)
    with pytest.raises(SpecError, match="a number of about 6,021 digits is above the limit"):
        integer(huge, Where("f.yaml", "k"))
    with pytest.raises(SpecError, match="about 6,021 digits"):
        finite_number(huge, Where("f.yaml", "k"), high=1e9)
    assert shown([1, huge]) == "[1, a number of about 6,021 digits]"
    assert amount(-huge) == "-a number of about 6,021 digits" and amount(2**31) == "2,147,483,648"


def chain(tmp_path, name="chain.yaml", sizes=None, ops=None) -> Path:
    doc = {"name": "c", "sizes": sizes or {"m": 64, "n": 64, "k": 64}, "dtype": "bf16",
           "ops": ops or [{"name": "linear", "einsum": "Z[m,n] += X[m,k] * W[k,n]"},
                          {"name": "act", "kind": "relu", "inputs": ["Z[m,n]"], "output": "R[m,n]"}]}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_fuse_size_past_the_text_limit(tmp_path):
    """Class 12: `validate.positive_int` formatting the op graph's size (fuse)."""
    path = chain(tmp_path)
    path.write_text(path.read_text().replace("m: 64", f"m: {HUGE_HEX}"))
    assert "integer written with 5,002 characters" in refused(["fuse", "toy", path, "--time-limit", "2"], path, "line")


def sweep_file(tmp_path, workloads: list, name="sweep.yaml", **extra) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"archs": [str(TINY_ARCH)], "strategies": ["greedy"], "time_limit": 2,
                                    "workloads": workloads, **extra}, sort_keys=False, allow_unicode=True))
    return path


def sweep(path, tmp_path, *flags) -> list:
    return ["sweep", path, "--jobs", "1", "--quiet", "--db", tmp_path / "r.sqlite", *flags]


def test_sweep_size_past_the_text_limit(tmp_path):
    """Class 13: a sweep file's sizes (`sweep/spec.py`)."""
    path = sweep_file(tmp_path, [{"einsum": GEMM, "sizes": {"m": 4, "n": 4, "k": 4}, "dtype": "int8"}])
    path.write_text(path.read_text().replace("m: 4", f"m: {HUGE_HEX}"))
    refused(sweep(path, tmp_path), path, "line")


@pytest.mark.parametrize("key", ["BLOCK_M", "num_warps"])
def test_triton_config_past_the_text_limit(tmp_path, key):
    """Class 14: `emit.from_config.config_from_dict` formatting a config's value, here from a
    `triton.Config(...)` text (read by `ast.literal_eval`, no YAML reader to stop it)."""
    meta = {"BLOCK_M": "128", "BLOCK_N": "128", "BLOCK_K": "64"}
    warps = HUGE_HEX if key == "num_warps" else "4"
    if key != "num_warps":
        meta[key] = HUGE_HEX
    path = tmp_path / "config.py"
    path.write_text(f"triton.Config({{{', '.join(f'{k!r}: {v}' for k, v in meta.items())}}}, "
                    f"num_stages=3, num_warps={warps})\n")
    assert "about 6,021 digits" in refused(["evaluate", "h100", "gemm-4096", "--from-triton", path], path, key)


# ----------------------------------------------------------------------------- sweep files and models

@pytest.mark.parametrize("value", ["①", "٣", "²", "1,①", "①..8:x2"])
def test_sweep_size_in_digits_int_refuses(tmp_path, value):
    """Class 15: '①' passes `str.isdigit` and fails `int()` in `grid._range_or_int`
    (ValueError); only ASCII digits are read."""
    path = sweep_file(tmp_path, [{"einsum": GEMM, "sizes": {"m": value, "n": 4, "k": 4}, "dtype": "int8"}])
    refused(sweep(path, tmp_path), path, "workloads[0].sizes.m")


@pytest.mark.parametrize("count", ["tokens // 0", "tokens // (batch - batch)", "1+" * 3000 + "1"])
def test_model_count_that_divides_by_zero(tmp_path, count):
    """Class 16: `tokens // 0` in `sweep/expr._eval` (ZeroDivisionError); an expression too
    long for Python's parser (RecursionError) with it."""
    model = yaml.safe_load(TINY_MODEL.read_text())
    model["layers"][0]["count"] = count
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(model, sort_keys=False))
    refused(["sweep", TINY_ARCH, "--model", path, "--jobs", "1", "--quiet", "--db", tmp_path / "r.sqlite",
             "--strategy", "greedy"], path, "layers[0].count")


def test_model_sequence_of_the_largest_count(tmp_path):
    """Class 17: a model `seq` of 2^31 - 1 made the joint points die of a MemoryError in
    `tiles.distinct_offsets` (a set of two billion offsets), stored as failed points. Now
    every point is searched (its words counted in closed form) and none is stored failed."""
    db = tmp_path / "r.sqlite"
    status, out, err, _ = run(["sweep", TINY_ARCH, "--model", TINY_MODEL, "--seq", str(2**31 - 1), "--phase", "prefill",
                               "--strategy", "joint", "--time-limit", "1", "--jobs", "1", "--quiet", "--db", db], 60)
    with sqlite3.connect(db) as con:
        statuses = [s for (s,) in con.execute("SELECT status FROM points")]
    assert statuses and "failed" not in statuses, (statuses, err)


def test_a_point_that_fails_with_an_exception_fails_the_sweep(tmp_path, monkeypatch):
    """Class 17, the exit status: a chain point (a fusion study) stored as `failed` made the
    sweep exit 0; now any point without a result does, unless --keep-going."""
    import mapper.fusion.run as fusion_run

    def broken(*args, **kwargs):
        raise RuntimeError("a bug inside a fusion study")
    monkeypatch.setattr(fusion_run, "fuse", broken)
    model = DATA / "sweep-tiny-chain-model.yaml"
    argv = ["sweep", TINY_ARCH, "--model", model, "--fuse", "--strategy", "greedy", "--time-limit", "2", "--jobs", "1",
            "--quiet", "--db", tmp_path / "r.sqlite"]
    status, out, err, _ = run(argv)
    assert status == 1 and "sweep point(s) found no mapping" in err, (status, err)
    assert run(argv + ["--keep-going"])[0] == 0


def test_op_graph_preset_named_as_a_sweep_workload(tmp_path):
    """Class 18: the error named the preset's own file, not the sweep file and its key. An op
    graph is now a sweep workload of its own (a fusion study); a preset that is neither a
    workload nor an op graph (an architecture) is still refused at the sweep file's key."""
    from mapper.sweep.spec import load_sweep
    path = sweep_file(tmp_path, [{"workload": "chain-gemm-bias-relu"}])
    spec = load_sweep(str(path))
    assert spec.subjects == () and [c.chain.graph.name for c in spec.chains] == ["chain-gemm-bias-relu"]
    path = sweep_file(tmp_path, [{"workload": "toy"}])
    message = refused(sweep(path, tmp_path), path, "workloads[0].workload")
    assert "'toy'" in message


def test_model_file_beside_the_sweep_file(tmp_path, monkeypatch):
    """Class 19: a sweep file's `model:` named by its bare file name is looked for beside it,
    as docs/SPECS.md says of every file a sweep names."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "my-model.yaml").write_text(TINY_MODEL.read_text())
    (folder / "my-arch.yaml").write_text(TINY_ARCH.read_text())
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({"archs": ["my-arch.yaml"], "strategies": ["greedy"], "time_limit": 5,
                                    "workloads": [{"model": "my-model.yaml", "phase": "decode"}]}))
    monkeypatch.chdir(tmp_path)             # not the sweep file's folder
    status, out, err, _ = run(["sweep", "study/sweep.yaml", "--jobs", "1", "--quiet", "--db", "r.sqlite"])
    assert status == 0, err
    assert "tiny-model-decode" in out


# ----------------------------------------------------------------------------- emit and Triton configs

@pytest.mark.parametrize("backend", ["triton", "cutlass"])
def test_emit_an_op_whose_einsum_is_no_matmul(tmp_path, backend):
    """Class 20: `emit/common._operand_order` raised StopIteration on an op of one operand whose
    dims are named m, n, k (roles read by name). In an op graph the group is skipped with a
    note; alone the workload is refused, naming its file."""
    graph = chain(tmp_path, ops=[{"name": "one", "einsum": "Z[m,n] += A[m,n,k]"}])
    status, out, err, _ = run(["emit", "h100", graph, "--to", backend, "--time-limit", "3"])
    assert status == 0 and "group one skipped" in err and "no two operands" in err, err
    single = tmp_path / "one.yaml"
    single.write_text(yaml.safe_dump({"name": "one", "einsum": "Z[m,n] += A[m,n,k]",
                                      "sizes": {"m": 64, "n": 64, "k": 64}, "dtype": "bf16"}))
    assert "no two operands" in refused(["emit", "h100", single, "--to", backend, "--time-limit", "3"], single)


@pytest.mark.parametrize("warps", [2**62, 10**30, 33])
def test_triton_config_with_a_huge_num_warps(tmp_path, warps):
    """Class 21: `warp_split` scanned every count up to num_warps (a hang at 2^62); a block
    holds at most 32 warps."""
    path = tmp_path / "config.yaml"
    path.write_text(f"BLOCK_M: 128\nBLOCK_N: 128\nBLOCK_K: 32\nnum_stages: 2\nnum_warps: {warps}\n")
    assert "above the limit 32" in refused(["evaluate", "h100", "gemm-4096", "--from-triton", path], path,
                                           "num_warps", seconds=10)


def test_triton_config_too_large_for_shared_memory(tmp_path):
    """Class 22: refused as `triton config: SMEM: ...`, naming neither the file nor its keys."""
    path = tmp_path / "config.yaml"
    path.write_text("BLOCK_M: 4096\nBLOCK_N: 4096\nBLOCK_K: 256\nnum_stages: 4\nnum_warps: 4\n")
    message = refused(["evaluate", "h100", "gemm-4096", "--from-triton", path], path, "BLOCK_M, BLOCK_N, BLOCK_K")
    assert "SMEM" in message and "capacity" in message


# ----------------------------------------------------------------------------- work bounded before it starts

def test_fuse_on_a_long_chain(tmp_path):
    """Class 23: `fuse` on a 2,000-op elementwise chain ran on far past its limit
    (`fusion/groups.py`: every group priced, each a walk of the whole graph); refused."""
    ops = [{"name": f"o{i}", "kind": "relu", "inputs": [f"T{i}[m,n]"], "output": f"T{i + 1}[m,n]"} for i in range(2000)]
    path = chain(tmp_path, sizes={"m": 64, "n": 64}, ops=ops)
    assert "above the limit of 64" in refused(["fuse", "toy", path, "--time-limit", "2"], path, "ops", seconds=20)


def test_fuse_with_a_prime_size_on_a_gpu(tmp_path):
    """Class 24: a prime of 999,983 on h100 (a masked tail: 1.7 million splits of its padded
    extents) built its tables in `mapspace/tables.level_view` for seconds past a 2-s limit; now
    refused for want of time before anything is built, saying what limit would do. (On the
    mma.sync model of H100, whose shared memory fans out to 4 sub-partitions: more slots, more
    splits, than the wgmma preset's one warpgroup per SM.)"""
    from presets_sync import H100_SYNC
    path = chain(tmp_path, sizes={"m": 999_983, "n": 64, "k": 64})
    status, _, err, wall = run(["fuse", H100_SYNC, path, "--time-limit", "2"])
    assert status == 2 and "ways to split" in err and "give a time limit of" in err, err
    assert wall < 3.0


def test_bounds_cut_short_once_the_deadline_passed():
    """Class 25: the same space's bounds (`bounds/split_floor._split_vectors`, the window
    steps) ran to the end past the deadline; now each not yet computed is a trivial one."""
    from mapper.load import load_arch, load_constraints, load_workload
    from mapper.mapspace import Mapspace
    from mapper.search.bounds import LinkBounds
    workload = load_workload("gemm-4096")
    space = Mapspace(load_arch("h100"), workload, load_constraints(None))
    calls = []

    def past():
        calls.append(1)
        return True
    links = LinkBounds(space, give_up=past)
    assert calls and all(bound.least is None and bound.whole == 0.0 for bound in links.energy[1:])
    assert links._split_floor(1) is None
    # the innermost level's bound, computed lazily as the walk needs it: 0 (the weakest) per node
    import numpy as np
    from mapper.mapspace import sampling
    nodes = sampling.sample(space, 200, np.random.default_rng(0))
    deepest = [np.zeros(len(nodes), np.int64) for _ in workload.tensors]
    assert len(nodes) and links.innermost.enabled and (links.innermost.bound(0, nodes, deepest) == 0).all()


def test_joint_search_of_a_dim_of_62773913(tmp_path):
    """Class 26: m = 62,773,913 on toy: `tiles.py` built the set of 62 million offsets, then a
    lookup as long as the dim per bound; the search ran 10 s past a 2-s limit."""
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "einsum": GEMM, "sizes": {"m": 62_773_913, "n": 64, "k": 64},
                                    "dtype": "bf16"}))
    status, out, err, wall = run(["search", "toy", path, "--time-limit", "2", "--json"])
    assert status == 0, err
    assert wall < 3.0


def test_fuse_choice_of_groups_within_the_time_limit(tmp_path):
    """Class 27: `fuse` ended seconds past its limit: the CP-SAT choice of groups ran its own 10
    s after the searches, over every connected group (combinatorially many around a tensor
    many ops read). Now it solves until the deadline, and a graph of too many groups takes
    the dynamic programme's choice."""
    star = [{"name": "p", "kind": "relu", "inputs": ["X[m,n]"], "output": "T[m,n]"}]
    star += [{"name": f"o{i}", "kind": "relu", "inputs": ["T[m,n]"], "output": f"U{i}[m,n]"} for i in range(60)]
    path = chain(tmp_path, sizes={"m": 64, "n": 64}, ops=star)
    status, out, err, wall = run(["fuse", "toy", path, "--time-limit", "1", "--json"])
    assert status == 0, err
    assert wall < 2.0


def test_fuse_cover_solves_until_the_deadline(tmp_path, monkeypatch):
    """Class 27, the other half: CP-SAT's choice of groups took its own 10 s whatever the time
    limit left; now its wall-clock stop is at most what is left before the searches' deadline
    (its budget is in CP-SAT's deterministic time, the same whatever the load)."""
    import mapper.fusion.run as fusion_run
    asked = []
    original = fusion_run.best_cover

    def spy(grouper, n, *args, **kwargs):
        asked.append(kwargs["wall_seconds"])
        return original(grouper, n, *args, **kwargs)
    monkeypatch.setattr(fusion_run, "best_cover", spy)
    status, _, err, wall = run(["fuse", "toy", chain(tmp_path), "--time-limit", "1"])
    assert status == 0, err
    assert asked and max(asked) <= 1.0 and wall < 2.0


SWS = DATA / "timeloop_format" / "simple_weight_stationary"


def test_every_choice_of_a_factor_row_is_bounded():
    """Time limits that hold: one step of the joint search expanded a factor row (the
    incumbent's in the local search, CP-SAT's proposals) into every keep set, stage count and
    order at every level; on a Timeloop design searching bypass at five levels (32,768 keep and
    stage combinations, each built in Python) one row took 19 s. Now a bounded draw of them."""
    from mapper.inputs import search_inputs
    from mapper.mapping import to_table
    from mapper.mapspace import Mapspace
    from mapper.search import make_strategy, parse_objective
    from mapper.search.context import SearchContext
    from mapper.search.joint.neighbourhood import CHOICE_LIMIT, every_choice
    import numpy as np
    found = search_inputs(str(SWS / "arch.yaml"), str(SWS / "problem.yaml"), ert=str(SWS / "ERT.yaml"))
    space = Mapspace(found.arch, found.workload, found.constraints)
    mapping = make_strategy("greedy", {}).run(space, parse_objective("edp", space.arch), SearchContext(time_limit=2)).mapping
    factors = to_table([mapping], space.n_dims, len(space.workload.tensors)).factors
    started = time.monotonic()
    table = every_choice(space, factors, np.random.default_rng(0))
    assert time.monotonic() - started < 2.0 and 0 < len(table) <= CHOICE_LIMIT


@pytest.mark.slow
def test_joint_search_with_bypass_searched_at_every_level_holds_its_limit():
    """The same through the command: a 4-s search ended after 17 s."""
    status, _, err, wall = run(["search", SWS / "arch.yaml", SWS / "problem.yaml", "--ert", SWS / "ERT.yaml",
                                "--time-limit", "4", "--json"], 60)
    assert status == 0, err
    assert wall < 5.0


# ----------------------------------------------------------------------------- found by this round's own fuzz run

@pytest.mark.parametrize("backend", ["mlir", "triton"])
def test_a_bias_of_one_input(tmp_path, backend):
    """emit's epilogue check read a bias's second input (IndexError in `emit/chain`): a bias
    is refused by the op-graph loader unless it reads two tensors, the data and the vector."""
    path = chain(tmp_path, ops=[{"name": "linear", "einsum": "Z[m,n] += X[m,k] * W[k,n]"},
                                {"name": "bias", "kind": "bias", "inputs": ["Z[m,n]"], "output": "Y[m,n]"}])
    refused(["emit", "h100", path, "--to", backend, "--time-limit", "2"], path, "ops[1].inputs")


def test_a_capacity_curve_counts_each_space_within_its_limit(tmp_path):
    """Each capacity's clock started after its space was counted (exactly: 2.7 s for this
    small conv on toy), so four points of a 0.5-s limit took 10 s; the count now stops, as a
    search's does, once the point's limit is reached."""
    conv = yaml.safe_load((ROOT / "workloads" / "conv-alexnet-conv3.yaml").read_text())
    conv["sizes"] = {"n": 1, "k": 8, "c": 4, "p": 4, "q": 4, "r": 3, "s": 3}
    path = tmp_path / "conv.yaml"
    path.write_text(yaml.safe_dump(conv, sort_keys=False))
    status, out, err, wall = run(["explain", "toy", path, "--capacity", "RegisterFile",
                                  "--capacities", "16B..128B:x2", "--time-limit", "0.5", "--json"])
    assert status == 0, err
    assert len(json.loads(out)["points"]) == 4 and wall < 4 * 0.5 + 3.0
