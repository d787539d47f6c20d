"""torch.distributed.checkpoint.hf_storage: not available in ember."""
from .._absent import absent_class
from . import _WHAT

HuggingFaceStorageReader = absent_class("HuggingFaceStorageReader", _WHAT)
HuggingFaceStorageWriter = absent_class("HuggingFaceStorageWriter", _WHAT)
