"""mapper: find how to tile a tensor computation across a memory hierarchy.

Public API (docs/API.md): load specs with `load_arch`, `load_workload`, `load_constraints`
(a mapspace), `load_mapping` (each from a preset name, a file's path or a dict); build a
`Mapspace` (a frozen value: count it with `funnel`, draw from it with `sample_mappings`);
price one mapping with `evaluate` (full breakdown) or many with `evaluate_many`
(numpy, vectorised); search with `run_search` (a time limit or an evaluation budget), trace the least traffic
over a level's capacities with `run_capacity_curve` (an op graph's, fused and unfused, with
`run_fused_capacity_curve`), sweep
a grid with `run_sweep` (rows of a results store; `load_sweep` reads a sweep file or dict);
read a real network (ONNX, PyTorch, a Hugging Face configuration) with `import_model`.
`run_search`, `run_sweep`, `load_sweep`, `SweepResults` and `parse_objective` are imported on
first use: the search and the sweep are not loaded by commands that do not need them.
"""
import os
import sys

# mapper's numpy work is elementwise over tables of mappings, never BLAS: OpenBLAS's thread pool,
# started when numpy is imported (and again in each forked worker), would only cost CPU, about
# 0.1 s of a pe-array GEMM's 2 s search on the reference machine (docs/RESULTS.md). So the
# `mapper` command (its console script, or `python -m mapper`, whose argv[0] is "-m" while its
# package is imported) does not start it, unless the variable is set; a program that imports
# mapper keeps whatever it chose.
if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "mapper":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .constraints import Constraints
from .cost import Costs, Evaluation, evaluate, evaluate_many
from .errors import InfeasibleError, MapperError, SpecError
from .load import load_arch, load_constraints, load_mapping, load_workload
from .mapping import Mapping, MappingTable, from_table, mapping_to_dict, to_table
from .mapspace import Mapspace
from .mapspace.counting import funnel
from .mapspace.sampling import sample as sample_mappings
from .spec import Arch, Workload

_LAZY = frozenset({"run_search", "run_capacity_curve", "run_fused_capacity_curve", "run_sweep", "load_sweep", "SweepResults"})
_IMPORT = frozenset({"import_model", "ImportedModel"})

__all__ = ["Arch", "Constraints", "Costs", "Evaluation", "InfeasibleError", "Mapping", "MappingTable",
           "MapperError", "Mapspace", "SpecError", "SweepResults", "Workload", "evaluate", "evaluate_many",
           "from_table", "funnel", "import_model", "ImportedModel", "load_arch", "load_constraints", "load_mapping",
           "load_sweep", "load_workload", "mapping_to_dict", "parse_objective", "run_capacity_curve", "run_fused_capacity_curve",
           "run_search", "run_sweep", "sample_mappings", "to_table"]


def __getattr__(name: str):
    if name in _LAZY:
        from . import api
        return getattr(api, name)
    if name in _IMPORT:
        from . import model_import
        return getattr(model_import, name)
    if name == "parse_objective":
        from .search import parse_objective
        return parse_objective
    raise AttributeError(f"module 'mapper' has no attribute {name!r}")
