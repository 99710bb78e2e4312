"""Specs are strict where a typo would mislead, and sizes beyond the tool's limits are refused
up front with the limit named (docs/SPECS.md, mapper/limits.py, mapper/bind.py)."""
from __future__ import annotations

import contextlib
import io
import time

import pytest
import yaml

from mapper.cli import main
from mapper.errors import SpecError
from mapper.units import Where, parse_bandwidth, parse_bytes

from test_hostile_input import ARCH, MAPPING, MAPSPACE, WORKLOAD

W = Where("f.yaml", "k")


@pytest.mark.parametrize("text, expected", [
    ("64 KiB", 65536), ("64 KB", 64000), ("64 kB", 64000), ("512 Kib", 65536), ("8 b", 1), ("8 bits", 1),
    ("3 bytes", 3), ("1 MiB", 2**20), ("1 Mb", 125000), ("2 GB", 2e9), (64, 64), ("64", 64),
])
def test_sizes_b_is_a_bit_and_B_a_byte(text, expected):
    assert parse_bytes(text, W) == expected


@pytest.mark.parametrize("text, per_cycle", [
    ("100 Gb/s", 12.5), ("100 GB/s", 100), ("64 B/cycle", 64), ("64 b/cycle", 8), ("8 Kib/s", 1024 / 1e9),
])
def test_bandwidths(text, per_cycle):
    assert parse_bandwidth(text, W, clock_hz=1e9) == pytest.approx(per_cycle)


@pytest.mark.parametrize("text", ["64 mb", "64 mB", "64 kib/s", "64 KIB", "64 KiBytes", "64 XB", "1e400 B",
                                  "-1 B", "0 B", ".nan", float("nan"), float("inf"), 2.0**61])
def test_ambiguous_or_impossible_sizes_are_refused(text):
    with pytest.raises(SpecError) as info:
        parse_bytes(text, W)
    assert str(info.value).startswith("f.yaml: k: ")


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, err.getvalue().strip()


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def changed(base, edit):
    doc = yaml.safe_load(yaml.safe_dump(base))
    edit(doc)
    return doc


def expect_refusal(argv, *fragments):
    start = time.perf_counter()
    status, err = run(argv)
    assert time.perf_counter() - start < 5
    assert status == 2 and len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, err


def test_a_tensor_or_role_in_keeps_the_workload_lacks(tmp_path):
    workload, mapping = write(tmp_path, "w.yaml", WORKLOAD), write(tmp_path, "m.yaml", MAPPING)
    for wrong in (["A", "Zz"], ["outptu"]):
        arch = write(tmp_path, "a.yaml", changed(ARCH, lambda d: d["levels"][1].update(keeps=wrong)))
        hint = "roles: output, input, weight" if wrong == ["outptu"] else "tensors: Z, A, B"
        expect_refusal(["evaluate", arch, workload, mapping], f"{arch}: levels[1].keeps: no tensor", hint)
        expect_refusal(["mapspace", arch, workload], f"{arch}: levels[1].keeps", hint)
    # a role is the workload's tensor playing it (here Z): a mapping keeping more there is refused
    arch = write(tmp_path, "a.yaml", changed(ARCH, lambda d: d["levels"][1].update(keeps=["output"])))
    expect_refusal(["evaluate", arch, workload, mapping], f"{mapping}: mapping[1].keep", "it keeps: Z")


def test_native_shape_dims_the_workload_lacks(tmp_path):
    arch = write(tmp_path, "a.yaml", changed(ARCH, lambda d: d["compute"].update(native_shape={"m": 16, "x": 8})))
    workload = write(tmp_path, "w.yaml", WORKLOAD)
    expect_refusal(["mapspace", arch, workload], f"{arch}: compute.native_shape.x", "align_to_native: false")
    relaxed = write(tmp_path, "ms.yaml", {"name": "relaxed", "align_to_native": False})
    assert run(["mapspace", arch, workload, "--mapspace", relaxed])[0] == 0


@pytest.mark.parametrize("edit, fragments", [
    (lambda d: d["levels"].update(GlobalBufer=d["levels"].pop("GlobalBuffer")), ["levels.GlobalBufer", "no level"]),
    (lambda d: d["levels"]["innermost"].update(keep=["A", "Q"]), ["levels.innermost.keep", "no tensor 'Q'"]),
    (lambda d: d["levels"]["innermost"].update(stationary="outptu"), ["levels.innermost.stationary"]),
    (lambda d: d["levels"]["GlobalBuffer"].update(order=["m", "n"]), ["levels.GlobalBuffer.order", "every dim once"]),
    (lambda d: d["levels"]["GlobalBuffer"]["temporal"].update(kk=4), ["levels.GlobalBuffer.temporal", "no dim 'kk'"]),
])
def test_mapspace_files_name_real_levels_dims_and_tensors(tmp_path, edit, fragments):
    arch, workload = write(tmp_path, "a.yaml", ARCH), write(tmp_path, "w.yaml", WORKLOAD)
    mapspace = write(tmp_path, "ms.yaml", changed(MAPSPACE, edit))
    expect_refusal(["mapspace", arch, workload, "--mapspace", mapspace], f"{mapspace}: ", *fragments)


def test_duplicate_keys_are_refused(tmp_path):
    text = yaml.safe_dump(WORKLOAD, sort_keys=False).replace("sizes:", "dtype: int16\nsizes:")
    workload = write(tmp_path, "w.yaml", text)
    expect_refusal(["mapspace", write(tmp_path, "a.yaml", ARCH), workload], f"{workload}: line ",
                   "'dtype' appears twice")


@pytest.mark.parametrize("edit, fragments", [
    (lambda d: d["sizes"].update(m=2**64), ["sizes.m", "limit 2,147,483,647"]),
    (lambda d: d["sizes"].update(m=2**31 - 1, n=2**31 - 1, k=2**31 - 1), ["sizes", "2^53"]),
    (lambda d: d.update(einsum="Z[a,b,c,d,e] += A[a,b,c,d,e,f,g,h,i]", dtype="int8", dtypes={},
                        sizes={x: 2 for x in "abcdefghi"}), ["sizes", "9 dims, above the limit of 8"]),
    (lambda d: d["sizes"].update(m=2**30), ["sizes.m", "ways to split", "2,000,000"]),
])
def test_sizes_beyond_the_limits_are_refused_up_front(tmp_path, edit, fragments):
    def deeper(d):         # seven levels: eight loop slots with the spatial pair
        d["levels"][1:1] = [{"name": f"L{i}", "capacity": f"{2 ** (30 - i)} B"} for i in range(4)]
    arch = write(tmp_path, "a.yaml", changed(ARCH, deeper))
    workload = write(tmp_path, "w.yaml", changed(WORKLOAD, edit))
    expect_refusal(["search", arch, workload, "--time-limit", "2"], f"{workload}: ", *fragments)
