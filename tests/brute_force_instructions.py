"""The literal simulator's instruction mode (`brute_force.simulate(..., instructions=...)`): a
compute unit that runs whole instructions takes, per instruction, each distinct word its points
name once. Kept apart from brute_force.py for its length; like it, independent of `mapper`."""
from __future__ import annotations

from brute_force import _coordinates, _dim_values, _settings


def instruction_traffic(loops, level, axes, instructions, innermost):
    """Words moved between each instance of `level` and a unit that runs whole instructions
    (`instructions`: per role, (dims, instruction size)): at every step of the temporal loops
    above the innermost level, the unit's iteration points fall into instructions (per role the
    flattened offset within the unit's tile divided by the instruction's size, as `fragments`
    finds fragments; the dims outside the roles one point each), and each instruction takes
    every distinct element of the tensor its points name, once. The units must be alone below
    `level` (no spatial loop there). Returns what `_mac_traffic` returns."""
    if any(loop.kind == "spatial" and loop.level >= level and loop.bound > 1 for loop in loops):
        raise ValueError("instructions: a unit alone below the keeper only")
    outer_space = [loop for loop in loops if loop.level < level and loop.kind == "spatial"]
    above = [loop for loop in loops if loop.kind == "temporal" and loop.level < innermost]
    inner = [loop for loop in loops if loop.kind == "temporal" and loop.level == innermost]
    extent = {}
    for loop in inner:
        extent[loop.dim] = extent.get(loop.dim, 1) * loop.bound
    traffic = {}
    for instance in _settings(outer_space):
        words, moved, touched = 0, [], set()
        for step in _settings(above):
            fixed = _dim_values(outer_space + above, instance + step)
            taken = {}
            for point in _settings(inner):
                local = _dim_values(inner, point)
                key = []
                for dims, size in instructions:
                    flat = 0
                    for dim in dims:
                        flat = flat * extent.get(dim, 1) + local.get(dim, 0)
                    key.append(flat // size)
                rest = tuple(local.get(dim, 0) for dim in sorted(extent)
                             if all(dim not in dims for dims, _ in instructions))
                values = {d: fixed.get(d, 0) + local.get(d, 0) for d in set(fixed) | set(local)}
                taken.setdefault((tuple(key), rest), set()).add(_coordinates(axes, values))
            for elements in taken.values():
                words += len(elements)
                moved.extend((tuple((x, x) for x in element), 1) for element in elements)
                touched |= elements
        traffic[instance] = (words, moved, touched)
    return traffic
