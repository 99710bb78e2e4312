"""Check the model against a real GPU: the kernel `mapper emit --to triton --kernel` writes, run
for a list of GEMM shapes with (a) mapper's pick (the joint search's best, zero tuning), (b) an
autotuning over a list of commonly used Triton matmul configs, (c) mapper's `--top 8` list.

    python scripts/gpu_check.py [--arch h100] [--shapes full|small] [--csv gpu_check.csv]
                                [--time-limit 20] [--top 8] [--only SUBSTRING] [--mapspace clusters]
                                [--capability 9.0] [--plan] [--interpret]

Per shape it prints and writes (CSV) the TFLOP/s of (a), of the best of (b) and of the best of
(c); the ratio of (a) to the autotuned best (b); the tuning time (b) took, which (a) saves; and
the Spearman rank correlation between the model's predicted cycles (each config read back into
a mapping and priced) and the measured times over every config tried. A second CSV
(`*_configs.csv`) lists every config: source, predicted cycles, measured milliseconds.
Every config's output is checked against torch.matmul before it is timed.

Each config runs in the form the device takes (`mapper/emit/triton_forms.py`): on compute
capability 9.0 and later the Hopper form (operand tiles through TMA tensor descriptors where the
installed Triton has them and the operands allow them, the mapping's thread-block cluster as
num_ctas, whole warpgroups where the mapping's MMA is wgmma), below it the Ampere form (pointer
loads, mma.sync, one CTA a program). The table and both CSVs say each kernel's form and
num_ctas. `--capability` plans for another device (on a GPU: runs that form on it); `--plan`
prints every config's form and notes without running anything (no GPU, torch or triton needed).

Needs an NVIDIA GPU, torch and triton (`pip install -e '.[triton]'` with a CUDA build of torch).
It imports without them; `--interpret` runs the same code path in Triton's CPU interpreter
(TRITON_INTERPRET=1, float32 on the CPU, small shapes), as tests/test_gpu_check.py does.
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mapper.cost import evaluate  # noqa: E402
from mapper.emit.command import top_mappings  # noqa: E402
from mapper.emit.common import BlockConfig, gemm_view  # noqa: E402
from mapper.emit.from_config import mapping_of_config  # noqa: E402
from mapper.emit.triton import TritonConfig, kernel_text, triton_config  # noqa: E402
from mapper.emit.triton_forms import HOPPER, KernelForm, kernel_form  # noqa: E402
from mapper.load import load_arch, workload_from_dict  # noqa: E402
from mapper.units import Where  # noqa: E402

# (label, M, N, K): square; LLaMA-7B's four GEMMs at a 2048-token prefill and at decode (one
# token); tall-skinny; odd sizes no power of two divides
FULL_SHAPES = ([(f"square-{s}", s, s, s) for s in (1024, 2048, 4096, 8192, 16384)]
               + [(f"llama7b-{phase}-{name}", m, n, k) for phase, m in (("prefill", 2048), ("decode", 1))
                  for name, n, k in (("qkv", 12288, 4096), ("o", 4096, 4096), ("up", 22016, 4096), ("down", 4096, 11008))]
               + [("tall-skinny-32768x64x4096", 32768, 64, 4096), ("tall-skinny-128x128x65536", 128, 128, 65536),
                  ("odd-3000x5000x1000", 3000, 5000, 1000), ("odd-1000x3000x700", 1000, 3000, 700)])
SMALL_SHAPES = [("square-64", 64, 64, 64), ("decode-1x96x80", 1, 96, 80), ("odd-100x70x90", 100, 70, 90)]
# Commonly used Triton matmul configs (block M, N, K, stages, warps), all with GROUP_M 8: the
# kind of list Triton's matmul tutorial autotunes over, written here from the usual choices
AUTOTUNE_LIST = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
                 (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 5, 2),
                 (32, 64, 32, 5, 2), (128, 128, 64, 4, 4), (64, 64, 64, 3, 4), (32, 32, 64, 3, 2)]
SMALL_AUTOTUNE_LIST = [(32, 32, 32, 2, 4), (16, 64, 16, 2, 2), (64, 32, 32, 3, 4)]


@dataclass
class Tried:
    source: str                  # pick, autotune, top
    config: BlockConfig          # a TritonConfig for the pick and the top list (its num_ctas)
    predicted_cycles: float
    ms: float = float("nan")
    tuning_s: float = 0.0        # its first (compiling, checked) run and its timing
    cluster: tuple[int, int] = (1, 1)      # its mapping's cluster, CTAs along m and n
    form: KernelForm | None = None         # how it runs on the device (`assign_forms`)
    issued: str = ""                       # the MMA its compiled PTX issues ("" in the interpreter)


@dataclass
class ShapeResult:
    label: str
    flops: float
    search_s: float
    tried: list[Tried] = field(default_factory=list)

    def best(self, source: str) -> Tried:
        return min((t for t in self.tried if t.source == source), key=lambda t: t.ms if np.isfinite(t.ms) else np.inf)

    def tflops(self, t: Tried) -> float:
        return self.flops / (t.ms * 1e-3) / 1e12

    def tuning_s(self, source: str) -> float:
        return sum(t.tuning_s for t in self.tried if t.source == source)


def spearman(x, y) -> float:
    """Spearman's rank correlation (average ranks for ties); nan below 3 points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) < 3:
        return float("nan")

    def ranks(v):
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):          # ties share their mean rank
            r[v == value] = r[v == value].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def gemm_workload(label: str, m: int, n: int, k: int, dtype: str):
    return workload_from_dict({"name": label, "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": m, "n": n, "k": k},
                               "dtypes": {"A": dtype, "B": dtype, "Z": "fp32"}}, Where(label))


