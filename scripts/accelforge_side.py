"""AccelForge's side of scripts/bench_peers.py, run by the Python of a separate environment
with `pip install accelforge` (Python 3.12; never imported by mapper):

    VENV/bin/python scripts/accelforge_side.py gemm M N K [--jobs J]
    VENV/bin/python scripts/accelforge_side.py ffm fused|unfused [--jobs J]

Prints one JSON line: energy (pJ per MAC for a GEMM, J for the layer), wall seconds, the
energy per component, and the mapping AccelForge chose (its text form).

`gemm`: this project's archs/pe-array.yaml written in AccelForge's input format (below), every
level allowed to keep or bypass each tensor (`may_keep: All`), the mapper's objective energy;
bf16 words (16 bits) as workloads/gemm-*.yaml. `ffm`: AccelForge's own example architecture
`tpu_v4i` and workload `gpt3_6.7B` (batch 1, 8192 tokens) as its mapper tutorial runs them
(`max_fused_loops = 1`); `unfused` keeps every tensor in the outermost memory, as the tutorial
does to turn fusion off. AccelForge writes `mapping.svg` into the working directory (it
renders each mapping with graphviz's `dot`, which must be installed), so run it in a scratch one.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

# archs/pe-array.yaml's figures: DRAM 512 pJ and the global buffer 16 pJ per 8-word block
# (128 bits of bf16), the register file 0.5 pJ per word, 1 pJ per MAC, no bandwidth limits.
PE_ARRAY = """
arch:
  nodes:
  - !Memory
    name: DRAM
    size: inf
    leak_power: 0
    area: 0
    tensors: {keep: All, may_keep: All}
    actions:
    - {name: read, energy: 512e-12, bits_per_action: 128, throughput: inf}
    - {name: write, energy: 512e-12, bits_per_action: 128, throughput: inf}
  - !Memory
    name: GlobalBuffer
    size: 65536 * 8
    leak_power: 0
    area: 0
    tensors: {keep: Nothing, may_keep: All}
    actions:
    - {name: read, energy: 16e-12, bits_per_action: 128, throughput: inf}
    - {name: write, energy: 16e-12, bits_per_action: 128, throughput: inf}
  - !Container
    name: PE
    spatial:
    - {name: X, fanout: 16}
    - {name: Y, fanout: 16}
  - !Memory
    name: RegisterFile
    size: 64 * 8
    leak_power: 0
    area: 0
    tensors: {keep: Nothing, may_keep: All}
    actions:
    - {name: read, energy: 0.5e-12, bits_per_action: 16, throughput: inf}
    - {name: write, energy: 0.5e-12, bits_per_action: 16, throughput: inf}
  - !Compute
    name: MAC
    leak_power: 0
    area: 0
    actions:
    - {name: compute, energy: 1e-12, throughput: 1e9}
"""

GEMM = """
workload:
  iteration_space_shape:
    m: 0 <= m < {M}
    n: 0 <= n < {N}
    k: 0 <= k < {K}
  bits_per_value: {{All: 16}}
  einsums:
  - name: GEMM
    tensor_accesses:
    - {{name: A, projection: [m, k]}}
    - {{name: B, projection: [k, n]}}
    - {{name: Z, projection: [m, n], output: True}}
    renames: {{input: A, weight: B, output: Z}}
"""


def mapping_text(mapping) -> str:
    """The mapping's loop tree, one node per line (storage, loops, spatial loops)."""
    lines = []
    for node in mapping.nodes:
        kind = type(node).__name__
        if kind == "Storage":
            lines.append(f"{node.component} keeps {','.join(node.tensors)}")
        elif kind in ("Temporal", "Spatial"):
            lines.append(f"  {kind.lower()} {node}")
    return "\n".join(lines)


def gemm(af, m: int, n: int, k: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        arch, work = os.path.join(tmp, "arch.yaml"), os.path.join(tmp, "gemm.yaml")
        with open(arch, "w") as f:
            f.write(PE_ARRAY)
        with open(work, "w") as f:
            f.write(GEMM.format(M=m, N=n, K=k))
        spec = af.Spec.from_yaml(arch, work)
        spec.mapper.metrics = af.mapper.Metrics.ENERGY
        start = time.perf_counter()
        mappings = spec.map_workload_to_arch(print_progress=False)
        seconds = time.perf_counter() - start
    macs = m * n * k
    return {"case": f"gemm-{m}x{n}x{k}", "energy_pj_per_mac": float(mappings.energy()) / macs * 1e12,
            "seconds": seconds,
            "per_component_pj_per_mac": {str(c): float(v) / macs * 1e12
                                         for c, v in mappings.energy(per_component=True).items()},
            "mapping": mapping_text(mappings.mapping())}


def ffm(af, mode: str) -> dict:
    from accelforge.examples import EXAMPLES_DIR
    spec = af.Spec.from_yaml(EXAMPLES_DIR / "arches" / "tpu_v4i.yaml", EXAMPLES_DIR / "workloads" / "gpt3_6.7B.yaml",
                             jinja_parse_data={"BATCH_SIZE": 1, "N_TOKENS": 8192})
    if mode == "unfused":
        outermost = next(node for node in spec.arch.nodes if isinstance(node, af.arch.Memory))
        outermost.tensors.keep = "All"
    spec.mapper.metrics = af.mapper.Metrics.ENERGY
    spec.mapper.max_fused_loops = 1
    start = time.perf_counter()
    mappings = spec.map_workload_to_arch(print_progress=False)
    seconds = time.perf_counter() - start
    return {"case": f"gpt3-6.7b-layer {mode}", "energy_j": float(mappings.energy()), "seconds": seconds,
            "per_einsum_j": {str(e): float(v) for e, v in mappings.energy(per_einsum=True).items()},
            "mapping": mapping_text(mappings.mapping())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["gemm", "ffm"])
    parser.add_argument("args", nargs="+")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()
    import accelforge as af
    af.set_n_parallel_jobs(args.jobs, print_message=False)
    if args.what == "gemm":
        out = gemm(af, *map(int, args.args))
    else:
        out = ffm(af, args.args[0])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
