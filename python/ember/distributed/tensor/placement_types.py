"""How a tensor's dims map onto a device mesh: torch's placement types,
as plain comparable descriptions (ember has no DTensor to place)."""
from dataclasses import dataclass

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    def is_shard(self, dim=None):
        return isinstance(self, Shard) and (dim is None or self.dim == dim)

    def is_replicate(self):
        return isinstance(self, Replicate)

    def is_partial(self):
        return isinstance(self, Partial)


@dataclass(frozen=True)
class Shard(Placement):
    dim: int

    def __repr__(self):
        return f"Shard(dim={self.dim})"


@dataclass(frozen=True)
class _StridedShard(Shard):
    split_factor: int = 1

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"


@dataclass(frozen=True)
class Replicate(Placement):
    def __repr__(self):
        return "Replicate()"


@dataclass(frozen=True)
class Partial(Placement):
    reduce_op: str = "sum"

    def __repr__(self):
        return f"Partial({self.reduce_op})"