def predicted(arch, workload, config: BlockConfig, mapping=None) -> float:
    """The model's cycles of a config read back into a mapping; of a cluster's config (num_ctas
    > 1) its own `mapping`'s: the read-back knows no clusters and would put the whole cluster's
    tile on one SM."""
    try:
        if getattr(config, "num_ctas", 1) > 1 and mapping is not None:
            return evaluate(arch, workload, mapping).cycles
        return evaluate(arch, workload, mapping_of_config(arch, workload, config)[0]).cycles
    except Exception:           # a config the model cannot fit (capacity): no prediction
        return float("nan")


def element_bytes(args) -> int:
    """fp32 in the interpreter (numpy's check on the CPU), bf16 on a GPU."""
    return 4 if args.interpret else 2


def plan_shape(arch, label, m, n, k, args) -> tuple[ShapeResult, object]:
    """The configs of one shape: (a) the search's pick, (b) the autotune list, (c) the top list."""
    from mapper.mapspace import Mapspace
    from mapper.load import load_constraints
    from mapper.search import SearchContext, make_strategy, parse_objective
    workload = gemm_workload(label, m, n, k, "fp32" if element_bytes(args) == 4 else "bf16")
    start = time.perf_counter()
    space = Mapspace(arch, workload, load_constraints(args.mapspace))
    context = SearchContext.for_command(args.time_limit)
    result = make_strategy("joint", {}).run(space, parse_objective("edp", arch), context, lambda n: None)
    view = gemm_view(arch, workload, result.mapping)
    pick = triton_config(view)
    top, _ = top_mappings(arch, workload, "edp", args.top, first=(view, pick))
    shape = ShapeResult(label, 2.0 * m * n * k, time.perf_counter() - start)
    shape.tried.append(Tried("pick", pick, predicted(arch, workload, pick, result.mapping), cluster=view.cluster[:2]))
    for mapping in top:
        top_view = gemm_view(arch, workload, mapping)
        config = triton_config(top_view)
        shape.tried.append(Tried("top", config, predicted(arch, workload, config, mapping), cluster=top_view.cluster[:2]))
    for bm, bn, bk, stages, warps in (SMALL_AUTOTUNE_LIST if args.shapes == "small" else AUTOTUNE_LIST):
        config = TritonConfig(bm, bn, bk, stages, warps, 8)
        shape.tried.append(Tried("autotune", config, predicted(arch, workload, config)))
    return shape, view


def assign_forms(shape: ShapeResult, view, m: int, n: int, k: int, capability, descriptors: bool, itemsize: int):
    """Each config's form on a device of `capability`: the mapping's MMA shape (`view`: the
    workload's, every config's) and each config's own cluster; TMA checked on the contiguous
    A (m x k) and B (k x n) that `measure` allocates."""
    operands = (("A", (m, k), (k, 1), itemsize), ("B", (k, n), (n, 1), itemsize))
    for tried in shape.tried:
        tried.form = kernel_form(tried.config, view.instruction, tried.cluster, capability, descriptors, operands)


def descriptors_installed() -> bool:
    """Whether the installed Triton has host-side TMA descriptors, read off its files: importing
    triton takes seconds, and it reads TRITON_INTERPRET once, at import."""
    spec = importlib.util.find_spec("triton")
    return bool(spec and spec.origin) and (Path(spec.origin).parent / "tools" / "tensor_descriptor.py").exists()


