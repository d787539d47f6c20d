"""DataParallel: torch's single-process replication of a module over several GPUs.

ember has no scatter / replicate / gather across devices, so a DataParallel over more than one
device raises NotImplementedError (use DistributedDataParallel, one process per device). Over no
device or one device (what CPU-only and single-GPU code such as transformers' Trainer ends up with)
it runs the module itself, as torch does."""
from ..modules.module import Module

__all__ = ["DataParallel"]


def _device_index(d):
    if isinstance(d, int):
        return d
    index = getattr(d, "index", None)
    if index is None and isinstance(d, str) and ":" in d:
        index = int(d.split(":", 1)[1])
    return 0 if index is None else index


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        from ... import cuda
        self.module = module
        self.dim = dim
        if not cuda.is_available():
            self.device_ids = []
            self.output_device = None
            return
        if device_ids is None:
            device_ids = list(range(cuda.device_count()))
        self.device_ids = [_device_index(d) for d in device_ids]
        if len(self.device_ids) > 1:
            raise NotImplementedError(f"DataParallel over devices {self.device_ids}: ember has no single-process "
                                      "multi-GPU replication; use nn.parallel.DistributedDataParallel with one "
                                      "process per device")
        self.output_device = _device_index(output_device) if output_device is not None else \
            (self.device_ids[0] if self.device_ids else None)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
