"""distributed.checkpoint.load: fill the given state_dict in place from a
checkpoint. A plain tensor is read whole; a FlatShardedTensor reads only the
range it holds, from whichever ranks' files cover it, so a checkpoint saved
with one world size loads into shards of another. Plain values are replaced
in their container."""
import ember

from ._flatten import flatten_state_dict
from ._sharded import FlatShardedTensor
from .default_planner import DefaultLoadPlanner
from .filesystem import FileSystemReader, storage_for

__all__ = ["load"]


def _read_range(reader, entry, key, lo, hi, dtype):
    """Elements [lo, hi) of the flattened tensor `key`."""
    out = ember.empty(hi - lo, dtype=dtype)
    covered = 0
    for c in entry["chunks"]:
        a, b = max(lo, c["offset"]), min(hi, c["offset"] + c["numel"])
        if a >= b:
            continue
        src = reader._tensor(c["file"], c["name"])
        out[a - lo:b - lo] = src[a - c["offset"]:b - c["offset"]]
        covered += b - a
    if covered < hi - lo:
        raise RuntimeError(f"distributed checkpoint: {key!r} elements [{lo}, {hi}) are not all in the checkpoint")
    return out


def load(state_dict, *, checkpoint_id=None, storage_reader=None, planner=None, process_group=None, no_dist=False):
    if planner is not None and type(planner) is not DefaultLoadPlanner:
        raise NotImplementedError("distributed.checkpoint.load: custom planners are not available in ember")
    storage_reader = storage_for(storage_reader, checkpoint_id, FileSystemReader, "storage_reader")
    meta = storage_reader.read_metadata()
    entries = meta["entries"]
    for key, container, k, v in flatten_state_dict(state_dict):
        if key not in entries:
            if getattr(planner, "allow_partial_load", False):
                continue
            raise RuntimeError(f"Missing key in checkpoint state_dict: {key}.")
        e = entries[key]
        if e["kind"] == "tensor":
            size = tuple(e["size"])
            numel = 1
            for d in size:
                numel *= d
            if isinstance(v, FlatShardedTensor):
                if tuple(v.shape) != size:
                    raise RuntimeError(f"Size mismatch between saved {list(size)} and current: "
                                       f"{list(v.shape)} for {key}")
                data = _read_range(storage_reader, e, key, v.offset, v.offset + v.local_numel, v.dtype)
                with ember.no_grad():
                    v.to_local().copy_(data)
            elif isinstance(v, ember.Tensor):
                if tuple(v.shape) != size:
                    raise RuntimeError(f"Size mismatch between saved {list(size)} and current: "
                                       f"{list(v.shape)} for {key}")
                data = _read_range(storage_reader, e, key, 0, numel, v.dtype)
                with ember.no_grad():
                    v.copy_(data.view(size))
            else:
                raise RuntimeError(f"distributed checkpoint: {key!r} is a tensor in the checkpoint but "
                                   f"{type(v).__name__} in the state_dict to load")
        elif e["kind"] == "float":
            container[k] = float(e["value"])
        else:
            value = e["value"]
            container[k] = tuple(value) if isinstance(v, tuple) and isinstance(value, list) else value
    storage_reader._files = {}
