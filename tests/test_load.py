"""Bad input of any kind is a SpecError naming the file, the key path and what was expected;
the CLI prints it on one line and exits with status 2."""
import pytest
import yaml

from mapper.cli import main
from mapper.errors import SpecError
from mapper.load import load_arch, load_mapping, load_workload, preset_names

GEMM = {"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": 4, "n": 4, "k": 4},
        "dtype": "int8"}
ARCH = {"name": "a", "clock": "1 GHz",
        "levels": [{"name": "DRAM"},
                   {"name": "Buf", "capacity": "64 B", "instances": 4, "mesh": [2, 2]}],
        "compute": {"instances": 4, "mesh": [2, 2]}}
MAPPING = {"mapping": [{"level": "DRAM", "loops": [{"dim": "k", "bound": 4}],
                        "spatial": [{"dim": "m", "bound": 2, "axis": "x"},
                                    {"dim": "n", "bound": 2, "axis": "y"}]},
                       {"level": "Buf", "loops": [{"dim": "m", "bound": 2}, {"dim": "n", "bound": 2}]}]}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def expect_error(loader, tmp_path, data, *fragments):
    path = write(tmp_path, "spec.yaml", data)
    with pytest.raises(SpecError) as info:
        loader(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.mark.parametrize("change, fragments", [
    ({"extra": 1}, ["extra", "unknown key"]),
    ({"sizes": {"m": 0, "n": 4, "k": 4}}, ["sizes.m", "positive integer"]),
    ({"sizes": {"m": -3, "n": 4, "k": 4}}, ["sizes.m", "positive integer"]),
    ({"sizes": {"m": "four", "n": 4, "k": 4}}, ["sizes.m"]),
    ({"einsum": "Z[m,n] += A[m,j] * B[k,n]"}, ["einsum", "'j'"]),
    ({"einsum": "Z[m,n] = A[m,k]"}, ["einsum", "+="]),
    ({"dtype": "bf17"}, ["dtype", "bf16"]),
    ({"sizes": {"m": 4, "n": 4, "k": 4, "x": 2}}, ["sizes.x", "not used"]),
])
def test_bad_workloads(tmp_path, change, fragments):
    expect_error(load_workload, tmp_path, {**GEMM, **change}, *fragments)


@pytest.mark.parametrize("level_change, fragments", [
    ({"capacity": "lots"}, ["levels[1].capacity", "64 KiB"]),
    ({"capacity": "-4 KiB"}, ["levels[1].capacity"]),
    ({"bandwidth": "3 parsecs"}, ["levels[1].bandwidth"]),
    ({"mesh": [3, 1], "instances": 3}, ["compute.mesh", "multiple"]),
    ({"mesh": [2, 3]}, ["levels[1].mesh", "instances"]),
    ({"block_size": 0}, ["levels[1].block_size"]),
    ({"speed": 3}, ["levels[1].speed", "unknown key"]),
    ({"multicast": "yes"}, ["levels[1].multicast", "true or false"]),
])
def test_bad_archs(tmp_path, level_change, fragments):
    data = {**ARCH, "levels": [ARCH["levels"][0], {**ARCH["levels"][1], **level_change}]}
    expect_error(load_arch, tmp_path, data, *fragments)


def test_invalid_yaml_names_line(tmp_path):
    expect_error(load_arch, tmp_path, "name: [unclosed\n", "line", "invalid YAML")


def _load_mapping(tmp_path, mapping):
    arch = load_arch(write(tmp_path, "arch.yaml", ARCH))
    workload = load_workload(write(tmp_path, "wl.yaml", GEMM))
    return lambda path: load_mapping(path, arch, workload)


@pytest.mark.parametrize("mutate, fragments", [
    (lambda m: m["mapping"][0]["loops"].__setitem__(0, {"dim": "k", "bound": 2}), ["dim 'k'", "multiply to 2", "size is 4"]),
    (lambda m: m["mapping"][0]["spatial"].__setitem__(0, {"dim": "m", "bound": 4, "axis": "x"}), ["mapping[0].spatial", "fanout"]),
    (lambda m: m["mapping"][1]["loops"].append({"dim": "q", "bound": 1}), ["mapping[1].loops[2].dim", "no dim 'q'"]),
    (lambda m: m["mapping"][1].__setitem__("stages", 3), ["mapping[1].stages", "max_stages"]),
    (lambda m: m["mapping"][1].__setitem__("bypass", ["A"]) or m["mapping"][1].__setitem__("keep", ["A"]), ["both"]),
    (lambda m: m["mapping"][1].__setitem__("keep", ["A", "C"]), ["mapping[1].keep", "'C'"]),
    (lambda m: m["mapping"][0].__setitem__("keep", ["A"]), ["mapping[0].keep", "outermost"]),
    (lambda m: m["mapping"][0].__setitem__("level", "L9"), ["mapping[0].level", "L9"]),
    (lambda m: m["mapping"].reverse(), ["mapping[1].level", "outermost first"]),
    (lambda m: m["mapping"][1]["loops"].__setitem__(1, {"dim": "m", "bound": 2}), ["appears twice"]),
])
def test_bad_mappings(tmp_path, mutate, fragments):
    import copy
    mapping = copy.deepcopy(MAPPING)
    mutate(mapping)
    expect_error(_load_mapping(tmp_path, mapping), tmp_path, mapping, *fragments)


def test_tile_overflowing_capacity(tmp_path):
    import copy
    mapping = copy.deepcopy(MAPPING)   # Buf tiles: A 2x4, B 4x2, Z 2x2 int8 = 20 B
    mapping["mapping"][0]["loops"] = []
    mapping["mapping"][1]["loops"].append({"dim": "k", "bound": 4})
    arch = {**ARCH, "levels": [ARCH["levels"][0], {**ARCH["levels"][1], "capacity": "16 B"}]}
    loader = lambda path: load_mapping(path, load_arch(write(tmp_path, "arch.yaml", arch)),
                                       load_workload(write(tmp_path, "wl.yaml", GEMM)))
    expect_error(loader, tmp_path, mapping, "Buf", "capacity of 16 B")


def test_good_mapping_loads(tmp_path):
    loader = _load_mapping(tmp_path, MAPPING)
    mapping = loader(write(tmp_path, "m.yaml", MAPPING))
    dims = load_workload(tmp_path / "wl.yaml").dims
    assert [[(dims[d], b) for d, b in lm.temporal] for lm in mapping.levels] == [
        [("k", 4)], [("m", 2), ("n", 2)]]
    assert [(dims[d], b, a) for d, b, a in mapping.levels[0].spatial] == [("m", 2, 0), ("n", 2, 1)]


def test_cli_prints_one_line_and_exits_2(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", {**GEMM, "sizes": {"m": 0, "n": 4, "k": 4}})
    assert main(["evaluate", "toy", str(path), "toy-gemm-256-os"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sizes.m" in err and "Traceback" not in err


def test_unknown_preset_lists_presets(capsys):
    assert main(["evaluate", "nonesuch", "gemm-256", "toy-gemm-256-os"]) == 2
    err = capsys.readouterr().err
    assert "nonesuch" in err and "toy" in err


def test_every_preset_loads():
    for name in preset_names("archs"):
        load_arch(name)
    for name in preset_names("workloads"):
        if name.startswith("chain-"):        # op graphs (`ops:`), read by `mapper fuse`
            from mapper.load import load_opgraph
            load_opgraph(name)
        else:
            load_workload(name)
