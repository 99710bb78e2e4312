"""Architecture grids (`mapper sweep ARCH --vary "LEVEL.FIELD=GRID"`, a sweep file's
`archs: [{base: NAME, vary: {...}}]`): the derived architectures' names and values, the size
grammar in the fields' units, meshes, keys that leave names out (a derived architecture equal
to its base is not searched again), one-line errors naming the flag or the file and key, and
the two forms giving the same points.

Searches run on tests/data/sweep-tiny-arch.yaml (DRAM / Buf 64 B / RF 12 B x 2x2), greedy only."""
import csv
from pathlib import Path

import pytest

from mapper.cli import build_parser, main
from mapper.errors import SpecError
from mapper.load import load_arch
from mapper.load.arch import LEVEL_KEYS
from mapper.load.technology import TECHNOLOGY_KEYS
from mapper.sweep.arch_grid import COMPUTE_FIELDS, LEVEL_FIELDS, MAX_ARCHS, TECHNOLOGY_FIELDS, vary_entry, vary_flags
from mapper.sweep.cli import build_spec
from mapper.sweep.points import digest, expand_points
from mapper.sweep.spec import load_sweep, varied_archs
from mapper.units import Where, parse_bandwidth, parse_bytes, parse_energy

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "sweep-tiny-arch.yaml"
FLAGS = ["--gemm", "m=4 n=4 k=4", "--strategy", "greedy", "--time-limit", "1", "--jobs", "1", "--quiet"]


def derive(arch, *flags):
    """The architectures `--vary FLAG...` derives from `arch` (a preset or file)."""
    return varied_archs(str(arch), vary_flags(list(flags), Where("--vary")), Where("ARCH"), Where("--vary"))


def level(arch, name):
    return next(lv for lv in arch.levels if lv.name == name)


def sweep(tmp_path, *args) -> int:
    return main(["sweep", *map(str, args), "--db", str(tmp_path / "r.sqlite"), *FLAGS])


# ----------------------------------------------------------------------------- names and values

def test_a_two_d_grid_is_every_combination_named_by_its_changes_last_path_fastest():
    archs = derive(TINY, "Buf.capacity=32B..128B:x2", "DRAM.bandwidth=2,8")
    assert [a.name for a in archs] == [f"tiny[Buf.capacity={c},DRAM.bandwidth={b}]"
                                       for c in ("32B", "64B", "128B") for b in ("2", "8")]
    base = load_arch(str(TINY))
    for arch in archs:
        changes = dict(part.split("=") for part in arch.name[len("tiny["):-1].split(","))
        assert level(arch, "Buf").capacity == parse_bytes(changes["Buf.capacity"], Where("t"))
        assert level(arch, "DRAM").bandwidth == float(changes["DRAM.bandwidth"])
        # everything else is the base's
        assert level(arch, "RF") == level(base, "RF") and arch.compute == base.compute
        assert level(arch, "Buf").energy_read == level(base, "Buf").energy_read


@pytest.mark.parametrize("grid, labels", [
    ("8MiB..32MiB:x2", ["8MiB", "16MiB", "32MiB"]),
    ("512KiB..2MiB:x2", ["512KiB", "1024KiB", "2048KiB"]),        # steps in the start's unit
    ("64KiB..192KiB:+64KiB", ["64KiB", "128KiB", "192KiB"]),
    ("1 KiB, 4096", ["1KiB", "4096"]),
    (["2KiB", "1..2:+1"], ["2KiB", "1", "2"]),
])
def test_sizes_take_the_range_grammar_in_units(grid, labels):
    if isinstance(grid, str):
        archs = derive(TINY, f"Buf.capacity={grid}")
    else:                                   # a sweep file's YAML list
        archs = varied_archs(str(TINY), vary_entry({"Buf.capacity": grid}, Where("s")), Where("b"), Where("s"))
    assert [a.name.split("=")[1][:-1] for a in archs] == labels
    assert [level(a, "Buf").capacity for a in archs] == [parse_bytes(x, Where("t")) for x in labels]


def test_bandwidths_energies_and_latencies_take_their_own_units():
    archs = derive(TINY, "DRAM.bandwidth=1.5TB/s..6TB/s:x2")
    clock = load_arch(str(TINY)).clock_hz
    assert [level(a, "DRAM").bandwidth for a in archs] == [
        parse_bandwidth(f"{x} TB/s", Where("t"), clock) for x in ("1.5", "3", "6")]
    # steps of 0.1 do not drift (0.1 + 0.2 != 0.3 in floats): three values, written as given
    archs = derive(TINY, "Buf.energy.read=0.1pJ..0.3pJ:+0.1pJ")
    assert [a.name for a in archs] == [f"tiny[Buf.energy.read={x}pJ]" for x in ("0.1", "0.2", "0.3")]
    assert [level(a, "Buf").energy_read for a in archs] == pytest.approx([0.1, 0.2, 0.3])
    base = level(load_arch(str(TINY)), "Buf")
    assert {level(a, "Buf").energy_write for a in archs} == {base.energy_write}
    both = derive(TINY, "Buf.energy=2pJ")[0]           # read, write and update alike
    assert {level(both, "Buf").energy_read, level(both, "Buf").energy_write,
            level(both, "Buf").energy_update} == {parse_energy("2pJ", Where("t"))}
    # a field the base leaves out (RF has no latency) can be varied too
    assert [level(a, "RF").latency for a in derive(TINY, "RF.latency=10ns..20ns:x2")] == [10.0, 20.0]


