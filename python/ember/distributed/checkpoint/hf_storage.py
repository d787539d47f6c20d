"""torch.distributed.checkpoint.hf_storage: not available in ember."""
from .._absent import absent_class

_WHAT = "HuggingFace storage for distributed checkpoints; use FileSystemWriter/FileSystemReader"
HuggingFaceStorageReader = absent_class("HuggingFaceStorageReader", _WHAT)
HuggingFaceStorageWriter = absent_class("HuggingFaceStorageWriter", _WHAT)
