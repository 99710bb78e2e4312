"""`mapper emit ARCH CHAIN --to triton|cutlass|mlir [--fused JSON]`: each fused group of an op
graph that one GEMM template expresses, with its epilogue (`emit.chain` says which and why not).

Output: a header of comment lines (where the groups came from, what was dropped or skipped),
then each emitted group under a comment naming its ops; MLIR groups are separated by
`// -----`, so `iree-opt --split-input-file` takes each as its own module.
"""
from __future__ import annotations

from types import MappingProxyType

from ..errors import MapperError
from .chain import fused_groups_from_json, group_names, plan_group
from .common import EmitError, gemm_view

SEPARATOR = MappingProxyType({"mlir": "\n// -----\n\n", "triton": "\n\n", "cutlass": "\n\n"})


def emit_chain(args, emit_text) -> tuple[str, list[str]]:
    """(the text, the lines for stderr); `emit_text(args, arch, workload, mapping, epilogue)`
    emits one mapping in the backend's form."""
    from ..load import load_arch, load_opgraph
    if args.epilogue or args.mapping or args.top > 1:
        raise EmitError("an op graph's mappings and epilogues come from its fused groups: "
                        "give no MAPPING, --epilogue or --top with it")
    arch, graph = load_arch(args.arch), load_opgraph(args.workload)
    if args.fused:
        groups = fused_groups_from_json(args.fused, graph, arch)
        source = f"groups: {args.fused} (mapper fuse --json)"
        free = None
    else:
        from ..fusion.run import fuse
        from ..search import SearchContext
        result = fuse(arch, graph, SearchContext.for_command(args.time_limit), args.time_limit, "energy")
        groups = [(g.ops, g.anchor.mapping if g.anchor is not None else None) for g in result.fused.groups]
        source = f"groups: mapper fuse {arch.name} {graph.name} (objective energy, {args.time_limit:g} s)"
        free = result.searches.free
    comment = "#" if args.to == "triton" else "//"
    notes, bodies = [], []
    for ops, mapping in groups:
        plan = plan_group(graph, ops)
        if not plan.skipped:
            op = graph.ops[plan.anchor]
            mapping = mapping or (free(plan.anchor).mapping if free else _search(arch, op.workload, args.time_limit))
            if args.to != "mlir":
                try:
                    view = gemm_view(arch, op.workload, mapping)
                except EmitError as exc:
                    notes.append(f"group {group_names(graph, ops)} skipped: {exc}")
                    continue
                plan = plan_group(graph, ops, gemm_n=view.dim_names[1])
        notes += plan.lines
        if plan.skipped:
            continue
        text, changed = emit_text(args, arch, op.workload, mapping, plan.epilogue)
        notes += [f"group {group_names(graph, ops)}: {line}" for line in changed]
        head = (f"{comment} group {group_names(graph, ops)}: {op.name} ({op.workload.einsum}), "
                f"epilogue {', '.join(plan.epilogue) or 'none'}\n")
        bodies.append(head + text)
    header = [f"{comment} {graph.name} on {arch.name}: {len(bodies)} of {len(groups)} fused group(s) emitted; {source}"]
    header += [f"{comment} mapper: note: {line}" for line in notes]
    return "\n".join(header) + "\n" + SEPARATOR[args.to].join(bodies), notes


def _search(arch, workload, seconds: float):
    """The joint search's best (EDP) for an op the fuse JSON gives no mapping for."""
    from ..load import load_constraints
    from ..mapspace import Mapspace
    from ..search import SearchContext, make_strategy, parse_objective
    context = SearchContext.for_command(seconds).for_search()
    space = Mapspace(arch, workload, load_constraints(None))
    result = make_strategy("joint", {}).run(space, parse_objective("edp", arch), context, lambda evaluated: None)
    if result.mapping is None:
        raise MapperError(f"op {workload.name}: no mapping found in {seconds:g} s")
    return result.mapping
