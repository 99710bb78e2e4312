"""Cost model: `evaluate` (one mapping, full breakdown) and `evaluate_many` (vectorised)."""
from .energy import access_energy
from .scalar import Evaluation, LevelCost, TensorCost, evaluate
from .vectorised import Costs, evaluate_many, footprint_bytes

__all__ = ("Costs", "access_energy", "Evaluation", "LevelCost", "TensorCost", "evaluate", "evaluate_many",
           "footprint_bytes")
