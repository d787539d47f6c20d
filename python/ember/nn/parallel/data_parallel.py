"""nn.DataParallel: one process driving several GPUs by splitting each batch.
Without CUDA (or with one device) it is the wrapped module itself, as in
torch: forward calls the module on the inputs. Splitting a batch across
several GPUs (replicate/scatter/gather) is not implemented: asking for more
than one device raises NotImplementedError (use DistributedDataParallel)."""
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_ids(device_ids):
    from ... import cuda
    if not cuda.is_available():
        return []
    if device_ids is None:
        device_ids = list(range(cuda.device_count()))
    return [d.index if hasattr(d, "index") else int(d) for d in device_ids]


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = _device_ids(device_ids)
        if len(self.device_ids) > 1:
            raise NotImplementedError(f"DataParallel over {len(self.device_ids)} GPUs: ember does not split batches "
                                      "across devices in one process; use DistributedDataParallel (one process "
                                      "per GPU), or pass device_ids=[0]")
        self.output_device = (output_device if output_device is not None else
                              (self.device_ids[0] if self.device_ids else None))
        if self.device_ids:
            self.src_device_obj = f"cuda:{self.device_ids[0]}"
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        from ...utils._pytree import tree_map
        from ... import _C
        dev = self.src_device_obj

        def move(x):
            return x.to(dev) if isinstance(x, _C.Tensor) else x
        return self.module(*tree_map(move, list(inputs)), **tree_map(move, kwargs))


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """module(*inputs) the DataParallel way, functionally."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return DataParallel(module, device_ids, output_device, dim)(*inputs, **(module_kwargs or {}))
