"""`energy: auto` and `energy_per_byte: auto` (a level: an SRAM of its capacity, or the DRAM of
`technology.dram` when unlimited), the compute unit's `energy: auto` (a MAC of
`technology.mac_dtype`): the component model's figures, priced by the one cost model, varied
with the node by `--vary technology.node_nm`, refused on one line where a figure is missing;
and warm starts between the design points of an arch grid."""
import json
import sqlite3

import pytest

from mapper.cli import main
from mapper.components import DRAM_PJ_PER_BYTE, MODEL
from mapper.errors import SpecError
from mapper.load.arch import arch_from_dict
from mapper.sweep.arch_grid import vary_flags
from mapper.sweep.spec import varied_archs
from mapper.units import Where

TECH = {"node_nm": 7, "mac_dtype": "bf16", "dram": "hbm2"}


def arch(buf=None, dram=None, compute=None, tech=TECH) -> dict:
    """DRAM / Buf 64 KiB / MAC, each part taking the keys given."""
    return {"name": "auto", "clock": "1 GHz", "technology": tech,
            "levels": [{"name": "DRAM", **(dram or {})}, {"name": "Buf", "capacity": "64 KiB", **(buf or {})}],
            "compute": compute or {}}


def load(data):
    return arch_from_dict(data, Where("auto.yaml"))


def test_auto_energies_are_the_component_models_figures():
    loaded = load(arch(buf={"energy_per_byte": "auto"}, dram={"energy_per_byte": "auto"},
                       compute={"energy": "auto"}))
    dram, buf = loaded.levels
    assert (dram.byte_energy_read, dram.byte_energy_write, dram.byte_energy_update) == (DRAM_PJ_PER_BYTE["hbm2"],) * 3
    sram_pj = MODEL.sram(64 * 1024, 64, 7)[1] / 8
    assert (buf.byte_energy_read, buf.byte_energy_write, buf.byte_energy_update) == pytest.approx((sram_pj,) * 3)
    assert buf.energy_read == 0 and "sram_energy" in buf.energy_source and "dram" in dram.energy_source
    assert loaded.compute.energy_per_mac == pytest.approx(MODEL.mac("bf16", 7)[1])
    assert "bf16 MAC at 7 nm" in loaded.compute.energy_source
    # per access: block_size words of word_bits, the same figure per byte
    words = load(arch(buf={"energy": "auto", "word_bits": 16, "block_size": 4})).levels[1]
    assert words.energy_read == pytest.approx(sram_pj * 4 * 2) and words.byte_energy_read == 0


def test_energy_grows_with_capacity_and_with_the_node():
    per_byte = [MODEL.sram(2.0 ** k, 64, 7)[1] for k in range(6, 30, 4)]
    assert all(a < b for a, b in zip(per_byte, per_byte[1:]))
    assert MODEL.sram(1 << 20, 64, 5)[1] < MODEL.sram(1 << 20, 64, 7)[1] < MODEL.sram(1 << 20, 64, 28)[1]
    assert MODEL.mac("int8", 7)[1] < MODEL.mac("bf16", 7)[1] < MODEL.mac("fp32", 7)[1]


