"""Check the model against a real GPU: the kernel `mapper emit --to triton --kernel` writes, run
for a list of GEMM shapes with (a) mapper's pick (the joint search's best, zero tuning), (b) an
autotuning over a list of commonly used Triton matmul configs, (c) mapper's `--top 8` list.

    python scripts/gpu_check.py [--arch PRESET] [--shapes full|small] [--csv gpu_check.csv]
                                [--time-limit 20] [--top 8] [--only LABELS] [--mapspace triton-kernel]
                                [--objective cycles] [--capability 9.0] [--plan] [--interpret]
                                [--precompile N] [--deadline S] [--grid LABELS] [--grid-stages 3,4]

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
import itertools
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the helpers of `precompile` import this module by name where it was not run as a script
sys.path.insert(1, str(Path(__file__).resolve().parent))

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
# (K of 64 or more: the `triton-kernel` mapspace's k steps are)
SMALL_SHAPES = [("square-64", 64, 64, 64), ("decode-1x96x128", 1, 96, 128), ("odd-100x70x192", 100, 70, 192)]
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

    def best(self, *sources: str) -> Tried:
        """The fastest config of these sources (the first of them where none was timed)."""
        return min((t for t in self.tried if t.source in sources), key=lambda t: t.ms if np.isfinite(t.ms) else np.inf)

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
    > 1) its own `mapping`'s where given: the read-back splits a cluster's block its own way
    (the squarest CTA tile), the mapping says the split it was picked with."""
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
    result = make_strategy("joint", {}).run(space, parse_objective(args.objective, arch), context, lambda n: None)
    view = gemm_view(arch, workload, result.mapping)
    pick = triton_config(view)
    top, _ = top_mappings(arch, workload, args.objective, args.top, first=(view, pick))
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


def kernel_path(directory: Path, label: str, text: str) -> Path:
    """Where a shape's kernel module is written: one file per shape, the same for the processes
    that compile it ahead (`precompile`) and the one that times it, so that Triton's cache,
    keyed by the kernel's source, serves the second what the first compiled."""
    path = directory / f"{label}.py"
    # the header's comments (the shape, the mapping's changes) go: Triton keys a kernel by its
    # source and where in the file it starts, so that every shape's module shares the compiles
    # of one config
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("# ")) + "\n")
    return path


# the presets of the GPUs `device_preset` knows, by a word of the device's name
DEVICE_PRESETS = (("H200", "h200"), ("H100", "h100"), ("B200", "b200"), ("A100", "a100"))


def device_preset(args) -> str:
    """The preset of the GPU at hand, by its name (an H200 is priced as `h200`); h100 where there
    is none (--plan, --interpret) or its name is none of DEVICE_PRESETS (said on stderr)."""
    if args.interpret or args.plan:
        return "h100"
    import torch
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    preset = next((preset for word, preset in DEVICE_PRESETS if word in name), "h100")
    print(f"pricing on the {preset} preset ({name or 'no GPU'}; --arch to choose)", file=sys.stderr)
    return preset


_MODULES: dict[Path, object] = {}


def load_kernel(path: Path):
    if path not in _MODULES:
        spec = importlib.util.spec_from_file_location("gpu_check_kernel", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[path] = module
    return _MODULES[path]


def triton_config_of(tried: Tried):
    import triton
    c, form = tried.config, tried.form
    return triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m or 1},
                         num_stages=c.num_stages, num_warps=form.num_warps, num_ctas=form.num_ctas)


def operands(m: int, n: int, k: int, interpret: bool, fill: bool = True):
    import torch
    device, dtype = ("cpu", torch.float32) if interpret else ("cuda", torch.bfloat16)
    make = torch.randn if fill else torch.zeros
    return make(m, k, device=device, dtype=dtype), make(k, n, device=device, dtype=dtype)


def _compile_task(task) -> tuple[str, str, float]:
    """One config's first launch in a helper process (`precompile`): it compiles the kernel into
    Triton's cache. What failed is returned, not raised: the timing process meets it again."""
    path, (m, n, k), tried, interpret = task
    start = time.perf_counter()
    try:
        a, b = _OPERANDS.get((m, n, k)) or _OPERANDS.setdefault((m, n, k), operands(m, n, k, interpret, fill=False))
        run_once(load_kernel(path), a, b, triton_config_of(tried), tried, path.stem, quiet=True)
        if not interpret:
            import torch
            torch.cuda.synchronize()
        return path.stem, "", time.perf_counter() - start
    except Exception as exc:        # noqa: BLE001 - reported, and met again when timed
        return path.stem, f"{type(exc).__name__}: {str(exc).strip()[:160]}", time.perf_counter() - start
    finally:
        if len(_OPERANDS) > 1:      # one shape's operands at a time per helper (16384^2 is 0.5 GB each)
            for key in [key for key in _OPERANDS if key != (m, n, k)]:
                del _OPERANDS[key]


_OPERANDS: dict = {}


