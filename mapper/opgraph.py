"""Op graphs: several ops (einsums, elementwise maps, row reductions) joined by tensors into a DAG.

Frozen values only; the loader (`load.opgraph`) builds and validates them, so every instance is
consistent: each tensor has one shape and one element size wherever it appears, at most one op
produces it, and the ops form a DAG (no cycle).

Each op carries a `Workload`: an einsum op its own einsum; an elementwise map or a row reduction
the streaming einsum `OUT[dims] += IN1[...] * IN2[...]` over its output's dims (one iteration
per output element, no reduction dim), which prices the op's traffic with the project's cost
model (every operand read, the output written). The op's arithmetic is `flops_per_element`
per output element (`docs/SPECS.md`, "Op graphs").
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from .spec import Workload

if TYPE_CHECKING:
    import networkx as nx

# elementwise kinds and their arithmetic per output element (estimates: GELU in its tanh form,
# SiLU x*sigmoid(x) as exp, add, divide, multiply); `map` is any other elementwise function (its
# `flops_per_element` says what it costs), `gather` an embedding lookup (the rows it reads are
# its input: no arithmetic)
ELEMENTWISE_FLOPS = MappingProxyType({"gelu": 8.0, "silu": 4.0, "relu": 1.0, "bias": 1.0,
                                      "add": 1.0, "scale": 1.0, "mul": 1.0, "mask": 1.0,
                                      "map": 1.0, "gather": 0.0})
# row reductions: (FLOPs per element, passes over the row): softmax max, then sum of exp, then
# normalise; layernorm mean and variance, then normalise; rmsnorm mean square, then normalise.
REDUCTIONS = MappingProxyType({"softmax": (5.0, 3), "layernorm": (8.0, 2), "rmsnorm": (5.0, 2)})
# a streaming op: any op whose inputs and output need not share an iteration space (pooling, a
# global reduction, an operator a model importer knows only by its bytes). Its inputs may index
# dims its output lacks; its streaming einsum reads each input and writes the output, and it
# shares no kernel with another op (nothing says how its tiles would line up with theirs).
STREAMS = MappingProxyType({"stream": 0.0})
FAMILIES = ("einsum", "elementwise", "reduction", "stream")


@dataclass(frozen=True)
class GraphTensor:
    """A tensor of the graph: its shape (sizes, in the producer's axis order) and element bits."""
    name: str
    shape: tuple[int, ...]
    bits: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def bytes(self) -> float:
        return self.elements * self.bits / 8


@dataclass(frozen=True)
class Op:
    """One op. `inputs`/`input_dims` in the order written; `workload` is the op's einsum (an
    einsum op) or its streaming einsum (the others); `reduced_dim` names the row dim of a
    reduction (a dim of its input and output); `passes`: reads of the input a reduction needs
    when its row does not stay on chip."""
    name: str
    kind: str                              # "einsum", an ELEMENTWISE_FLOPS key or a REDUCTIONS key
    inputs: tuple[str, ...]
    input_dims: tuple[tuple[str, ...], ...]
    output: str
    output_dims: tuple[str, ...]
    workload: Workload
    flops_per_element: float = 0.0         # einsums: 2 per MAC, counted by the cost model
    reduced_dim: str | None = None
    passes: int = 1

    @property
    def family(self) -> str:
        if self.kind == "einsum":
            return "einsum"
        if self.kind in STREAMS:
            return "stream"
        return "reduction" if self.kind in REDUCTIONS else "elementwise"

    @property
    def output_elements(self) -> int:
        return math.prod(self.workload.sizes[self.workload.dim_index(d)] for d in self.output_dims)

    @property
    def flops(self) -> float:
        """Arithmetic beyond the cost model's MACs: the op's per-element FLOPs (non-einsums)."""
        return 0.0 if self.family == "einsum" else self.flops_per_element * self.output_elements

    def dims_of(self, tensor: str) -> tuple[str, ...]:
        """The dim names this op indexes `tensor` with."""
        if tensor == self.output:
            return self.output_dims
        return self.input_dims[self.inputs.index(tensor)]


@dataclass(frozen=True)
class OpGraph:
    """Ops in the order written (a topological order: the loader checks it is one) and the
    tensors they join. Invariants: each tensor has at most one producer; no cycle."""
    name: str
    ops: tuple[Op, ...]
    tensors: tuple[GraphTensor, ...]
    description: str = ""
    source: str = ""
    file: str = field(default="", compare=False)

    def tensor(self, name: str) -> GraphTensor:
        return next(t for t in self.tensors if t.name == name)

    def op_index(self, name: str) -> int:
        return [op.name for op in self.ops].index(name)

    @cached_property
    def graph(self) -> nx.DiGraph:
        """Nodes: op indices; an edge i -> j for every tensor op i produces and op j reads
        (attribute `tensors`: their names). networkx is imported here, where a graph is built:
        at the top it was a fifth of every command's start-up (docs/RESULTS.md)."""
        import networkx as nx
        g = nx.DiGraph()
        g.add_nodes_from(range(len(self.ops)))
        for j, op in enumerate(self.ops):
            for t in op.inputs:
                i = self.producer(t)
                if i is not None:
                    if g.has_edge(i, j):
                        g[i][j]["tensors"] += (t,)
                    else:
                        g.add_edge(i, j, tensors=(t,))
        return g

    def producer(self, tensor: str) -> int | None:
        for i, op in enumerate(self.ops):
            if op.output == tensor:
                return i
        return None

    def consumers(self, tensor: str) -> tuple[int, ...]:
        return tuple(j for j, op in enumerate(self.ops) if tensor in op.inputs)

    def internal(self, ops) -> list[str]:
        """The intermediates of a group of ops: outputs of one of them read by another."""
        return [self.ops[i].output for i in ops if any(j in ops for j in self.consumers(self.ops[i].output))]

    @cached_property
    def inputs(self) -> tuple[str, ...]:
        """Tensors no op produces (activations and weights read from outside)."""
        return tuple(t.name for t in self.tensors if self.producer(t.name) is None)

    @cached_property
    def outputs(self) -> tuple[str, ...]:
        """Tensors produced and read by no op of the graph (its results)."""
        return tuple(op.output for op in self.ops if not self.consumers(op.output))

    @cached_property
    def intermediates(self) -> tuple[str, ...]:
        """Tensors produced by one op and read by another: the candidates for fusion."""
        return tuple(op.output for op in self.ops if self.consumers(op.output))
