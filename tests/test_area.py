"""Area (`mapper area`, `area:` / `area_per_byte:` / `area: auto` in architecture files): every
preset has a positive, sourced area; `auto` grows with the capacity and with the node; bad
input is one line naming the file and key; an architecture derived by `--vary` has the area of
its own capacity."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapper.cli import main
from mapper.components import BITCELL_UM2, MODEL, ComponentError
from mapper.errors import SpecError
from mapper.load import load_arch, preset_names
from mapper.load.arch import arch_from_dict
from mapper.sweep.arch_grid import vary_flags
from mapper.sweep.pareto import dominates, front
from mapper.sweep.spec import varied_archs
from mapper.units import Where

PRESETS = preset_names("archs")


def small(**level_keys) -> dict:
    """A two-level architecture whose buffer takes `level_keys`."""
    return {"name": "small", "clock": "1 GHz", "technology": {"node_nm": 7, "mac_dtype": "int8"},
            "levels": [{"name": "DRAM"}, {"name": "Buf", "capacity": "64 KiB", **level_keys}],
            "compute": {"macs_per_cycle": 1}}


def refusal(data: dict) -> str:
    with pytest.raises(SpecError) as info:
        arch_from_dict(data, Where("small.yaml"))
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_has_a_positive_sourced_area(preset, capsys):
    assert main(["area", preset, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total_mm2"] > 0
    given = [part for part in report["parts"] if part["each_mm2"] is not None]
    assert given and all(part["source"] for part in given)
    if report["die_area_mm2"] is not None:       # the modelled parts fit on the published die
        assert report["total_mm2"] < report["die_area_mm2"] and report["die_area_source"]


def test_the_text_names_each_part_the_sum_and_the_die(capsys):
    assert main(["area", "h100"]) == 0
    out = capsys.readouterr().out
    for word in ("L2", "SMEM", "RF", "Warpgroup", "sum", "published die: 814 mm^2", "Horowitz", "N5 0.021"):
        assert word in out


def test_auto_grows_with_the_capacity_and_with_the_node():
    sizes = [2.0 ** k for k in range(0, 31, 3)]
    areas = [MODEL.sram(size, 64, 7)[0] for size in sizes]
    assert all(a < b for a, b in zip(areas, areas[1:]))
    nodes = sorted(BITCELL_UM2) + [4, 6, 10, 40]
    for low, high in zip(sorted(nodes), sorted(nodes)[1:]):
        assert MODEL.sram(1 << 20, 64, low)[0] <= MODEL.sram(1 << 20, 64, high)[0]
        assert MODEL.mac("bf16", low)[0] <= MODEL.mac("bf16", high)[0]
    assert MODEL.sram(1 << 20, 64, 7)[0] < MODEL.sram(1 << 20, 64, 28)[0]
    # a file's `auto` is the model's figure
    buf = arch_from_dict(small(area="auto"), Where("small.yaml")).levels[1]
    assert buf.area == pytest.approx(MODEL.sram(64 * 1024, 64, 7)[0]) and "auto" in buf.area_source


def test_given_areas_and_files_without_any():
    arch = arch_from_dict({**small(area="2 mm^2"), "compute": {"macs_per_cycle": 4, "area": "500 um^2",
                                                              "instances": 3}}, Where("small.yaml"))
    assert arch.levels[1].area == 2 and arch.compute.area == pytest.approx(5e-4)
    assert arch.area == pytest.approx(2 + 3 * 5e-4)
    per_byte = arch_from_dict(small(area_per_byte="1 um^2"), Where("small.yaml")).levels[1]
    assert per_byte.area == pytest.approx(64 * 1024 * 1e-6)
    plain = arch_from_dict({k: v for k, v in small().items() if k != "technology"}, Where("small.yaml"))
    assert plain.area == 0 and plain.levels[1].area is None and plain.technology.node_nm is None


@pytest.mark.parametrize("data, key, words", [
    (small(area="-2 mm^2"), "levels[1].area", "area"),
    (small(area=-2), "levels[1].area", ">= 0"),
    (small(area="2 cm^2"), "levels[1].area", "unknown unit"),
    (small(area_per_byte="1 parsec"), "levels[1].area_per_byte", "unknown unit"),
    (small(area="auto", area_per_byte="1 um^2"), "levels[1].area_per_byte", "not both"),
    ({**small(area="auto"), "technology": None}, "levels[1].area", "node_nm"),
    ({**small(area="auto"), "technology": {"node_nm": 90}}, "levels[1].area", "3 nm to 65 nm"),
    ({**small(area="auto"), "technology": {"node_nm": "seven"}}, "technology.node_nm", "node"),
    ({**small(), "technology": {"node": 7}}, "technology.node", "unknown key"),
    ({**small(), "levels": [{"name": "DRAM", "area": "auto"}]}, "levels[0].area", "unlimited"),
    ({**small(), "compute": {"area": "auto"}, "technology": {"node_nm": 7}}, "compute.area", "mac_dtype"),
    ({**small(), "compute": {"area": "auto"}, "technology": {"node_nm": 7, "mac_dtype": "fp3"}},
     "compute.area", "no MAC figures"),
])
def test_bad_area_input_is_one_line_naming_file_and_key(data, key, words):
    message = refusal(data)
    assert message.startswith(f"small.yaml: {key}:") and words in message, message


def test_bad_area_in_a_file_names_it_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nclock: 1 GHz\nlevels:\n  - name: DRAM\n  - name: Buf\n    capacity: 1 KiB\n"
                    "    area: auto\ncompute: {}\n")
    assert main(["area", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "bad.yaml" in err and "levels[1].area" in err and "node_nm" in err


def test_a_derived_architecture_has_the_area_of_its_capacity():
    base = load_arch("toy")
    derived = varied_archs("toy", vary_flags(["GlobalBuffer.capacity=32KiB,256KiB"], Where("--vary")),
                           Where("ARCH"), Where("--vary"))
    areas = [arch.levels[1].area for arch in derived]
    assert areas[0] < base.levels[1].area < areas[1]
    assert derived[0].area < base.area < derived[1].area


def test_the_model_refuses_what_it_has_no_figure_for():
    with pytest.raises(ComponentError):
        MODEL.sram(float("inf"), 64, 7)
    with pytest.raises(ComponentError):
        MODEL.dram_pj_per_byte("hbm9")
    assert MODEL.dram_pj_per_byte("hbm2") == pytest.approx(31.2)
    assert MODEL.mac("int8", 45) == pytest.approx((419e-6, 0.3))


# --- Pareto fronts (`mapper results --pareto`) ---------------------------------------------

def brute_front(values) -> list[int]:
    """O(n^2): the points no other point dominates."""
    return [i for i, a in enumerate(values)
            if not any(dominates(b, a) for j, b in enumerate(values) if j != i)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), max_size=30), st.integers(2, 3))
def test_the_front_is_the_brute_force_front(points, width):
    values = [p[:width] for p in points]
    assert front(values) == brute_front(values)


def test_dominance_by_hand():
    assert dominates((1, 2), (1, 3)) and not dominates((1, 3), (1, 3)) and not dominates((0, 4), (1, 3))
    assert front([(1, 3), (1, 3), (2, 2), (2, 3), (0, 9)]) == [0, 1, 2, 4]


def test_results_pareto_prints_the_front_of_a_varied_sweep(tmp_path, capsys):
    db = str(tmp_path / "r.sqlite")
    assert main(["sweep", "toy", "--vary", "GlobalBuffer.capacity=8KiB..256KiB:x2", "--gemm", "m=64 n=64 k=64",
                 "--strategy", "greedy", "--time-limit", "2", "--jobs", "1", "--quiet", "--db", db]) == 0
    capsys.readouterr()
    assert main(["results", "--db", db, "--jsonl", "-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    areas = [row["area_mm2"] for row in rows]
    assert len(set(areas)) == len(rows) == 6 and all(a > 0 for a in areas)
    assert main(["results", "--db", db, "--pareto", "energy,area"]) == 0
    out = capsys.readouterr().out
    expected = brute_front([(row["energy_pj"], row["area_mm2"]) for row in rows])
    for i, row in enumerate(rows):
        assert (row["arch"] + " ") in out if i in expected else (row["arch"] + " ") not in out
    assert f"{len(expected)} point(s) on the fronts" in out
    assert main(["results", "--db", db, "--pareto", "energy,colour"]) == 2
    assert "--pareto" in capsys.readouterr().err
