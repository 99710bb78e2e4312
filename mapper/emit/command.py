"""`mapper emit ARCH WORKLOAD [MAPPING] --to triton|cutlass|mlir`: the mapping (given, or the
joint search's best) as a kernel backend's form; and `evaluate --from-triton CONFIG`.

`--top K` (triton): the search's pick first, then the K - 1 best other configs of a grid of
Triton configs (`CONFIG_GRID`) read back into mappings (`from_config`) and priced by the cost
model under the same objective: the K best mappings a Triton config can express (configs
priced alike that differ only in stages or GROUP_M count once).
What a backend changes is printed to stderr as `mapper: note:` lines and kept as comments.
"""
from __future__ import annotations

from types import MappingProxyType

import ast
import itertools
import sys
from pathlib import Path

import numpy as np

from .. import depths, flags
from ..bind import check_fits
from ..cost import evaluate, evaluate_many
from ..errors import MapperError, SpecError
from ..inputs import EvaluationInputs, native_evaluation_inputs, native_search_inputs
from ..load import names_opgraph
from ..load.files import read_yaml
from ..mapping import Mapping, to_table
from ..mapspace import Mapspace
from ..units import Where
from .common import EmitError, epilogue_names, gemm_view
from .cutlass import cutlass_text
from .common import BlockConfig
from .from_config import config_from_dict, mapping_of_config
from .mlir import mlir_text
from .triton import autotune_text, config_text, kernel_text, triton_config

TIME_LIMIT_DEFAULT = 20.0
MAX_CONFIG_BYTES = 1 << 20
BACKENDS = ("triton", "cutlass", "mlir")
# The Triton configs `--top` ranks: block sides 16..256, K blocks 16..128, 2..5 stages, 2..8 warps
CONFIG_GRID = MappingProxyType({"block_m": (16, 32, 64, 128, 256), "block_n": (16, 32, 64, 128, 256), "block_k": (16, 32, 64, 128),
               "num_stages": (2, 3, 4, 5), "num_warps": (2, 4, 8), "group_m": (None, 8)})


def add_command(sub) -> None:
    em = sub.add_parser("emit", help="the mapping as a Triton config or kernel, CUTLASS shapes or an MLIR "
                                     "transform-dialect script")
    em.add_argument("arch", help="architecture YAML file or preset name")
    em.add_argument("workload", help="workload YAML file or preset name; an op graph (`ops:`) emits each "
                                     "fused group of `mapper fuse` with its epilogue")
    em.add_argument("mapping", nargs="?", default=None,
                    help="mapping YAML file or preset (default: the joint search's best)")
    em.add_argument("--to", required=True, choices=BACKENDS, help="the backend")
    em.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    em.add_argument("--top", type=flags.count, default=1, metavar="K",
                    help="triton: the K best mappings as an @triton.autotune config list")
    em.add_argument("--kernel", action="store_true", help="triton: a complete matmul kernel, not just its config")
    em.add_argument("--epilogue", action="append", default=[], metavar="OP",
                    help="fused elementwise epilogue, applied in order (repeatable): bias, gelu, silu, relu")
    em.add_argument("--fused", default=None, metavar="JSON",
                    help="op graph: the groups of this `mapper fuse --json` output (default: run the fusion study)")
    em.add_argument("--mapspace", default=None, help="mapspace of the search (default: default)")
    em.add_argument("--objective", default="edp", help="objective of the search and of --top (default edp)")
    em.add_argument("--time-limit", type=flags.seconds, default=TIME_LIMIT_DEFAULT,
                    help=f"search seconds when no mapping is given (default {TIME_LIMIT_DEFAULT:g})")
    em.set_defaults(run=run_emit)


