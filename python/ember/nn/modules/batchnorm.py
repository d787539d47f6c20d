"""BatchNorm1d/2d and GroupNorm (torch.nn's): affine parameters initialized to
ones and zeros, running statistics as buffers (with num_batches_tracked)."""
from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm"]


class _BatchNorm(Module):
    _version = 2
    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(_C.empty(num_features, **kw))
            if bias:
                self.bias = Parameter(_C.empty(num_features, **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros(num_features, **kw))
            self.register_buffer("running_var", _C.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", _C.tensor(0, dtype=_C._dtypes["int64"]))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def forward(self, input):
        if input.dim() not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input (got {input.dim()}D input)")
        running_mean, running_var, use_batch, factor = self._statistics_step()
        return F.batch_norm(input, running_mean, running_var, self.weight, self.bias, use_batch, factor, self.eps)

    def _statistics_step(self):
        """(running mean, running var, whether to use the batch's statistics,
        the running average's factor), counting this batch in training"""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return (self.running_mean if track else None), (self.running_var if track else None), use_batch, factor

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = _C.tensor(0, dtype=_C._dtypes["int64"])  # checkpoints from before the counter
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(init.ones_(_C.empty(num_channels, device=device, dtype=dtype)))
            if bias:
                self.bias = Parameter(init.zeros_(_C.empty(num_channels, device=device, dtype=dtype)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class BatchNorm3d(_BatchNorm):
    _dims = (5,)


__all__ += ["BatchNorm3d"]


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over N-D input whose batch statistics, in training inside an
    initialized process group of more than one rank, are those of the whole
    batch across the group's ranks (nn/modules/_functions.py); elsewhere (one
    process, eval mode) exactly BatchNorm. Unlike torch's, CPU tensors
    synchronise too (through gloo)."""
    _dims = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def forward(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        running_mean, running_var, use_batch, factor = self._statistics_step()
        group, world = self._group() if use_batch and self.training else (None, 1)
        if world <= 1:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias, use_batch, factor, self.eps)
        from ._functions import SyncBatchNorm as sync
        return sync.apply(input, self.weight, self.bias, running_mean, running_var, self.eps, factor, group, world)

    def _group(self):
        import sys
        dist = sys.modules.get("ember.distributed")
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None, 1
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        return group, dist.get_world_size(group)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*D replaced by a SyncBatchNorm holding the
        same parameters and running statistics (the module itself when it is
        one), recursively."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


__all__ += ["SyncBatchNorm"]