def test_auto_prices_as_the_same_figures_given(tmp_path, capsys):
    """The cost model sees numbers only: a file saying `auto` and one giving the same numbers
    find the same optimum at the same energy."""
    auto = arch(buf={"energy_per_byte": "auto"}, dram={"energy_per_byte": "auto"}, compute={"energy": "auto"})
    loaded = load(auto)
    given = arch(buf={"energy_per_byte": {k: f"{loaded.levels[1].byte_energy_read!r} pJ" for k in
                                          ("read", "write", "update")}},
                 dram={"energy_per_byte": {k: "31.2 pJ" for k in ("read", "write", "update")}},
                 compute={"energy": f"{loaded.compute.energy_per_mac!r} pJ"})
    energies = []
    for name, data in (("auto", auto), ("given", given)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(json.dumps(data))
        assert main(["search", str(path), "gemm-256", "--time-limit", "20", "--json"]) == 0
        energies.append(json.loads(capsys.readouterr().out)["cost"]["energy_pj"])
    assert energies[0] == pytest.approx(energies[1], rel=1e-12) and energies[0] > 0


def test_the_node_varied_moves_every_auto_figure():
    base = arch(buf={"energy_per_byte": "auto", "area": "auto"}, compute={"energy": "auto", "area": "auto"})
    path = Where("--vary")
    derived = varied_archs(base, vary_flags(["technology.node_nm=5,7,16"], path), Where("ARCH"), path)
    assert [a.name for a in derived] == [f"auto[technology.node_nm={n}]" for n in (5, 7, 16)]
    bufs = [a.levels[1] for a in derived]
    assert bufs[0].byte_energy_read < bufs[1].byte_energy_read < bufs[2].byte_energy_read
    assert bufs[0].area < bufs[1].area < bufs[2].area
    assert derived[0].compute.energy_per_mac < derived[2].compute.energy_per_mac
    with pytest.raises(SpecError, match=r"^--vary: .*technology.node_nm=2.*3 nm to 65 nm"):
        varied_archs(base, vary_flags(["technology.node_nm=2"], path), Where("ARCH"), path)


@pytest.mark.parametrize("data, key, words", [
    (arch(buf={"energy": "auto"}), "levels[1].energy", "word_bits"),
    (arch(buf={"energy": "auto", "energy_per_byte": "auto", "word_bits": 8}), "levels[1].energy", "not both"),
    (arch(dram={"energy_per_byte": "auto"}, tech={"node_nm": 7}), "levels[0].energy_per_byte", "dram: hbm2"),
    (arch(dram={"energy_per_byte": "auto"}, tech={"dram": "hbm9"}), "levels[0].energy_per_byte", "no DRAM figure"),
    (arch(buf={"energy_per_byte": "auto"}, tech=None), "levels[1].energy_per_byte", "node_nm"),
    (arch(compute={"energy": "auto"}, tech={"node_nm": 7}), "compute.energy", "mac_dtype"),
    (arch(compute={"energy": "auto"}, tech={"node_nm": 7, "mac_dtype": "fp3"}), "compute.energy", "no MAC"),
    (arch(buf={"energy_per_byte": "autoo"}), "levels[1].energy_per_byte", "expected"),
])
def test_bad_auto_energy_is_one_line_naming_file_and_key(data, key, words):
    with pytest.raises(SpecError) as info:
        load(data)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"auto.yaml: {key}:") and words in message, message


def test_mapper_area_prints_the_auto_energies_with_their_sources(tmp_path, capsys):
    path = tmp_path / "auto.yaml"
    path.write_text(json.dumps(arch(buf={"energy_per_byte": "auto"}, dram={"energy_per_byte": "auto"},
                                    compute={"energy": "auto"})))
    assert main(["area", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Buf energy:" in out and "pJ per byte" in out and "MAC energy:" in out and "pJ per MAC" in out
    assert "component model sram_energy: SRAM read 10 pJ" in out and "O'Connor" in out
    assert main(["area", str(path), "--json"]) == 0
    energies = json.loads(capsys.readouterr().out)["auto_energies"]
    assert [e["name"] for e in energies] == ["DRAM", "Buf", "MAC"] and all(e["source"] for e in energies)


def test_a_design_point_starts_from_its_neighbours_mappings(tmp_path):
    """Joint points alone (no greedy sibling of their own): every point after the first is
    handed the finished design points' mappings, which lie in its space (a mapping that fits
    a smaller buffer fits a larger one)."""
    db = tmp_path / "r.sqlite"
    # a 16^3 GEMM whose best mapping each buffer size changes (a quarter of a 64^3's time)
    assert main(["sweep", "toy", "--vary", "GlobalBuffer.capacity=256B..1KiB:x2", "--gemm", "m=16 n=16 k=16",
                 "--strategy", "joint", "--time-limit", "10", "--jobs", "1", "--quiet", "--db", str(db)]) == 0
    rows = sqlite3.connect(db).execute("SELECT arch, warm_given, warm_admitted FROM points "
                                       "ORDER BY finished_at").fetchall()
    assert [r[0] for r in rows] == [f"toy[GlobalBuffer.capacity={c}]" for c in ("256B", "512B", "1024B")]
    assert not rows[0][1] and rows[1][1:] == (1, 1) and rows[2][1:] == (2, 2)