def precompile(planned: list, processes: int, interpret: bool) -> None:
    """Compiles every config of every shape in `processes` helper processes before any timing:
    on one process, Triton's compiles (1 to 3 s each) would take most of a GPU session. Tasks go
    in shape order, so that a helper keeps one shape's operands at a time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    tasks = [(path, dims, tried, interpret) for shape, _, dims, path in planned for tried in shape.tried]
    start = time.perf_counter()
    failed = 0
    # an executor, not a Pool: a helper that dies breaks it (an error) instead of hanging it
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        for label, error, _ in pool.map(_compile_task, tasks):
            failed += bool(error)
            if error:
                print(f"  precompile {label}: {error}", file=sys.stderr)
    print(f"precompiled {len(tasks)} configs in {time.perf_counter() - start:.1f} s on {processes} processes "
          f"({failed} failed there)", flush=True)


def measure(shape: ShapeResult, configs: list[Tried], path: Path, dims: tuple, interpret: bool,
            deadline: float = float("inf")) -> None:
    """Times `configs` of `shape` (each checked against torch.matmul first) until the clock passes
    `deadline` (time.perf_counter()); the time a tuner spends on each (its first, compiling run
    plus the timing) is kept as `tuning_s`."""
    import torch
    import triton
    m, n, k = dims
    module = load_kernel(path)
    a, b = operands(m, n, k, interpret)
    if not interpret:
        warm_up(a.device)
    want = (a.float() @ b.float())
    scale = want.abs().max().item() + 1
    for tried in configs:
        if time.perf_counter() > deadline:
            print(f"  {shape.label}: the deadline stops the timing ({sum(np.isfinite(t.ms) for t in configs)} "
                  f"of {len(configs)} configs timed)", file=sys.stderr)
            return
        config = triton_config_of(tried)
        start = time.perf_counter()
        try:
            out = run_once(module, a, b, config, tried, shape.label)
        except triton.runtime.errors.OutOfResources as exc:       # e.g. shared memory: no time
            print(f"  {shape.label}: {tried.config} does not run ({exc})", file=sys.stderr)
            tried.tuning_s = time.perf_counter() - start
            continue
        if not torch.allclose(out.float(), want, rtol=2e-2, atol=2e-2 * scale):
            raise AssertionError(f"{shape.label}: config {tried.config} gives a wrong result")
        if interpret:
            tried.ms = (time.perf_counter() - start) * 1e3
        else:
            tma = tried.form.tma
            tried.ms = triton.testing.do_bench(lambda: module.matmul(a, b, out=out, config=config, tma=tma),
                                               warmup=20, rep=60, return_mode="median")
        tried.tuning_s = time.perf_counter() - start


def warm_up(device, seconds: float = 0.3) -> None:
    """Dense matrix products for `seconds` before a shape is timed: an idle GPU drops its clock, and
    the first kernels timed after a pause (the search, the compiles) ran 2 to 8x slower on the
    H200 of docs/gpu/h200-2026-12-04 (its recheck: square-1024, square-2048, two decode shapes)."""
    import torch
    x = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        x @ x
        torch.cuda.synchronize()


def run_once(module, a, b, config, tried: Tried, label: str, quiet: bool = False):
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
        if not quiet:
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
    # the top-k list is the pick and the k - 1 next best configs
    pick, tuned, top = shape.best("pick"), shape.best("autotune"), shape.best("pick", "top")
    timed = [t for t in shape.tried if np.isfinite(t.predicted_cycles) and np.isfinite(t.ms)]
    return {"shape": shape.label, "pick_tflops": shape.tflops(pick), "autotune_best_tflops": shape.tflops(tuned),
            "top_best_tflops": shape.tflops(top), "pick_over_autotuned": tuned.ms / pick.ms,
            "top_over_autotuned": tuned.ms / top.ms, "autotune_s": shape.tuning_s("autotune"),
            "mapper_search_s": shape.search_s,
            "spearman_predicted_vs_measured": spearman([t.predicted_cycles for t in timed], [t.ms for t in timed]),
            "configs_tried": len(shape.tried),
            "pick_form": pick.form.label, "pick_num_ctas": pick.form.num_ctas,
            "autotune_best_form": tuned.form.label, "autotune_best_num_ctas": tuned.form.num_ctas,
            "top_best_form": top.form.label, "top_best_num_ctas": top.form.num_ctas, "pick_ptx_mma": pick.issued,
            "forms_text": " / ".join(form_text(t) for t in (pick, tuned, top))}


def write_csvs(rows: list[dict], shapes: list[ShapeResult], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if rows:
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
    parser.add_argument("--arch", default=None,
                        help="the preset or file to price with (default: the GPU's own preset by its name, "
                             "h100 without a GPU)")
    parser.add_argument("--shapes", choices=("full", "small"), default="full")
    parser.add_argument("--only", default="", help="shapes whose label contains this (or one of these, comma-separated)")
    parser.add_argument("--csv", default="gpu_check.csv")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds of joint search per shape")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--objective", default="cycles",
                        help="the search's and the top list's objective (cycles: the kernel's time, which the check measures)")
    parser.add_argument("--mapspace", default="triton-kernel",
                        help="mapspace of the search (default triton-kernel: the mappings the emitted kernel runs; "
                             "`clusters`: thread-block clusters)")
    parser.add_argument("--capability", default=None,
                        help="compute capability to plan for, as 9.0 (default: the GPU's; 9.0 without one)")
    parser.add_argument("--plan", action="store_true", help="print each config's form; run nothing (no GPU needed)")
    parser.add_argument("--interpret", action="store_true", help="Triton's CPU interpreter (small shapes)")
    parser.add_argument("--grid", default="",
                        help="comma-separated label parts: those shapes also time a calibration grid (source grid)")
    parser.add_argument("--grid-stages", default="3,4", help="the calibration grid's num_stages, comma-separated")
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="seconds: no config is timed after this (0: none); the CSVs hold what was timed")
    parser.add_argument("--precompile", type=int, default=0,
                        help="compile every config first in this many helper processes (a GPU session's time)")
    return parser.parse_args(argv)


def calibration_grid(shape: ShapeResult, m: int, arch, workload, itemsize: int, capacity: int,
                     stage_counts=(3, 4)) -> list[Tried]:
    """`--grid`: configs beyond the pick, the top list and the autotune list, for calibrating the
    model against measured times (source "grid"): block M (16, 32, 64 where M <= 64, else 64, 128,
    256) x N (64, 128, 256) x K (32, 64, 128), `stage_counts` stages, 4 or 8 warps, GROUP_M 8,
    those whose operand stages fit the shared memory and that the shape has not tried already."""
    seen = {t.config.kwargs_text() for t in shape.tried}
    grid = []
    for bm in ((16, 32, 64) if m <= 64 else (64, 128, 256)):
        for bn, bk, stages, warps in itertools.product((64, 128, 256), (32, 64, 128), stage_counts, (4, 8)):
            config = TritonConfig(bm, bn, bk, stages, warps, 8)
            if (bm + bn) * bk * itemsize * stages > capacity or config.kwargs_text() in seen:
                continue
            grid.append(Tried("grid", config, predicted(arch, workload, config)))
    return grid


def main(argv=None) -> list:
    """The check's rows (one per shape); with --plan the shapes planned, nothing run."""
    args = parse_args(argv)
    started = time.perf_counter()
    deadline = started + args.deadline if args.deadline else float("inf")
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"       # before triton is imported
    arch = load_arch(args.arch or device_preset(args))
    capability, descriptors = device_capability(args), descriptors_installed()
    smem = arch.levels[arch.level_names.index("SMEM")].capacity if "SMEM" in arch.level_names else 0
    kernels = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    planned = []        # (shape, view, (m, n, k), kernel path)
    for label, m, n, k in (SMALL_SHAPES if args.shapes == "small" else FULL_SHAPES):
        if not any(part in label for part in args.only.split(",")):
            continue
        shape, view = plan_shape(arch, label, m, n, k, args)
        if args.grid and any(part in label for part in args.grid.split(",")):
            workload = gemm_workload(label, m, n, k, "fp32" if element_bytes(args) == 4 else "bf16")
            stage_counts = tuple(int(s) for s in args.grid_stages.split(","))
            shape.tried += calibration_grid(shape, m, arch, workload, element_bytes(args), smem, stage_counts)
        assign_forms(shape, view, m, n, k, capability, descriptors, element_bytes(args))
        if args.plan:
            print("\n".join(plan_lines(shape)), flush=True)
        planned.append((shape, view, (m, n, k), kernel_path(kernels, label, kernel_text([view]))))
    shapes = [shape for shape, *_ in planned]
    if args.plan:
        return shapes
    print(f"planned {len(shapes)} shapes, {sum(len(s.tried) for s in shapes)} configs in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    if args.precompile > 1:
        precompile(planned, args.precompile, args.interpret)
    # the table's configs of every shape first, then the calibration grid, until the deadline
    for grid_pass in (False, True):
        for shape, view, dims, path in planned:
            configs = [t for t in shape.tried if (t.source == "grid") == grid_pass]
            if configs and time.perf_counter() < deadline:
                measure(shape, configs, path, dims, args.interpret, deadline)
                write_csvs([row(s) for s in shapes if measured(s)], shapes, Path(args.csv))
                if not grid_pass:
                    print(table([row(shape)]).splitlines()[2], flush=True)
    rows = [row(shape) for shape in shapes if measured(shape)]
    print(table(rows))
    print(f"(the check took {time.perf_counter() - started:.0f} s)")
    return rows


def measured(shape: ShapeResult) -> bool:
    """Whether the pick and the autotune list each have a timed config."""
    return all(any(t.source == source and np.isfinite(t.ms) for t in shape.tried) for source in ("pick", "autotune"))


if __name__ == "__main__":
    main()