def test_clock_gpu_and_compute_fields():
    archs = derive("h100", "clock=1GHz..2GHz:+0.5GHz", "gpu.sms=66")
    assert [a.clock_hz for a in archs] == [1e9, 1.5e9, 2e9]
    assert {a.gpu.sms for a in archs} == {66}
    # a bandwidth in B/s is bytes per cycle at the derived clock, as in a file
    assert archs[0].levels[0].bandwidth == pytest.approx(2 * archs[2].levels[0].bandwidth)
    assert [a.compute.macs_per_cycle for a in derive("h100", "Warpgroup.macs_per_cycle=256,512")] == [256, 512]
    assert derive("h100", "compute.energy=1pJ")[0].compute.energy_per_mac == 1.0


def test_a_mesh_sets_the_instances_and_instances_set_a_one_row_mesh():
    base = load_arch("toy")
    archs = derive("toy", "RegisterFile.mesh=8x8,16x16")
    assert [level(a, "RegisterFile").mesh for a in archs] == [(8, 8), (16, 16)]
    assert [level(a, "RegisterFile").instances for a in archs] == [64, 256]
    assert {a.compute.mesh for a in archs} == {base.compute.mesh}
    smem = derive("a100", "SMEM.instances=54,108")
    assert [level(a, "SMEM").mesh for a in smem] == [(54, 1), (108, 1)]
    # h100's thread-block clusters list its GPCs' SMs: another SM count needs its own GPCs
    with pytest.raises(SpecError, match="GPCs hold 132 SMs, but this level fans out to 66"):
        derive("h100", "SMEM.instances=66,132")


# ----------------------------------------------------------------------------- keys and the store

def test_a_derived_architecture_equal_to_its_base_is_keyed_as_it_is_and_not_searched_again(tmp_path, capsys):
    base = load_arch(str(TINY))
    same = derive(TINY, f"Buf.capacity={level(base, 'Buf').capacity:g}B")[0]
    assert same.name != base.name and digest(same) == digest(base)
    other = derive(TINY, "Buf.capacity=32B")[0]
    assert digest(other) != digest(base)
    assert sweep(tmp_path, TINY) == 0
    assert "1 searched" in capsys.readouterr().out
    assert sweep(tmp_path, TINY, "--vary", "Buf.capacity=64B,32B") == 0
    out = capsys.readouterr().out
    # two points, one already in the store (the base's), one searched; the report names both
    assert out.startswith("2 points (2 distinct searches): 1 searched")
    assert "1 already in" in out
    assert "on tiny[Buf.capacity=64B]," in out and "on tiny[Buf.capacity=32B]," in out


def test_the_results_store_lists_the_derived_names(tmp_path, capsys):
    assert sweep(tmp_path, TINY, "--vary", "Buf.capacity=32B,64B", "--vary", "Buf.block_size=1,2") == 0
    out = tmp_path / "r.csv"
    assert main(["results", "--db", str(tmp_path / "r.sqlite"), "--csv", str(out)]) == 0
    with open(out) as handle:
        names = sorted(row["arch"] for row in csv.DictReader(handle))
    assert names == sorted(f"tiny[Buf.capacity={c},Buf.block_size={b}]" for c in ("32B", "64B") for b in (1, 2))


def test_a_sweep_file_and_the_flags_give_the_same_points(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"""archs:
  - {{base: {TINY}, vary: {{Buf.capacity: "32B..64B:x2", RF.energy: [1pJ, 2pJ]}}}}
strategies: [greedy]
time_limit: 1
workloads:
  - einsum: "Z[m,n] += A[m,k] * B[k,n]"
    name: gemm
    sizes: {{m: 4, n: 4, k: 4}}
    dtype: bf16
    dtypes: {{Z: fp32}}
""")
    from_file = expand_points(build_spec(build_parser().parse_args(["sweep", str(path)])))
    from_flags = expand_points(build_spec(build_parser().parse_args(
        ["sweep", str(TINY), "--vary", "Buf.capacity=32B..64B:x2", "--vary", "RF.energy=1pJ,2pJ", *FLAGS])))
    assert len(from_file) == 4
    assert [(p.arch.name, p.key) for p in from_file] == [(p.arch.name, p.key) for p in from_flags]
    assert len({p.key for p in from_file}) == 4


# ----------------------------------------------------------------------------- errors