def device_capability(args) -> tuple[int, int]:
    """`--capability` (major.minor), else the GPU's; without a GPU (--interpret, --plan), 9.0."""
    if args.capability:
        major, _, minor = args.capability.partition(".")
        return int(major), int(minor or 0)
    if not (args.interpret or args.plan):
        import torch
        if torch.cuda.is_available():
            return tuple(torch.cuda.get_device_capability())
    return HOPPER


def load_kernel(text: str):
    path = Path(tempfile.mkdtemp(prefix="gpu_check_")) / "kernel.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("gpu_check_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(shape: ShapeResult, view, m: int, n: int, k: int, interpret: bool) -> None:
    """Times every config of `shape` (checked against torch.matmul first); the time a tuner
    spends on each (its first, compiling run plus the timing) is kept as `tuning_s`."""
    import torch
    import triton
    device, dtype = ("cpu", torch.float32) if interpret else ("cuda", torch.bfloat16)
    module = load_kernel(kernel_text([view]))
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    want = (a.float() @ b.float())
    for tried in shape.tried:
        c, form = tried.config, tried.form
        config = triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k,
                                "GROUP_M": c.group_m or 1}, num_stages=c.num_stages, num_warps=form.num_warps,
                               num_ctas=form.num_ctas)
        start = time.perf_counter()
        try:
            out = run_once(module, a, b, config, tried, shape.label)
        except triton.runtime.errors.OutOfResources as exc:       # e.g. shared memory: no time
            print(f"  {shape.label}: {c} does not run ({exc})", file=sys.stderr)
            tried.tuning_s = time.perf_counter() - start
            continue
        form = tried.form
        scale = want.abs().max().item() + 1
        if not torch.allclose(out.float(), want, rtol=2e-2, atol=2e-2 * scale):
            raise AssertionError(f"{shape.label}: config {c} gives a wrong result")
        if interpret:
            tried.ms = (time.perf_counter() - start) * 1e3
        else:
            tried.ms = triton.testing.do_bench(lambda: module.matmul(a, b, out=out, config=config, tma=form.tma),
                                               warmup=25, rep=100)
        tried.tuning_s = time.perf_counter() - start


def run_once(module, a, b, config, tried: Tried, label: str):
    """The first (compiling) run of a config in its form. A TMA form the device's Triton fails to
    compile or launch runs again with pointer loads, the failure one line in its notes: one
    GPU session must not end on the first kernel a Triton version cannot build."""
    import torch
    import triton
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    try:
        compiled = module.launch(a, b, out, None, config, tried.form.tma)
    except triton.runtime.errors.OutOfResources:
        raise
    except Exception as exc:
        if not tried.form.tma:
            raise
        why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        print(f"  {label}: {tried.config} failed with TMA loads ({why}); pointer loads instead", file=sys.stderr)
        tried.form = replace(tried.form, tma=False, notes=tried.form.notes + (f"TMA: failed here ({why}): pointer loads",))
        compiled = module.launch(a, b, out, None, config, False)
    tried.issued = issued_mma(compiled)
    return out


def issued_mma(compiled) -> str:
    """The MMA a compiled kernel issues, read off its PTX: Triton chooses it ("" where nothing
    was compiled: the interpreter)."""
    ptx = (getattr(compiled, "asm", None) or {}).get("ptx", "")
    return "wgmma" if "wgmma.mma_async" in ptx else "mma.sync" if "mma.sync" in ptx else ("none" if ptx else "")


def form_text(tried: Tried) -> str:
    """What the table says of a kernel's form: its instruction and loads, and its num_ctas."""
    return f"{tried.form.parts} c{tried.form.num_ctas}"


def row(shape: ShapeResult) -> dict:
    pick, tuned, top = shape.best("pick"), shape.best("autotune"), shape.best("top")
    measured = [t for t in shape.tried if np.isfinite(t.predicted_cycles) and np.isfinite(t.ms)]
    return {"shape": shape.label, "pick_tflops": shape.tflops(pick), "autotune_best_tflops": shape.tflops(tuned),
            "top_best_tflops": shape.tflops(top), "pick_over_autotuned": tuned.ms / pick.ms,
            "top_over_autotuned": tuned.ms / top.ms, "autotune_s": shape.tuning_s("autotune"),
            "mapper_search_s": shape.search_s,
            "spearman_predicted_vs_measured": spearman([t.predicted_cycles for t in measured], [t.ms for t in measured]),
            "configs_tried": len(shape.tried),
            "pick_form": pick.form.label, "pick_num_ctas": pick.form.num_ctas,
            "autotune_best_form": tuned.form.label, "autotune_best_num_ctas": tuned.form.num_ctas,
            "top_best_form": top.form.label, "top_best_num_ctas": top.form.num_ctas, "pick_ptx_mma": pick.issued,
            "forms_text": " / ".join(form_text(t) for t in (pick, tuned, top))}