def run_emit(args) -> int:
    epilogue = epilogue_names(args.epilogue)
    if (args.top > 1 or args.kernel) and args.to != "triton":
        raise EmitError("--top and --kernel are for --to triton")
    if names_opgraph(args.workload):
        from .chain_command import emit_chain
        text, notes = emit_chain(args, _emit_text)
    else:
        if args.fused:
            raise EmitError("--fused is for an op-graph workload (`ops:`)")
        arch, workload, mapping, found_by = _inputs(args)
        text, notes = _emit_text(args, arch, workload, mapping, epilogue)
        header = {"triton": "#", "cutlass": "//", "mlir": "//"}[args.to]
        text = f"{header} {found_by}\n{text}"
    for note in notes:
        print(f"mapper: note: {note}", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _emit_text(args, arch, workload, mapping, epilogue) -> tuple[str, list[str]]:
    """One mapping in the backend's form, and the lines on what the backend changed."""
    notes = []
    if args.to == "mlir":
        text, plan = mlir_text(arch, workload, mapping, epilogue)
        notes += plan.changes
    else:
        view = gemm_view(arch, workload, mapping)
        if args.to == "cutlass":
            text = cutlass_text(view, epilogue)
            notes += [line[len("// mapper: changed: "):] for line in text.splitlines() if line.startswith("// mapper: changed: ")]
        else:
            text, triton_notes = _triton(args, arch, workload, view, epilogue)
            notes += triton_notes
    return text, notes


def _inputs(args):
    """(arch, workload, mapping, how the mapping was found)."""
    if args.mapping is not None:
        given = native_evaluation_inputs(args.arch, args.workload, args.mapping)
        return given.arch, given.workload, given.mapping, f"mapping: {args.mapping}"
    from ..search import SearchContext, make_strategy, parse_objective
    found = native_search_inputs(args.arch, args.workload, args.mapspace)
    context = SearchContext.for_command(args.time_limit).for_search()
    space = Mapspace(found.arch, found.workload, found.constraints)
    objective = parse_objective(args.objective, found.arch)
    result = make_strategy("joint", {}).run(space, objective, context, lambda evaluated: None)
    proof = "proven optimal" if result.optimal else "not proven optimal"
    # the space's workload: its operands in the order the kernel takes them (swap-AB)
    return (depths.searched_arch(found.arch, space.workload, found.constraints), space.workload, result.mapping,
            f"mapping: the joint search's best for {objective.name} ({proof}, {result.evaluated:,} mappings priced)")


def _triton(args, arch, workload, view, epilogue) -> tuple[str, list[str]]:
    config = triton_config(view)
    if args.top <= 1:
        text = kernel_text([view], epilogue) if args.kernel else config_text(view)
        return text, list(config.changes)
    mappings, figures = top_mappings(arch, workload, args.objective, args.top, first=(view, config))
    views = [view] + [gemm_view(arch, workload, m) for m in mappings]
    notes = [f"{figures[0]}"] + figures[1:]
    text = kernel_text(views, epilogue, notes) if args.kernel else autotune_text(views, notes)
    return text, list(config.changes)


def top_mappings(arch, workload, objective_name: str, count: int, first=None):
    """(the `count` - 1 best mappings of the config grid other than `first`'s config, a line of
    predicted figures per mapping, `first`'s included when given), best first."""
    from ..search import parse_objective
    objective = parse_objective(objective_name, arch)
    candidates = []
    for values in itertools.product(*CONFIG_GRID.values()):
        config = BlockConfig(**dict(zip(CONFIG_GRID, values)))
        try:
            mapping, _ = mapping_of_config(arch, workload, config)
        except MapperError:
            continue
        candidates.append((config, mapping))
    table = to_table([m for _, m in candidates], len(workload.dims), len(workload.tensors))
    costs = evaluate_many(arch, workload, table)
    score = np.where(costs.valid, objective.score(costs), np.inf)
    figures = []
    if first is not None:
        view, config = first
        figures.append("the mapping's own config (rank 1 by construction)")
    taken, seen = [], {first[1].kwargs_text()} if first is not None else set()
    for row in np.argsort(score, kind="stable"):
        if len(taken) >= count - (first is not None) or not np.isfinite(score[row]):
            break
        config, mapping = candidates[row]
        text = triton_config(gemm_view(arch, workload, mapping)).kwargs_text()
        # configs the model prices alike that differ only in stages or GROUP_M count once (the
        # fewest stages first: the least shared memory)
        twin = (config.block_m, config.block_n, config.block_k, config.num_warps,
                float(costs.cycles[row]), float(costs.energy_pj[row]))
        if text in seen or twin in seen:
            continue
        seen |= {text, twin}
        taken.append(mapping)
        figures.append(f"predicted {costs.cycles[row]:,.0f} cycles, {costs.energy_pj[row] / 1e6:,.1f} uJ")
    return taken, figures


def read_triton_config(path: str) -> BlockConfig:
    """A config file: YAML/JSON with triton.Config's keys, or a text whose last
    `triton.Config({...}, num_stages=S, num_warps=W)` is read (what `emit --to triton` writes)."""
    where = Where(str(path))
    if not Path(path).is_file():
        raise where.error("no such file")
    text = Path(path).read_bytes()[:MAX_CONFIG_BYTES].decode("utf-8", errors="replace")
    data = _config_call(text, where) if "triton.Config(" in text else read_yaml(Path(path))
    return config_from_dict(data, where)


def _config_call(text: str, where: Where) -> dict:
    """The keys of the last `triton.Config(...)` call in `text` (literals only)."""
    start = text.rindex("triton.Config(")
    try:
        call = ast.parse(text[start:].split("\n")[0].rstrip(" ,"), mode="eval").body
        meta = ast.literal_eval(call.args[0])
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError, IndexError, AttributeError):
        raise where.error("expected `triton.Config({'BLOCK_M': .., 'BLOCK_N': .., 'BLOCK_K': ..}, "
                          "num_stages=.., num_warps=..)` with literal values") from None
    if not isinstance(meta, dict):
        raise where.error("expected a dict of BLOCK_M, BLOCK_N, BLOCK_K (and GROUP_M) in triton.Config")
    return {**meta, **keywords}


def config_evaluation_inputs(arch_arg: str, workload_arg: str, config_path: str) -> EvaluationInputs:
    """`evaluate --from-triton CONFIG`: the mapping a Triton config runs, checked to fit."""
    found = native_search_inputs(arch_arg, workload_arg)
    config = read_triton_config(config_path)
    try:
        mapping, notes = mapping_of_config(found.arch, found.workload, config, Where(str(config_path)))
    except EmitError as exc:
        raise SpecError(str(config_path), "", str(exc)) from None
    check_fits(mapping, found.arch, found.workload, Where(str(config_path)))
    return EvaluationInputs(found.arch, found.workload, mapping, None, notes)


def predicted_cycles(arch, workload, mappings: list[Mapping]) -> list[float]:
    return [evaluate(arch, workload, m).cycles for m in mappings]
