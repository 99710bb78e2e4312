"""Axes as products of atoms: how a layout op (reshape, transpose, expand) sees the elements of
a tensor an op produced, so that the einsum of the op that reads it indexes the right dims.

Every axis (of size > 1) of a *materialised* tensor (an op's output, a graph input, a weight)
starts as one atom. A reshape that splits an axis splits its atom into sub-atoms (outer first,
row-major); the split is the tensor's, so every view of it sees it. A *view* (what layout ops
make) is a tuple of axes, each a tuple of atoms; an atom may be *broadcast* (an `Expand` of a
size-1 axis: no data behind it). `AtomTable` is the one mutable structure of an import: it only
ever refines (splits) atoms, so a view built earlier stays valid and sees the refinement.
"""
from __future__ import annotations

import math

Axis = tuple[int, ...]            # atom ids, outermost first
View = tuple[Axis, ...]


class Mismatch(Exception):
    """Two lists of atoms of the same size whose boundaries cannot be aligned (a reshape that
    scrambles factors, e.g. [4, 6] read as [6, 4])."""


class AtomTable:
    def __init__(self):
        self.size: list[int] = []
        self.children: list[tuple[int, ...] | None] = []
        self.broadcast: list[bool] = []

    def new(self, size: int, broadcast: bool = False) -> int:
        self.size.append(size)
        self.children.append(None)
        self.broadcast.append(broadcast)
        return len(self.size) - 1

    def fresh(self, shape) -> View:
        """A materialised tensor's view: one atom per axis, none for a size-1 axis."""
        return tuple(() if s == 1 else (self.new(s),) for s in shape)

    def leaves(self, atoms) -> tuple[int, ...]:
        out = []
        for a in atoms:
            kids = self.children[a]
            out.extend((a,) if kids is None else self.leaves(kids))
        return tuple(out)

    def sizes(self, atoms) -> tuple[int, ...]:
        return tuple(self.size[a] for a in atoms)

    def axis_size(self, axis: Axis) -> int:
        return math.prod(self.size[a] for a in axis)

    def split(self, atom: int, outer: int) -> tuple[int, int]:
        """Split a leaf atom of size outer*inner into (outer, inner)."""
        assert self.children[atom] is None and self.size[atom] % outer == 0
        kids = (self.new(outer, self.broadcast[atom]), self.new(self.size[atom] // outer, self.broadcast[atom]))
        self.children[atom] = kids
        return kids

    def align(self, left: Axis, right: Axis) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Refine two atom lists of one total size to common boundaries; returns the matched
        groups (left atoms, right atoms) of equal size, one leaf on each side after refining.
        Raises Mismatch where a boundary of one side does not divide the other's atom."""
        a, b = list(self.leaves(left)), list(self.leaves(right))
        if math.prod(self.sizes(a)) != math.prod(self.sizes(b)):
            raise Mismatch("sizes differ")
        pairs = []
        while a and b:
            x, y = a.pop(0), b.pop(0)
            sx, sy = self.size[x], self.size[y]
            if sx == sy:
                pairs.append(((x,), (y,)))
            elif sx > sy:
                if sx % sy:
                    raise Mismatch(f"{sx} and {sy}")
                head, tail = self.split(x, sy)
                pairs.append(((head,), (y,)))
                a.insert(0, tail)
            else:
                if sy % sx:
                    raise Mismatch(f"{sx} and {sy}")
                head, tail = self.split(y, sx)
                pairs.append(((x,), (head,)))
                b.insert(0, tail)
        return pairs

    def regroup(self, view: View, shape) -> View:
        """A reshape: the view's atoms in order, cut into axes of the new sizes (row-major)."""
        atoms = list(self.leaves(a for axis in view for a in axis))
        out = []
        for size in shape:
            axis = []
            need = size
            while need > 1:
                if not atoms:
                    raise Mismatch("reshape past the end")
                x = atoms.pop(0)
                sx = self.size[x]
                if sx <= need:
                    if need % sx:
                        raise Mismatch(f"{need} and {sx}")
                    axis.append(x)
                    need //= sx
                else:
                    if sx % need:
                        raise Mismatch(f"{need} and {sx}")
                    head, tail = self.split(x, need)      # row-major: x's outer part ends this axis
                    axis.append(head)
                    atoms.insert(0, tail)
                    need = 1
            out.append(tuple(axis))
        if atoms:
            raise Mismatch("reshape leaves atoms over")
        return tuple(out)
