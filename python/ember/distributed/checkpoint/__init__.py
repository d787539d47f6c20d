"""torch.distributed.checkpoint on ember: save/load of (sharded) state
dicts, each rank writing its own shards and the coordinator the metadata
(state_dict_saver.py, state_dict_loader.py; the files: filesystem.py).
Sharded values are FlatShardedTensor (_sharded.py), what ember's FSDP
sharded state dicts hold; the storage is safetensors and JSON, never pickle.
The default planners are accepted; custom planners and HuggingFace storage are not available."""
from ._sharded import FlatShardedTensor
from .default_planner import DefaultLoadPlanner, DefaultSavePlanner
from .filesystem import FileSystemReader, FileSystemWriter, StorageReader, StorageWriter
from .state_dict_loader import load
from .state_dict_saver import async_save, save

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner", "FileSystemReader", "FileSystemWriter", "FlatShardedTensor", "StorageReader", "StorageWriter",
           "async_save", "load", "save"]
