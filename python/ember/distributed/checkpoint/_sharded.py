"""FlatShardedTensor: what ember's sharded state dicts hold in place of
torch's DTensor/ShardedTensor (ember has no DTensor). FSDP shards the
flattened parameter, so each rank holds one contiguous range of a
parameter's row-major elements: the value is that range (a 1-D tensor), its
offset, and the parameter's global shape and dtype. distributed.checkpoint
saves each rank's range and can load it back into any other split of the
same tensor (a different world size)."""
import ember

__all__ = ["FlatShardedTensor"]


class FlatShardedTensor:
    def __init__(self, local_tensor, offset, size, process_group=None):
        if not isinstance(local_tensor, ember.Tensor) or local_tensor.dim() != 1:
            raise ValueError("FlatShardedTensor: the local part must be a 1-D tensor, got "
                             f"{getattr(local_tensor, 'shape', type(local_tensor).__name__)}")
        self._local = local_tensor
        self.offset = int(offset)
        self._size = ember.Size(size)
        total = 1
        for d in self._size:
            total *= d
        if not 0 <= self.offset <= self.offset + local_tensor.numel() <= total:
            raise ValueError(f"FlatShardedTensor: elements [{self.offset}, {self.offset + local_tensor.numel()})"
                             f" are outside a tensor of shape {tuple(self._size)} ({total} elements)")
        self._pg = process_group

    @property
    def shape(self):
        return self._size

    def size(self, dim=None):
        return self._size if dim is None else self._size[dim]

    def numel(self):
        n = 1
        for d in self._size:
            n *= d
        return n

    @property
    def local_numel(self):
        return self._local.numel()

    @property
    def dtype(self):
        return self._local.dtype

    @property
    def device(self):
        return self._local.device

    def to_local(self):
        """This rank's elements (a 1-D view of the shard it came from)."""
        return self._local

    local_tensor = to_local

    def full_tensor(self):
        """The whole tensor, assembled from every rank's part (a collective)."""
        from .. import distributed_c10d as c10d
        parts = [None] * c10d.get_world_size(self._pg)
        c10d.all_gather_object(parts, (self.offset, self._local.numel()), group=self._pg)
        m = max(n for _, n in parts)
        buf = ember.zeros(m, dtype=self.dtype)
        buf[:self._local.numel()] = self._local
        out = ember.empty(len(parts) * m, dtype=self.dtype)
        c10d.all_gather_into_tensor(out, buf, group=self._pg)
        full = ember.zeros(self.numel(), dtype=self.dtype)
        for r, (o, n) in enumerate(parts):
            full[o:o + n] = out[r * m:r * m + n]
        return full.view(self._size)

    def __repr__(self):
        return (f"FlatShardedTensor(shape={tuple(self._size)}, dtype={self.dtype}, "
                f"elements=[{self.offset}, {self.offset + self._local.numel()}))")
