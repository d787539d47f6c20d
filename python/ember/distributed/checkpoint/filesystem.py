"""Where a distributed checkpoint lives: a directory holding one safetensors
file per rank (`__<rank>_0.safetensors`, that rank's tensors and shards) and
`.metadata`, a JSON file the coordinator writes last saying, for every
flattened key, its dtype and global shape and which file holds which range
(or, for plain values, the value itself). Nothing in either is code (no
pickle); the layout is ember's own, not readable by torch."""
import json
import os

from ... import safetensors
from ...serialization import _atomic_write

__all__ = ["FileSystemWriter", "FileSystemReader", "StorageWriter", "StorageReader"]

METADATA_FILE = ".metadata"


class StorageWriter:
    pass


class StorageReader:
    pass


class FileSystemWriter(StorageWriter):
    def __init__(self, path, single_file_per_rank=True, sync_files=True, thread_count=1,
                 per_thread_copy_ahead=10_000_000, cache_staged_state_dict=False, overwrite=True):
        self.path = os.fspath(path)
        self.overwrite = overwrite
        self.sync_files = sync_files

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)

    def _prepare(self):
        os.makedirs(self.path, exist_ok=True)
        if not self.overwrite and os.path.exists(os.path.join(self.path, METADATA_FILE)):
            raise RuntimeError(f"Checkpoint already exists at {self.path} and overwrite=False.")

    def _write_rank(self, rank, tensors):
        name = f"__{rank}_0.safetensors"
        safetensors.save_file(tensors, os.path.join(self.path, name))
        return name

    def _write_metadata(self, meta):
        text = json.dumps(meta, sort_keys=True).encode("utf-8")
        _atomic_write(os.path.join(self.path, METADATA_FILE), lambda fp: fp.write(text))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return isinstance(checkpoint_id, (str, os.PathLike))


class FileSystemReader(StorageReader):
    def __init__(self, path):
        self.path = os.fspath(path)
        self._files = {}

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
        self._files = {}

    def read_metadata(self):
        p = os.path.join(self.path, METADATA_FILE)
        if not os.path.exists(p):
            raise FileNotFoundError(f"no distributed checkpoint at {self.path}: {METADATA_FILE} is missing")
        with open(p, "rb") as fp:
            meta = json.loads(fp.read().decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != "ember-dcp" or "entries" not in meta:
            raise ValueError(f"{p} is not an ember distributed checkpoint's metadata")
        return meta

    def _tensor(self, file, name):
        if os.path.basename(file) != file:
            raise ValueError(f"checkpoint metadata names a file outside the checkpoint: {file!r}")
        if file not in self._files:
            self._files[file] = safetensors.load_file(os.path.join(self.path, file))
        return self._files[file][name]

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id):
        return os.path.isdir(os.fspath(checkpoint_id))


def storage_for(storage, checkpoint_id, cls, what):
    """save/load's storage: `storage` (re-pointed at checkpoint_id when both are
    given) or a new cls(checkpoint_id), torch's error when neither is."""
    if storage is None:
        if checkpoint_id is None:
            raise RuntimeError("`checkpoint_id` must be specificed if storage_writer/storage_reader is None.")
        return cls(checkpoint_id)
    if checkpoint_id is not None:
        storage.reset(checkpoint_id)
    if not isinstance(storage, cls):
        raise TypeError(f"{what} must be a {cls.__name__}, got {type(storage).__name__}")
    return storage