@pytest.mark.parametrize("vary, says", [
    ("Buf.capcity=64B", "Buf has no field 'capcity' to vary; its numeric fields: capacity, bandwidth"),
    ("Cache.capacity=64B", "no level of tiny named here"),
    ("Buf.keeps=A", "Buf has no field 'keeps'"),
    ("gpu.sms=4", "tiny has no `gpu:` section"),
    ("Buf.capacity=0", "tiny[Buf.capacity=0]: expected a size in bytes > 0, got 0"),
    ("Buf.capacity=-8B", "expected a size such as '64 KiB'"),
    ("Buf.capacity=8XB", "unknown unit 'XB'"),
    ("Buf.capacity=64B..32B:x2", "the end is below the start"),
    ("Buf.capacity=1B..1MiB:+1B", "has more than 10,000 values"),
    ("RF.instances=8", "tiny[RF.instances=8]: levels[2].mesh: mesh 2 x 2 does not equal instances 8"),
    ("RF.mesh=4x1", "tiny[RF.mesh=4x1]: compute.mesh: mesh 2 x 2 is not a multiple of the mesh above it"),
    ("RF.mesh=2", "expected a mesh written XxY"),
    ("Buf.energy.reed=1pJ", "expected Buf.energy.read, .write or .update"),
    ("Buf.capacity", "expected LEVEL.FIELD=VALUES"),
])
def test_a_bad_vary_is_one_line_naming_the_flag_and_path(tmp_path, capsys, vary, says):
    assert sweep(tmp_path, TINY, "--vary", vary) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("mapper: error: --vary: ")
    path = vary.partition("=")[0]
    assert says in err and (path in err)


def test_grids_too_large_and_paths_given_twice_are_refused(tmp_path, capsys):
    assert sweep(tmp_path, TINY, "--vary", "Buf.block_size=1..40", "--vary", "RF.block_size=1..40") == 2
    err = capsys.readouterr().err
    assert f"derives 1,600 architectures from tiny (40 x 40), above the limit of {MAX_ARCHS:,}" in err
    assert sweep(tmp_path, TINY, "--vary", "Buf.capacity=32B", "--vary", "Buf.capacity=64B") == 2
    assert "--vary: Buf.capacity: this path is varied twice" in capsys.readouterr().err
    assert sweep(tmp_path, TINY, "--vary", "MAC.energy=1pJ", "--vary", "compute.energy=2pJ") == 2
    assert "--vary: compute.energy: sets the same field as 'MAC.energy'" in capsys.readouterr().err


@pytest.mark.parametrize("archs, key, says", [
    ("[{base: TINY, vary: {Buf.capacity: 0}}]", "archs[0].vary.Buf.capacity", "expected a size in bytes > 0"),
    ("[TINY, {base: TINY, vary: {RF.instances: 8}}]", "archs[1].vary.RF.instances", "does not equal instances 8"),
    ("[{base: TINY, vary: {Nope.capacity: 1}}]", "archs[0].vary.Nope.capacity", "no level of tiny"),
    ("[{base: TINY, vary: {}}]", "archs[0].vary", "expected a mapping of LEVEL.FIELD -> values"),
    ("[{base: TINY}]", "archs[0].vary", "required key is missing"),
    ("[{base: no-such-arch, vary: {Buf.capacity: 1}}]", "archs[0].base", "no such file"),
    ("[{base: TINY, vary: {Buf.capacity: 1}, more: 1}]", "archs[0].more", "unknown key"),
    ("[7]", "archs[0]", "expected a name or {base: NAME"),
])
def test_a_bad_grid_in_a_sweep_file_names_the_file_and_key(tmp_path, capsys, archs, key, says):
    path = tmp_path / "s.yaml"
    path.write_text(f"archs: {archs.replace('TINY', str(TINY))}\nworkloads: [{{workload: gemm-256}}]\n")
    assert main(["sweep", str(path), "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"mapper: error: {path}: {key}: ") and says in err


def test_vary_with_a_sweep_file_points_to_the_file_form(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(f"archs: [{TINY}]\nworkloads: [{{workload: gemm-256}}]\n")
    assert main(["sweep", str(path), "--vary", "Buf.capacity=32B", "--db", str(tmp_path / "r.sqlite")]) == 2
    assert "--vary: applies to ARCH with --gemm" in capsys.readouterr().err


def test_the_varied_fields_are_keys_the_loader_reads():
    # the grid's tables name the loader's keys: a renamed key there fails here, not in a sweep
    assert set(LEVEL_FIELDS) <= set(LEVEL_KEYS)
    assert set(COMPUTE_FIELDS) <= {"instances", "mesh", "macs_per_cycle", "energy", "area"}
    assert set(TECHNOLOGY_FIELDS) <= set(TECHNOLOGY_KEYS)
    with pytest.raises(SpecError, match="expected a mapping of LEVEL.FIELD"):
        vary_entry(["Buf.capacity"], Where("s"))


@pytest.mark.parametrize("path", sorted((ROOT / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_the_bundled_study_sweeps_load(path):
    """The studies docs/RESULTS.md reports (`mapper sweep sweeps/NAME.yaml`) stay readable: every
    design point derived, each named by its changes."""
    spec = load_sweep(str(path))
    assert len(spec.archs) >= 7 and len({digest(a) for a in spec.archs}) == len(spec.archs)
    assert all("[" in a.name for a in spec.archs[1:])
