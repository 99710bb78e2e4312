"""What the tool can handle, refused up front (by the loader) with the limit named.

Each limit keeps one of the engine's steps bounded in time or memory, or keeps its arithmetic
exact: int64 tables and float64 costs. The figures are generous for real hardware and
workloads (the largest presets are far inside them); anything above is almost surely a typo.
"""

MAX_FILE_BYTES = 4 * 2**20       # a spec file; real ones are a few KiB
MAX_YAML_DEPTH = 64              # nesting of YAML collections (the reader recurses per level)
MAX_YAML_NODES = 200_000         # nodes once aliases are expanded (alias bombs)
MAX_NAME = 128                   # characters in a name (dim, tensor, level, spec name)
MAX_TEXT = 10_000                # characters in an einsum or a description
MAX_INT_LITERAL = 100            # characters of an integer literal: hex or sexagesimal ones escape
                                 # Python's 4,300-digit limit, and no message could print them
MAX_EXPR = 500                   # characters of a model's expression (Python's parser recurses per operator)

MAX_INT = 2**31 - 1              # any count or bound: prime factorisation by trial division
MAX_DIMS = 8                     # dims of an einsum: loop orders are permutations of them
MAX_TENSORS = 8                  # tensors of an einsum: keep sets are subsets of them
MAX_OPS = 64                     # ops of an op graph: fusion prices groups of them (quadratic and more)
MAX_WARPS = 32                   # warps of a thread block (CUDA's 1,024 threads): a Triton config's num_warps
MAX_COEFFICIENT = 2**16          # an index coefficient (a stride)
MAX_MACS = 2**53                 # product of the sizes: exact in float64 and in int64 tables
MAX_DIM_SPLITS = 2_000_000       # ways to split one dim over the slots (rows of its table)
MAX_BITS = 1024                  # bits per element
MAX_LEVELS = 12                  # storage levels of an architecture
MAX_INSTANCES = 2**24            # instances of a level or of the compute units
MAX_STAGES = 16                  # buffering depth
MAX_BYTES = 2.0**60              # a capacity (1 EiB), else `unlimited`
MAX_RATE = 2.0**50               # a bandwidth in bytes per cycle, else `unlimited`
MAX_ENERGY = 1e12                # pJ per access, per byte, per MAC or leaked per cycle
MIN_CLOCK, MAX_CLOCK = 1.0, 1e12     # Hz
MAX_AREA = 1e6                   # mm^2 of one instance or unit (a 300 mm wafer is ~70,000 mm^2)
