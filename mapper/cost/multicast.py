"""How many distinct tiles the children under one parent instance hold.

Children whose tiles are identical are served by one parent read (multicast) and their
identical output tiles are reduced into one update. A child's offset along a tensor axis
sum_d c_d * d is a sum over the spatial loops in between of index * c_d * stride, so the
offsets along an axis form a sumset of arithmetic progressions (step, count). Along an axis of
one dim they never collide (mixed radix), so the count is the product of the spatial bounds;
along a sliding axis (p+r) spatial loops over both dims can land on the same offset.
"""
from __future__ import annotations

from ..tiles import distinct_offsets

__all__ = ["distinct_offsets"]
