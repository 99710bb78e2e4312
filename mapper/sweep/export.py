"""A sweep's best mappings as Timeloop mapping files, one per point (`mapper sweep
--export-timeloop DIR`), for `timeloop-model` to re-price beside the architecture and problem."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import MapperError
from ..load import mapping_from_dict
from ..units import Where


def file_name(point) -> str:
    """Readable and unique: arch, workload, strategy, objective, then the point's key (its inputs'
    hash, so two points that differ elsewhere, e.g. in their mapspace, never share a file)."""
    parts = [point.arch.name, point.workload.name, point.strategy, point.objective, point.key[:12]]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)) + ".map.yaml"


def export_timeloop(points, rows: dict, folder: Path) -> tuple[list[Path], list[str]]:
    """Write the mapping of every point that has one (failed and infeasible points have none);
    returns the files written and, for the mappings a Timeloop file cannot say (a dim split over
    both mesh axes at one level), one line each on why they were left out."""
    from ..timeloop.commands import write_export
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MapperError(f"{folder}: cannot create the export folder ({exc.strerror})") from None
    written, skipped = [], []
    for point in points:
        row = rows.get(point.key)
        if row is None or not row.get("mapping"):
            continue
        path = folder / file_name(point)
        if path in written:          # points with identical inputs share one answer
            continue
        mapping = mapping_from_dict(row["mapping"], point.arch, point.workload, Where(f"store row {point.key}"))
        try:
            write_export(path, mapping, point.arch, point.workload, None)
        except MapperError as exc:
            skipped.append(f"{path.name}: not written: {exc}")
            continue
        written.append(path)
    return written, skipped
