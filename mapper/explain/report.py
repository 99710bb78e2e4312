"""Text and JSON forms of an `Explanation` (nothing here computes)."""
from __future__ import annotations

import math

from ..cost.occupancy import gpu_levels
from ..report import _num, mapping_text, table
from . import Explanation
from .regimes import CAPACITY_TEXT
from .stages import DEPTHS


def _words(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4g}"


def explain_text(ex: Explanation) -> str:
    arch, workload, ev = ex.arch, ex.workload, ex.evaluation
    head = (f"{workload.name} on {arch.name}: {ev.macs:,} MACs, {ev.cycles:,.0f} cycles "
            f"({ev.cycles / arch.clock_hz * 1e6:,.2f} us), utilization {ev.utilization:.1%}\n"
            f"overall: {ex.overall}")
    gpu = gpu_levels(arch)
    if gpu is not None:
        sms = ev.levels[gpu[0]].instances
        sm = "CTA pair" if arch.paired else "SM"      # a paired arch's units are two SMs (`cta_pair.py`)
        head += (f"\noccupancy: {ex.resident} resident block(s) per {sm}; {ex.blocks * sms:,} thread blocks on "
                 f"{sms} of {arch.gpu.sms} {sm}s ({ex.blocks} per {sm}) run in {ex.waves} wave(s)")
    rows = []
    for tr, regime in zip(ex.traffic, ex.capacity_regimes):
        rows.append([tr.level, "+".join(tr.feeders) or "-", _words(tr.capacity_words), _words(tr.traffic),
                     _words(tr.compulsory), _words(tr.capacity_part), _words(tr.capacity_bound),
                     f"{tr.ratio:.2f}x {tr.bound_kind.split()[0]}", regime])
    traffic = table(["level", "fed by", "S words", "traffic words", "compulsory", "capacity part",
                     "Smith bound", "vs bound", "capacity regime"], rows, align_left=2)
    notes = sorted(set(ex.capacity_regimes))
    traffic += "\n" + "\n".join(f"  {r}: {CAPACITY_TEXT[r]}" for r in notes)
    trows = []
    for t in ex.times:
        bandwidth, latency = t.stalls
        trows.append([t.level, _num(round(t.cycles)), _num(round(t.compute)),
                      _num(round(t.transfer_hidden + t.transfer_exposed)),
                      _num(round(t.latency_hidden)), _num(round(t.latency_exposed)),
                      _num(round(bandwidth)), _num(round(latency)), t.regime])
    times = table(["level", "cycles", "compute", "transfer", "latency (overlapped)", "latency exposed",
                   "bandwidth stall", "latency stall", "regime"], trows, align_left=1)
    srows = []
    for row in ex.stages:
        cells = [_num(round(c)) if c is not None else f"({why})" for c, why in zip(row.cycles, row.why_not)]
        srows.append([row.level] + cells + [row.recommended, row.advice])
    stages = (table(["level"] + [f"{s} stage{'s' if s > 1 else ''}" for s in DEPTHS] + ["best", "advice"],
                    srows, align_left=1) if srows else "(no level may buffer)")
    return "\n\n".join([head, mapping_text(arch, workload, ex.mapping, ev),
                        "Traffic across each level's upper boundary (words, all instances):\n" + traffic,
                        "Time per level (cycles):\n" + times,
                        "Pipeline depth (kernel cycles):\n" + stages])


def explain_json(ex: Explanation) -> dict:
    from ..mapping import mapping_to_dict
    return {
        "arch": ex.arch.name, "workload": ex.workload.name,
        "mapping": mapping_to_dict(ex.mapping, ex.arch, ex.workload),
        "cycles": ex.evaluation.cycles, "utilization": ex.evaluation.utilization,
        "bottleneck": ex.evaluation.bottleneck, "overall": ex.overall,
        "occupancy": {"resident_blocks": ex.resident, "blocks_per_sm": ex.blocks, "waves": ex.waves,
                      "sms_used": (ex.evaluation.levels[gpu_levels(ex.arch)[0]].instances
                                   if gpu_levels(ex.arch) else None)},
        "structure": {"elementwise": ex.structure.elementwise, "once_used": list(ex.structure.once_used),
                      "best_intensity_macs_per_byte": ex.structure.best_intensity,
                      "machine_balance": ex.structure.balance,
                      "memory_bound_at_every_capacity": ex.structure.memory_bound,
                      "label": ex.structure.label},
        "levels": {tr.level: {
            "fed_by": list(tr.feeders), "capacity_words": None if math.isinf(tr.capacity_words) else tr.capacity_words,
            "traffic_words": tr.traffic, "traffic_bytes": tr.bytes, "compulsory_words": tr.compulsory,
            "capacity_words_moved": tr.capacity_part, "smith_bound_words": tr.capacity_bound,
            "bound_words": tr.bound, "bound_kind": tr.bound_kind, "ratio_to_bound": tr.ratio,
            "capacity_regime": regime} for tr, regime in zip(ex.traffic, ex.capacity_regimes)},
        "times": {t.level: {"cycles": t.cycles, "compute": t.compute,
                            "transfer_hidden": t.transfer_hidden, "transfer_exposed": t.transfer_exposed,
                            "latency_hidden": t.latency_hidden, "latency_exposed": t.latency_exposed,
                            "bandwidth_stall": t.stalls[0], "latency_stall": t.stalls[1],
                            "regime": t.regime} for t in ex.times},
        "stages": {row.level: {"cycles": dict(zip(map(str, DEPTHS), row.cycles)),
                               "not_possible": {str(s): w for s, w in zip(DEPTHS, row.why_not) if w},
                               "regime": row.regime, "recommended": row.recommended,
                               "advice": row.advice} for row in ex.stages},
    }
