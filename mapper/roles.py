"""Which dims of an einsum play the compute unit's native operation shape (a tensor core's m, n
and k), read off the einsum's structure rather than its dim names.

A tensor-core instruction (`mma.m16n8k16`) multiplies an m x k fragment of its first operand by
a k x n fragment of its second into an m x n fragment of the output. In an einsum
`Z[...] += A[...] * B[...]`:
- the dims that index no output (the reduction dims) play k;
- the dims that index the output and the first operand only play m;
- the dims that index the output and the second operand only play n;
- the dims that index all three (attention's heads, a batched GEMM's batch) are batch-like:
  outer loops, never in a fragment.
Several dims may share a role, as an implicit-GEMM convolution flattens N.P.Q into m and C.R.S
into k (`O[n,k,p,q] += I[n,c,p+r,q+s] * W[k,c,r,s]`: m = n.p.q, n = k, k = c.r.s); the fragment
constraint then applies to the product of their innermost tiles. A workload whose dims carry the
native shape's own names (a GEMM's m, n, k) keeps them: the names win where they are the dims'.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .spec import Arch, Workload

STRUCTURAL = ("m", "n", "k")        # the native-shape names inferred from the structure


@dataclass(frozen=True)
class Roles:
    """Per native-shape name (`names`), its size (`sizes`) and the dims that play it (`dims`,
    indices); `batch`: the batch-like dims; `by_name`: the workload's own dim names gave them."""
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    dims: tuple[tuple[int, ...], ...]
    batch: tuple[int, ...] = ()
    by_name: bool = False
    swapped: bool = False       # swap-AB: the einsum's m dims play the instruction's n and back

    def with_m_and_n_swapped(self) -> "Roles":
        """The roles of the transposed product (`Workload.operands_swapped`)."""
        if "m" not in self.names or "n" not in self.names:
            return dataclasses.replace(self, swapped=not self.swapped)
        dims = list(self.dims)
        m, n = self.names.index("m"), self.names.index("n")
        dims[m], dims[n] = dims[n], dims[m]
        return dataclasses.replace(self, dims=tuple(dims), swapped=not self.swapped)

    def of(self, name: str) -> tuple[int, ...]:
        return self.dims[self.names.index(name)]

    def fragments(self) -> tuple[tuple[tuple[int, ...], int], ...]:
        """(dims, native size) of every role some dim plays."""
        return tuple((dims, size) for dims, size in zip(self.dims, self.sizes) if dims)

    def grain(self, d: int) -> int:
        """The native size dim d's innermost tile must be a multiple of: its role's where it
        plays one alone, else 1 (a role it shares is checked on the product of their tiles)."""
        return next((size for dims, size in zip(self.dims, self.sizes) if dims == (d,)), 1)

    @property
    def fused(self) -> bool:
        """Whether some role is played by several dims (its constraint couples them)."""
        return any(len(dims) > 1 for dims in self.dims)

    def describe(self, workload: Workload) -> str:
        """`m = n.p.q, n = k, k = c.r.s (inferred; batch: g)`: for reports."""
        def product(dims):
            return "·".join(workload.dims[d] for d in dims) or "1"
        parts = ", ".join(f"{name} = {product(dims)}" for name, dims in zip(self.names, self.dims))
        how = "by name" if self.by_name else "inferred"
        how += ", operands swapped (swap-AB)" if self.swapped else ""
        batch = f"; batch: {product(self.batch)}" if self.batch else ""
        return f"{parts} ({how}{batch})"


class RolesError(ValueError):
    """No role assignment: `key` the native-shape entry it concerns, `reason` why, with what to do."""

    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key, self.reason = key, reason


def arch_roles(arch: Arch, workload: Workload) -> Roles | None:
    """The roles of `workload`'s dims on `arch`'s compute unit (`tensor_core_roles`), None when
    it has no native shape; `RolesError` when no assignment fits."""
    native = {name: size for name, size in arch.for_workload(workload).compute.native_shape if size > 1}
    return tensor_core_roles(workload, native) if native else None


def tensor_core_roles(workload: Workload, native: dict[str, int]) -> Roles:
    """The roles of `workload`'s dims for a native operation shape `native` (name -> size, the
    sizes > 1 only matter). By name when every such name is a dim of the workload; else, for a
    shape named m, n, k, from the einsum's structure; `RolesError` when neither applies. Under
    swap-AB (`Workload.operands_swapped`) those of the einsum as written, m and n exchanged."""
    roles = _roles_as_written(workload, native)
    return roles.with_m_and_n_swapped() if workload.operands_swapped else roles


def _roles_as_written(workload: Workload, native: dict[str, int]) -> Roles:
    names = tuple(name for name, size in native.items() if size > 1)
    sizes = tuple(native[name] for name in names)
    if all(name in workload.dims for name in names):
        return Roles(names, sizes, tuple((workload.dims.index(name),) for name in names), by_name=True)
    unknown = [name for name in names if name not in STRUCTURAL]
    if unknown:
        raise RolesError(unknown[0], f"workload {workload.name} has no dim {unknown[0]!r} (dims: "
                         f"{', '.join(workload.dims)}), and only a shape named m, n, k is matched to an "
                         "einsum's structure; rename its dims to match, or set `align_to_native: false` in "
                         "the mapspace file (`--mapspace unaligned`)")
    inputs = workload.operands_as_written       # a block format's scales are no operands of the MMA
    if len(inputs) != 2:
        raise RolesError(names[0], f"workload {workload.name} has {len(inputs)} operand(s): tensor-core roles "
                         "are inferred for a product of two; name its dims like the native shape, or set "
                         "`align_to_native: false` in the mapspace file (`--mapspace unaligned`)")
    out = workload.tensors[workload.output].dims
    first, second = inputs[0].dims, inputs[1].dims
    side = {"m": sorted((out & first) - second), "n": sorted((out & second) - first),
            "k": sorted((first | second) - out)}
    if _swapped(workload, side):
        side["m"], side["n"] = side["n"], side["m"]
    if "k" in names and not side["k"]:
        raise RolesError("k", f"workload {workload.name} reduces over no dim (every dim indexes its output "
                         f"{workload.tensors[workload.output].name}), so nothing plays the native shape's "
                         "k: an elementwise einsum does not run on tensor cores; set `align_to_native: "
                         "false` in the mapspace file (`--mapspace unaligned`) to map it onto the units "
                         "without the fragment constraint")
    batch = tuple(sorted(out & first & second))
    return Roles(names, sizes, tuple(tuple(side[name]) for name in names), batch)


def _swapped(workload: Workload, side: dict) -> bool:
    """Whether a dim named m sits on the second operand's side (`Z[m,n] += B[k,n] * A[m,k]`):
    then the name says which operand is the fragment's m x k one. Only m is taken as a hint: a
    convolution's n is its batch, not a role."""
    return "m" in workload.dims and workload.dims.index("m") in side["n"]
