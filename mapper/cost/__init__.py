"""Cost model: `evaluate` (one mapping, full breakdown) and `evaluate_many` (vectorised)."""
from .scalar import Evaluation, LevelCost, TensorCost, evaluate
from .vectorised import Costs, evaluate_many, footprint_bytes

__all__ = ("Costs", "Evaluation", "LevelCost", "TensorCost", "evaluate", "evaluate_many",
           "footprint_bytes")
