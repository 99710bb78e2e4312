"""Each op's einsum: its dims (classes of the atoms it iterates together), each operand's index,
adjacent dims folded, and the names the bundled presets use.

`refine` aligns every op's equal atom lists across the whole graph, to a fixpoint, so that each
op then pairs leaf atoms one to one. `op_einsum` builds an op's einsum over those leaves: a dim
per class of leaves; broadcast leaves index nothing. `fold` merges dims that every operand
indexes together, adjacent and in one order (a GEMM's batch and sequence are one `m`), so an
einsum has as few dims as its data allows. `named` writes it as the presets do: a GEMM
`Z[m,n] += A[m,k] * B[k,n]`, attention `S[g,i,j] += Q[g,i,d] * K[g,j,d]` and
`O[g,i,d] += P[g,i,j] * V[g,j,d]`, a convolution `O[n,k,p,q] += I[n,c,p+r,q+s] * W[k,c,r,s]`,
so that an imported layer is the same workload, with the same key in a results store, as a
preset's layer of the same shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from .atoms import AtomTable, Mismatch
from .ops import Affine, Op

Term = tuple[int, int]                    # (dim, coefficient)


@dataclass(frozen=True)
class Einsum:
    dims: tuple[int, ...]                 # dim ids, in a stable order
    sizes: dict                           # dim -> size
    operands: tuple[tuple[tuple[Term, ...], ...], ...]   # output first: per axis, its terms
    leaves: dict = field(default_factory=dict)           # leaf atom -> the dim it is part of

    def dim_of(self, table: AtomTable, axis) -> int | None:
        """The one dim an atom list lies in (None where it lies in none or in several)."""
        dims = {self.leaves.get(x) for x in table.leaves(axis) if not table.broadcast[x]}
        return dims.pop() if len(dims) == 1 and None not in dims else None

    def indexes(self, operand: int) -> set[int]:
        return {d for axis in self.operands[operand] for d, _ in axis}


def refine(table: AtomTable, ops: list[Op]) -> None:
    """Split atoms until every equality of every op pairs leaves one to one."""
    while True:
        before = len(table.size)
        for op in ops:
            kept = []
            for a, b in op.equal:
                try:
                    table.align(a, b)
                    kept.append((a, b))
                except Mismatch:        # not the same iteration after all: the op reads it as a copy
                    pass
            op.equal = kept
        if len(table.size) == before:
            return


class Classes:
    """Union-find whose class is named by its least member, so that dims keep the order of the
    graph the same way in every block of a network (networkx's UnionFind roots by weight, in a
    set's order: identical blocks would then name and fold their dims differently)."""

    def __init__(self):
        self.parent: dict = {}

    def __getitem__(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self[a], self[b]
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def op_einsum(table: AtomTable, op: Op, folding: bool = True) -> Einsum:
    classes = Classes()             # leaf atoms the op iterates together: one dim
    for a, b in op.equal:
        for left, right in table.align(a, b):
            classes.union(left[0], right[0])
    sizes: dict[int, int] = {}
    leaves: dict[int, int] = {}
    must_fold = []
    operands = []
    for operand in [op.output] + op.inputs:
        axes = []
        for index in operand.axes:
            if isinstance(index, Affine):
                terms = []
                for axis, coef in index.terms:
                    atoms = [x for x in table.leaves(axis) if not table.broadcast[x]]
                    dims = [classes[x] for x in atoms]
                    for x, d in zip(atoms, dims):
                        sizes[d] = table.size[x]
                        leaves[x] = d
                    if len(dims) > 1:
                        must_fold.append(tuple(dims))
                    if dims:
                        terms.append((dims[0], coef))
                axes.append(tuple(terms))
                continue
            for x in table.leaves(index):
                if table.broadcast[x]:
                    continue
                d = classes[x]
                sizes[d] = table.size[x]
                leaves[x] = d
                axes.append(((d, 1),))
        operands.append(tuple(a for a in axes if a))
    # every leaf of a class points at its dim (a class is named by one of its leaves)
    for x in list(classes.parent):
        if classes[x] in sizes:
            leaves[x] = classes[x]
    einsum = Einsum(tuple(sorted(sizes)), sizes, tuple(operands), leaves)
    for group in must_fold:
        einsum = _fold_run(einsum, group)
    # a row reduction's row is a dim of its own (the op graph names it): never folded with others;
    # a convolution keeps the presets' dims (n, k, c, p, q, r, s), however its data could fold
    row = frozenset(classes[x] for x in table.leaves(op.reduced)) if op.reduced is not None else frozenset()
    return fold(einsum, row) if folding and op.role != "conv" else einsum


def _occurrences(einsum: Einsum, d: int):
    for o, operand in enumerate(einsum.operands):
        for i, axis in enumerate(operand):
            if any(t[0] == d for t in axis):
                yield o, i, axis


def foldable(einsum: Einsum, a: int, b: int) -> bool:
    """Whether every operand that indexes a or b indexes both, as plain axes, a right before b."""
    for o, operand in enumerate(einsum.operands):
        has_a = [i for i, axis in enumerate(operand) if any(t[0] == a for t in axis)]
        has_b = [i for i, axis in enumerate(operand) if any(t[0] == b for t in axis)]
        if not has_a and not has_b:
            continue
        if len(has_a) != 1 or len(has_b) != 1 or has_b[0] != has_a[0] + 1:
            return False
        if operand[has_a[0]] != ((a, 1),) or operand[has_b[0]] != ((b, 1),):
            return False
    return True


def merge(einsum: Einsum, a: int, b: int) -> Einsum:
    """Fold b into a (a outer): a's size becomes a*b and b's axes go."""
    sizes = {d: s for d, s in einsum.sizes.items() if d != b}
    sizes[a] = einsum.sizes[a] * einsum.sizes[b]
    operands = []
    for operand in einsum.operands:
        axes = []
        for axis in operand:
            if any(t[0] == b for t in axis) and len(axis) == 1:
                continue
            axes.append(axis)
        operands.append(tuple(axes))
    leaves = {x: (a if d == b else d) for x, d in einsum.leaves.items()}
    return Einsum(tuple(d for d in einsum.dims if d != b), sizes, tuple(operands), leaves)


def fold(einsum: Einsum, apart: frozenset = frozenset()) -> Einsum:
    """Fold adjacent dims while any can be; a dim of `apart` folds only with another of it."""
    changed = True
    while changed:
        changed = False
        for o, operand in enumerate(einsum.operands):
            for left, right in zip(operand, operand[1:]):
                if len(left) == 1 and len(right) == 1 and left[0][1] == 1 and right[0][1] == 1:
                    a, b = left[0][0], right[0][0]
                    if a != b and (a in apart) == (b in apart) and foldable(einsum, a, b):
                        einsum = merge(einsum, a, b)
                        changed = True
                        break
            if changed:
                break
    return einsum


def _fold_run(einsum: Einsum, dims: tuple[int, ...]) -> Einsum:
    """Dims an affine index needs as one (an output row a reshape split): merged wherever they
    appear (they are adjacent there: the split came from one axis)."""
    head = dims[0]
    for d in dims[1:]:
        sizes = {k: v for k, v in einsum.sizes.items() if k != d}
        sizes[head] = sizes[head] * einsum.sizes[d]
        operands = tuple(tuple(axis for axis in operand if axis != ((d, 1),)) for operand in einsum.operands)
        leaves = {x: (head if y == d else y) for x, y in einsum.leaves.items()}
        einsum = Einsum(tuple(x for x in einsum.dims if x != d), sizes, operands, leaves)
    return einsum


# ------------------------------------------------------------------------------ names

CONV_OUT = ("p", "q", "h")
CONV_WIN = ("r", "s", "v")
LETTERS = "abcdefghjklmnopqrstuvwxyz"


@dataclass(frozen=True)
class Named:
    """An einsum written out: the text, its sizes in order, the tensors' names in order."""
    text: str
    sizes: tuple[tuple[str, int], ...]
    tensors: tuple[str, ...]              # output first


def _write(einsum: Einsum, names: dict[int, str], tensors, order) -> Named:
    def axis_text(axis):
        return "+".join(names[d] if c == 1 else f"{c}*{names[d]}" for d, c in axis)
    parts = [f"{t}[{','.join(axis_text(a) for a in operand)}]" for t, operand in zip(tensors, einsum.operands)]
    text = f"{parts[0]} += {' * '.join(parts[1:])}"
    return Named(text, tuple((names[d], einsum.sizes[d]) for d in order), tuple(tensors))


def roles(einsum: Einsum) -> dict[str, list[int]]:
    """A two-input contraction's dims by which operands index them."""
    z, a, b = (einsum.indexes(i) for i in range(3))
    out = {"g": [], "m": [], "n": [], "k": [], "x": []}
    for d in _in_order(einsum):
        key = {(1, 1, 1): "g", (1, 1, 0): "m", (1, 0, 1): "n", (0, 1, 1): "k"}.get(
            (d in z, d in a, d in b), "x")
        out[key].append(d)
    return out


def _in_order(einsum: Einsum) -> list[int]:
    """Dims in order of first appearance (output, then inputs)."""
    seen = []
    for operand in einsum.operands:
        for axis in operand:
            for d, _ in axis:
                if d not in seen:
                    seen.append(d)
    return seen


def _labels(dims: list[int], base: str) -> dict[int, str]:
    return {d: base if i == 0 else f"{base}{i + 1}" for i, d in enumerate(dims)}


CONTRACTION_NAMES = MappingProxyType({
    # role: (names of g, m, n, k), tensor names (output, A, B), size order
    "gemm": (("g", "m", "n", "k"), ("Z", "A", "B"), ("g", "m", "n", "k")),
    "bmm": (("g", "m", "n", "k"), ("Z", "A", "B"), ("g", "m", "n", "k")),
    "score": (("g", "i", "j", "d"), ("S", "Q", "K"), ("g", "i", "j", "d")),
    "value": (("g", "i", "d", "j"), ("O", "P", "V"), ("g", "i", "j", "d")),
})


def named(einsum: Einsum, op: Op, table: AtomTable) -> Named:
    if op.role == "conv":
        return _named_conv(einsum, op, table)
    if op.role in CONTRACTION_NAMES and len(einsum.operands) == 3:
        return _named_contraction(einsum, op)
    return generic_names(einsum, ["Y"] + [f"X{i}" if len(op.inputs) > 1 else "X" for i in range(len(op.inputs))])


def generic_names(einsum: Einsum, tensors) -> Named:
    order = _in_order(einsum)
    names = {d: LETTERS[i] if i < len(LETTERS) else f"d{i}" for i, d in enumerate(order)}
    return _write(einsum, names, tensors, order)


def _named_contraction(einsum: Einsum, op: Op) -> Named:
    (g, m, n, k), tensors, order = CONTRACTION_NAMES[op.role]
    by_dims = roles(einsum)
    if by_dims["x"]:
        return generic_names(einsum, list(tensors))
    names = {**_labels(by_dims["g"], g), **_labels(by_dims["m"], m), **_labels(by_dims["n"], n),
             **_labels(by_dims["k"], k)}
    by_role = dict(zip(("g", "m", "n", "k"), (g, m, n, k)))
    sequence = [d for letter in order for role, name in by_role.items() if name == letter for d in by_dims[role]]
    return _write(einsum, names, tensors, sequence)


CONV_ROLES = ("n", "g", "k", "c") + CONV_OUT + CONV_WIN


def _named_conv(einsum: Einsum, op: Op, table: AtomTable) -> Named:
    """Each dim named by the axis the lowering tagged it with (`op.attrs["roles"]`: the batch,
    groups, output and input channels per group, positions and window), in that order."""
    names, order = {}, []
    for role in CONV_ROLES:
        axis = op.attrs["roles"].get(role)
        d = einsum.dim_of(table, axis) if axis else None
        if d is not None and d not in names:
            names[d] = role
            order.append(d)
    if set(order) != set(einsum.sizes):
        return generic_names(einsum, ["O", "I", "W"])
    return _write(einsum, names, ("O", "I", "W"), order)
