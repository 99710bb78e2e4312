"""The only package that reads YAML: files or preset names -> validated spec objects.

Data flows one way: YAML (here) -> validated specs (`spec`) -> mappings (`mapping`) -> cost.
The shape checks every reader shares live in `validate`, the checks across files (keeps,
native shape, mapspace names, a mapping's fit) in `bind`; nothing here imports the cost model
or the search.

Every check names the file and the key path (`levels[2].capacity`) and says what was expected,
so a user can fix the input without reading code.

One module per kind of file:
- `files`: reading YAML safely (size, nesting, aliases, duplicate keys) and finding presets;
- `workload`, `opgraph` (op graphs: several ops joined by tensors), `arch`, `constraints` (mapspace files), `mapping` (mapping files, read against
  an arch and a workload).
What a command reads, Timeloop files included, enters through `mapper.inputs`.
"""
from ..validate import fields, text          # the sweep's readers import these from here
from .arch import arch_from_dict, load_arch
from .constraints import constraints_from_dict, load_constraints
from .files import PRESET_KINDS, preset_dirs, preset_names, read_yaml, resolve
from .mapping import kernel_kind, load_mapping, mapping_data, mapping_from_checked_dict, mapping_from_dict
from .opgraph import is_opgraph, load_opgraph, names_model, names_opgraph, opgraph_from_dict
from .workload import load_workload, workload_from_dict

__all__ = ("PRESET_KINDS", "arch_from_dict", "constraints_from_dict", "fields", "is_opgraph", "load_arch", "names_model", "names_opgraph",
           "kernel_kind", "load_constraints", "load_mapping", "mapping_data", "load_opgraph", "load_workload", "mapping_from_checked_dict",
           "mapping_from_dict", "opgraph_from_dict", "preset_dirs", "preset_names", "read_yaml", "resolve", "text",
           "workload_from_dict")
