"""Swap-AB (`swap_operands` in a mapspace, `mma.with_operands_for`): on a warpgroup MMA the
einsum's operands taken in the other order, so that the dims of m play the instruction's n.
Exact counts by hand for a decode-shaped GEMM on one h100 SM (m of 1: padded to wgmma's m of
64 as written, to its n grain of 8 swapped), the rule that decides it, and the register file's
keeps by role following the instruction's operands."""
from dataclasses import replace

import pytest

from mapper import mma
from mapper.cost import evaluate, evaluate_many
from mapper.errors import SpecError
from mapper.load import load_arch, load_constraints, mapping_from_checked_dict, workload_from_dict
from mapper.load.constraints import constraints_from_dict
from mapper.mapping import to_table
from mapper.mapspace import Mapspace
from mapper.mma import with_operands_for
from mapper.roles import arch_roles
from mapper.units import Where

from test_cost_agreement import assert_same

H100, A100 = load_arch("h100"), load_arch("a100")


def gemm(m: int, n: int, k: int):
    return workload_from_dict({"name": f"gemm-{m}x{n}x{k}", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": m, "n": n, "k": k}, "dtype": "bf16", "dtypes": {"Z": "fp32"}},
                              Where("<test>"))


DECODE = gemm(1, 128, 64)           # one token: 8,192 MACs
SWAPPED = replace(DECODE, operands_swapped=True)


def test_the_rule_swaps_where_the_warpgroup_mma_pads_less_so():
    """wgmma's grains are m 64, n 8: m of 1 pads to 64 x 128 as written, to 8 x 128 swapped.
    m of 128 pads to nothing either way (no swap); m of 32 against n of 32: 64 x 32 either way
    (no swap: only strictly fewer MACs swap). a100's mma.sync reads per MAC: never swapped."""
    assert with_operands_for(H100, DECODE).operands_swapped
    assert not with_operands_for(H100, gemm(128, 128, 64)).operands_swapped
    assert not with_operands_for(H100, gemm(32, 32, 64)).operands_swapped
    assert not with_operands_for(A100, DECODE).operands_swapped
    assert not with_operands_for(H100, DECODE, "never").operands_swapped
    assert with_operands_for(H100, gemm(128, 128, 64), "always").operands_swapped


def test_swapped_roles_exchange_m_and_n_and_say_so():
    roles = arch_roles(H100, SWAPPED)
    assert roles.of("m") == (1,) and roles.of("n") == (0,) and roles.of("k") == (2,)
    assert "swap-AB" in roles.describe(SWAPPED)
    assert arch_roles(H100, DECODE).of("m") == (0,)


def test_the_register_file_keeps_the_instructions_first_operand():
    """h100's RF keeps [input, output] (wgmma's RS form: its first operand in registers):
    swapped, that is the einsum's B."""
    assert H100.for_workload(DECODE).levels[-1].keeps == {"A", "Z"}
    assert H100.for_workload(SWAPPED).levels[-1].keeps == {"B", "Z"}


def _on_one_sm(workload, keep_inner):
    arch = H100.for_workload(workload)
    data = [{"level": "HBM", "keep": ["Z", "A", "B"]}, {"level": "L2", "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "keep": ["Z", "A", "B"]},
            {"level": "RF", "loops": [{"dim": "m", "bound": 1}, {"dim": "n", "bound": 128}, {"dim": "k", "bound": 64}],
             "keep": keep_inner}]
    mapping = mapping_from_checked_dict(data, arch, workload, Where("<test>"))
    costs = evaluate_many(arch, workload, to_table([mapping], 3, 3))
    assert_same(arch, workload, mapping, costs)         # the scalar and vectorised paths agree
    return arch, mapping, evaluate(arch, workload, mapping)


def test_as_written_a_decode_gemm_runs_64_rows_for_one():
    """m64n128k16, 4 instructions along k, each padded to 64 rows: 524,288 MACs run for
    8,192. B's 16 x 128 fragments from SMEM: 524,288 / 64 = 8,192 reads (the whole of B
    once); A's 64 x 16 from RF: / 128 = 4,096; Z's accumulator updated / 16 = 32,768 times."""
    arch, mapping, ev = _on_one_sm(DECODE, ["Z", "A"])
    assert mma.mapping_instruction(arch, DECODE, mapping) == {"m": 64, "n": 128, "k": 16}
    smem, rf = ev.levels[2].tensors, ev.levels[3].tensors
    assert smem["B"].reads == 8_192
    assert rf["A"].reads == 4_096 and rf["Z"].updates == 32_768


def test_swapped_a_decode_gemm_runs_8_columns_for_one():
    """Swapped, the instruction's m is the einsum's n (128: two m64s) and its n the einsum's m
    (1, padded to 8): m64n8k16, 65,536 MACs run. B, now its first operand, is in RF: filled
    once (8,192) and read / 8 = 8,192 times; A's fragments come from SMEM / 64 = 1,024 reads;
    Z's accumulator / 16 = 4,096 updates. Fewer of every access than as written."""
    arch, mapping, ev = _on_one_sm(SWAPPED, ["Z", "B"])
    assert mma.mapping_instruction(arch, SWAPPED, mapping) == {"m": 64, "n": 8, "k": 16}
    smem, rf = ev.levels[2].tensors, ev.levels[3].tensors
    assert smem["A"].reads == 1_024
    assert (rf["B"].fills, rf["B"].reads) == (8_192, 8_192)
    assert rf["Z"].updates == 4_096
    _, _, written = _on_one_sm(DECODE, ["Z", "A"])
    assert ev.energy_pj < written.energy_pj and ev.cycles < written.cycles


def test_a_mapspace_asks_for_it_and_the_space_prices_on_the_swapped_workload():
    assert load_constraints("default").swap_operands == "never"
    assert Mapspace(H100, DECODE).workload.operands_swapped is False
    space = Mapspace(H100, DECODE, load_constraints("swap-ab"))
    assert space.workload.operands_swapped and space.arch.levels[-1].keeps == {"B", "Z"}
    assert Mapspace(H100, gemm(128, 128, 64), load_constraints("swap-ab")).workload.operands_swapped is False


def test_a_bad_swap_operands_names_the_key_and_the_choices():
    with pytest.raises(SpecError, match=r"swap_operands.*'never', 'auto' or 'always'"):
        constraints_from_dict({"name": "x", "swap_operands": "yes"}, Where("<test>"))


def test_a_swapped_search_reads_back_into_evaluate_swapped(tmp_path, capsys):
    """`search --json` of a swapped decode GEMM is a mapping file whose `kernel.swap_ab` makes
    `evaluate` price it on the swapped workload: the same cost."""
    import json
    from mapper.cli import main
    assert main(["search", "h100", "llama7b-decode-qkv", "--mapspace", "swap-ab", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["kernel"]["swap_ab"]
    path = tmp_path / "swapped.json"
    path.write_text(json.dumps(found))
    assert main(["evaluate", "h100", "llama7b-decode-qkv", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"] == found["cost"]
    found["kernel"]["swap_ab"] = False        # as written the registers keep A, not B: refused
    path.write_text(json.dumps(found))
    assert main(["evaluate", "h100", "llama7b-decode-qkv", str(path), "--json"]) == 2
    assert "level RF may not keep B" in capsys.readouterr().err
