"""mapper: find how to tile a tensor computation across a memory hierarchy.

Public API: load specs with `load_arch`, `load_workload`, `load_mapping`; price one mapping
with `evaluate` (full breakdown) or many with `evaluate_many` (numpy, vectorised).
"""
from .cost import Costs, Evaluation, evaluate, evaluate_many
from .errors import InfeasibleError, MapperError, SpecError
from .load import load_arch, load_mapping, load_workload
from .mapping import Mapping, MappingTable, from_table, mapping_to_dict, to_table
from .spec import Arch, Workload

__all__ = ["Arch", "Costs", "Evaluation", "InfeasibleError", "Mapping", "MappingTable",
           "MapperError", "SpecError", "Workload", "evaluate", "evaluate_many", "from_table",
           "load_arch", "load_mapping", "load_workload", "mapping_to_dict", "to_table"]
