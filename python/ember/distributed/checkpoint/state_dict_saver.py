"""distributed.checkpoint.save: every rank writes its own tensors; the
coordinator (rank 0) writes the replicated ones and, when every rank is done,
the metadata. A plain tensor is taken as replicated (the coordinator's copy is
saved); a FlatShardedTensor as one range of a tensor split over the ranks
(each rank saves its range). Plain values (numbers, strings, booleans, None)
go into the metadata as JSON; anything else is refused (nothing is pickled)."""
import ember

from ... import distributed as _dist
from ._flatten import flatten_state_dict
from ._sharded import FlatShardedTensor
from .default_planner import DefaultSavePlanner
from .filesystem import FileSystemWriter, storage_for

__all__ = ["save", "async_save"]

_PLAIN = (int, float, str, bool, type(None))


def _dtype_name(dtype):
    return repr(dtype).split(".")[-1]


def _group_info(process_group, no_dist):
    if no_dist or not _dist.is_initialized():
        return 0, 1
    return _dist.get_rank(process_group), _dist.get_world_size(process_group)


def save(state_dict, *, checkpoint_id=None, storage_writer=None, planner=None, process_group=None, no_dist=False):
    if planner is not None and type(planner) is not DefaultSavePlanner:
        raise NotImplementedError("distributed.checkpoint.save: custom planners are not available in ember")
    storage_writer = storage_for(storage_writer, checkpoint_id, FileSystemWriter, "storage_writer")
    rank, world = _group_info(process_group, no_dist)
    coordinator = rank == 0
    tensors, entries = {}, {}
    for i, (key, _, _, v) in enumerate(flatten_state_dict(state_dict)):
        name = f"t{i}"
        if isinstance(v, FlatShardedTensor):
            tensors[name] = v.to_local().detach().contiguous().clone()
            entries[key] = {"kind": "tensor", "dtype": _dtype_name(v.dtype), "size": list(v.shape),
                            "chunks": [{"name": name, "offset": v.offset, "numel": v.local_numel}]}
        elif isinstance(v, ember.Tensor):
            if v.device.type != "cpu":
                v = v.cpu()
            if coordinator:
                tensors[name] = v.detach().reshape(-1).contiguous().clone()
            entries[key] = {"kind": "tensor", "dtype": _dtype_name(v.dtype), "size": list(v.shape),
                            "chunks": [{"name": name, "offset": 0, "numel": v.numel()}] if coordinator else []}
        elif isinstance(v, (list, tuple)):  # of plain values (_flatten.py)
            if any(isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))) for x in v):
                raise ValueError(f"distributed checkpoint: {key!r} holds a non-finite float in a sequence")
            entries[key] = {"kind": "value", "value": list(v)}
        elif isinstance(v, _PLAIN):
            if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
                entries[key] = {"kind": "float", "value": repr(v)}  # JSON has no NaN/inf
            else:
                entries[key] = {"kind": "value", "value": v}
        else:
            raise TypeError(f"distributed checkpoint: cannot save {key!r} of type {type(v).__name__}: ember "
                            "stores tensors and plain values (int, float, str, bool, None) only, never pickles")
    storage_writer._prepare() if coordinator else None
    if world > 1:
        _dist.barrier(group=process_group)  # the directory exists before anyone writes into it
    file = storage_writer._write_rank(rank, tensors)
    for e in entries.values():
        for c in e.get("chunks", ()):
            c["file"] = file
    gathered = [None] * world
    if world > 1:
        _dist.all_gather_object(gathered, entries, group=process_group)
    else:
        gathered = [entries]
    if coordinator:
        merged = {}
        for r_entries in gathered:
            for key, e in r_entries.items():
                m = merged.setdefault(key, dict(e, chunks=[]) if e["kind"] == "tensor" else e)
                if e["kind"] == "tensor":
                    if m["size"] != e["size"] or m["dtype"] != e["dtype"]:
                        raise ValueError(f"distributed checkpoint: ranks disagree about {key!r}: "
                                         f"{m['dtype']}{m['size']} and {e['dtype']}{e['size']}")
                    m["chunks"] += e["chunks"]
        storage_writer._write_metadata({"format": "ember-dcp", "version": 1, "world_size": world,
                                        "entries": merged})
    if world > 1:
        _dist.barrier(group=process_group)  # the checkpoint is complete when save returns on any rank
    return None


def async_save(*args, **kwargs):
    raise NotImplementedError("distributed.checkpoint.async_save is not available in ember; use save()")