def write_csvs(rows: list[dict], shapes: list[ShapeResult], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with path.with_name(path.stem + "_configs.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["shape", "source", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M",
                         "predicted_cycles", "measured_ms", "form", "num_ctas", "num_warps_run", "ptx_mma", "form_notes"])
        for shape in shapes:
            for t in shape.tried:
                c = t.config
                writer.writerow([shape.label, t.source, c.block_m, c.block_n, c.block_k, c.num_stages, c.num_warps,
                                 c.group_m or "", t.predicted_cycles, t.ms, t.form.label, t.form.num_ctas,
                                 t.form.num_warps, t.issued, "; ".join(t.form.notes)])


def table(rows: list[dict]) -> str:
    head = (f"{'shape':32} {'pick':>8} {'tuned':>8} {'top-k':>8} {'pick/tuned':>10} {'top/tuned':>9} "
            f"{'tuning s':>9} {'search s':>8} {'spearman':>8}  forms: pick / tuned / top-k")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['shape']:32} {r['pick_tflops']:8.2f} {r['autotune_best_tflops']:8.2f} "
                     f"{r['top_best_tflops']:8.2f} {r['pick_over_autotuned']:10.3f} {r['top_over_autotuned']:9.3f} "
                     f"{r['autotune_s']:9.1f} {r['mapper_search_s']:8.1f} {r['spearman_predicted_vs_measured']:8.3f}"
                     f"  {r['forms_text']}")
    reach = sum(r["pick_over_autotuned"] >= 0.95 for r in rows)
    top = sum(r["top_over_autotuned"] >= 0.99 for r in rows)
    family = rows[0]["pick_form"].split()[0] if rows else ""
    lines.append(f"(TFLOP/s; pick >= 95% of the autotuned best on {reach}/{len(rows)} shapes, "
                 f"top-k >= 99% on {top}/{len(rows)}; forms: the {family} form's MMA and loads, cN its num_ctas)")
    return "\n".join(lines)


def plan_lines(shape: ShapeResult) -> list[str]:
    """`--plan`: each config of a shape, its form and num_ctas, the model's cycles, the notes
    (those every config shares once, under the shape)."""
    shared = set.intersection(*(set(t.form.notes) for t in shape.tried))
    lines = [f"{shape.label}:"] + [f"  every config: {note}" for note in shape.tried[0].form.notes if note in shared]
    for t in shape.tried:
        c = t.config
        lines.append(f"  {t.source:8} {c.block_m}x{c.block_n}x{c.block_k} stages {c.num_stages} warps "
                     f"{t.form.num_warps} GROUP_M {c.group_m or 1}: {t.form.label}, num_ctas {t.form.num_ctas}, "
                     f"predicted {t.predicted_cycles:,.0f} cycles")
        lines += [f"           {note}" for note in t.form.notes if note not in shared]
    return lines


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="h100")
    parser.add_argument("--shapes", choices=("full", "small"), default="full")
    parser.add_argument("--only", default="", help="shapes whose label contains this")
    parser.add_argument("--csv", default="gpu_check.csv")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds of joint search per shape")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--mapspace", default="default", help="mapspace of the search (`clusters`: thread-block clusters)")
    parser.add_argument("--capability", default=None,
                        help="compute capability to plan for, as 9.0 (default: the GPU's; 9.0 without one)")
    parser.add_argument("--plan", action="store_true", help="print each config's form; run nothing (no GPU needed)")
    parser.add_argument("--interpret", action="store_true", help="Triton's CPU interpreter (small shapes)")
    return parser.parse_args(argv)


def main(argv=None) -> list:
    """The check's rows (one per shape); with --plan the shapes planned, nothing run."""
    args = parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"       # before triton is imported
    arch = load_arch(args.arch)
    capability, descriptors = device_capability(args), descriptors_installed()
    shapes, rows = [], []
    for label, m, n, k in (SMALL_SHAPES if args.shapes == "small" else FULL_SHAPES):
        if args.only not in label:
            continue
        shape, view = plan_shape(arch, label, m, n, k, args)
        assign_forms(shape, view, m, n, k, capability, descriptors, element_bytes(args))
        if args.plan:
            print("\n".join(plan_lines(shape)), flush=True)
            shapes.append(shape)
            continue
        measure(shape, view, m, n, k, args.interpret)
        shapes.append(shape)
        rows.append(row(shape))
        print(table(rows[-1:]).splitlines()[2], flush=True)
    if args.plan:
        return shapes
    write_csvs(rows, shapes, Path(args.csv))
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
