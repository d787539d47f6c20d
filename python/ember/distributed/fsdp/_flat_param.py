"""The flat parameter of one FSDP unit: its parameters flattened into one
buffer padded to a multiple of the shard count, each rank holding its
contiguous 1/world of it, and the collectives that move between the two
states.

Forward (grad mode) calls _Unshard, an autograd Function whose forward
all-gathers the shard (cast to param_dtype) and whose backward
reduce-scatters the gradient of the gathered buffer (cast to reduce_dtype,
divided by the world size: torch averages) into the shard's gradient, which
autograd then accumulates into `.grad`. The module's parameters are views of
the gathered buffer for the duration of the forward: they shadow the module
attributes through the instance __dict__.

Resharding after forward (FULL_SHARD) drops the gathered buffer. The views
autograd saved for backward would keep it alive, so while such a unit runs
its forward a saved-tensor pack hook replaces every saved view of its
buffer with a description (offset, size, stride); the unpack hook, run when
backward needs it, all-gathers the buffer again (once per backward) and
rebuilds the view. The buffer is dropped again after the gradient reduction.
"""
import ember
from ember import distributed as dist
from ember.autograd.function import Function
from ember.nn.parameter import Parameter

# storage address of a gathered buffer -> its handle, for the units that reshard after
# forward, while their forward runs (the pack hook asks it)
_GATHERED = {}


class _SavedView:
    __slots__ = ("handle", "size", "stride", "offset")

    def __init__(self, handle, size, stride, offset):
        self.handle, self.size, self.stride, self.offset = handle, size, stride, offset


def pack_saved(t):
    if not _GATHERED or t.numel() == 0:
        return t
    h = _GATHERED.get(t.untyped_storage().data_ptr())
    if h is None:
        return t
    return _SavedView(h, tuple(t.size()), tuple(t.stride()), t.storage_offset())


def unpack_saved(x):
    if isinstance(x, _SavedView):
        return x.handle._unshard_for_backward().as_strided(x.size, x.stride, x.offset)
    return x


class _Slot:
    """One distinct parameter of a unit: where it lives in the modules (every
    alias of a shared parameter), its shape, and its range in the flat buffer."""

    def __init__(self, param, aliases):
        self.param = param
        self.aliases = aliases  # [(module, attribute name, fqn relative to the unit's module)]
        self.shape = tuple(param.shape)
        self.numel = param.numel()
        self.offset = 0
        self.local = (0, 0)    # this rank's part: range in the local shard
        self.in_param = (0, 0)  # the same elements: range in the flattened parameter

    @property
    def fqn(self):
        return self.aliases[0][2]


class _Unshard(Function):
    @staticmethod
    def forward(ctx, handle, *params):
        ctx.handle = handle
        return handle._gather(handle.param_dtype)

    @staticmethod
    def backward(ctx, grad):
        return (None,) + ctx.handle._reduce_grad(grad)


class FlatParamHandle:
    def __init__(self, slots, *, process_group, sharded, reshard_after_forward, param_dtype, reduce_dtype,
                 use_orig_params, flat_param_owner=None):
        self.slots = slots
        self.pg = process_group
        self.world = dist.get_world_size(process_group)
        self.rank = dist.get_rank(process_group)
        self.nshards = self.world if sharded else 1
        self.reshard_after_forward = bool(reshard_after_forward) and self.nshards > 1
        self.use_orig_params = use_orig_params
        dtypes = sorted({str(s.param.dtype) for s in slots})
        if len(dtypes) > 1:
            raise ValueError(f"Must flatten tensors with uniform dtype but got {dtypes}")
        if not use_orig_params and len({s.param.requires_grad for s in slots}) > 1:
            raise ValueError("Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`")
        self.dtype = slots[0].param.dtype
        self.param_dtype = param_dtype or self.dtype
        self.reduce_dtype = reduce_dtype or self.param_dtype
        self.requires_grad = any(s.param.requires_grad for s in slots)
        n = 0
        for s in slots:
            s.offset = n
            n += s.numel
        self.numel = n
        self.padded_numel = -(-n // self.nshards) * self.nshards
        self.shard_numel = self.padded_numel // self.nshards
        self.shard_start = (self.rank if self.nshards > 1 else 0) * self.shard_numel
        lo, hi = self.shard_start, self.shard_start + self.shard_numel
        with ember.no_grad():
            flat = ember.zeros(self.padded_numel, dtype=self.dtype)
            for s in slots:
                flat[s.offset:s.offset + s.numel].copy_(s.param.detach().reshape(-1))
            local = flat[lo:hi].clone()
        for s in slots:  # the part of each parameter in [lo, hi), possibly empty
            a = min(max(lo - s.offset, 0), s.numel)
            b = max(min(hi - s.offset, s.numel), a)
            s.in_param = (a, b)
            start = min(max(s.offset + a - lo, 0), self.shard_numel)
            s.local = (start, start + b - a)
        if use_orig_params:
            self.flat_param = None
            self._local = local
            for s in slots:
                piece = local[s.local[0]:s.local[1]]
                s.param.data = piece.view(s.shape) if self.nshards == 1 else piece
                s.param.grad = None  # a gradient from before has the unsharded shape
        else:
            self.flat_param = Parameter(local, requires_grad=self.requires_grad)
            self._local = self.flat_param
            for s in slots:
                for m, name, _ in s.aliases:
                    m._parameters.pop(name, None)
            if flat_param_owner is not None:
                flat_param_owner.register_parameter("_flat_param", self.flat_param)
        self.full = None        # the gathered buffer of the current forward
        self._bw_full = None    # the one gathered again for backward
        self._ptr = None
        self._summoned = None
        self.no_sync = False
        self._unreduced = None  # gradients accumulated under no_sync, unsharded
        self.num_all_gathers = 0
        self.num_reductions = 0
        self._clear_attrs()

    # -- the local shard
    def local_shard(self):
        """This rank's shard (its padded 1/world of the flat buffer), no autograd."""
        return self._local.detach()

    def local_piece(self, s):
        a, b = s.local
        return self.local_shard()[a:b]

    def grads(self):
        if self.use_orig_params:
            return [s.param.grad for s in self.slots if s.param.grad is not None]
        return [] if self.flat_param.grad is None else [self.flat_param.grad]

    def params(self):
        return [s.param for s in self.slots] if self.use_orig_params else [self.flat_param]

    # -- collectives
    def _gather(self, dtype):
        shard = self.local_shard()
        if shard.dtype != dtype:
            shard = shard.to(dtype)
        if self.nshards == 1:
            return shard.clone() if shard.dtype == self.dtype else shard
        out = ember.empty(self.padded_numel, dtype=dtype)
        dist.all_gather_into_tensor(out, shard.contiguous(), group=self.pg)
        self.num_all_gathers += 1
        return out

    def _reduce_grad(self, grad):
        if self.no_sync:
            self._unreduced = grad.clone() if self._unreduced is None else self._unreduced + grad
            return (None,) * len(self.params())
        if self._unreduced is not None:
            grad = grad + self._unreduced
            self._unreduced = None
        g = grad.to(self.reduce_dtype) / self.world
        if self.nshards > 1:
            out = ember.empty(self.shard_numel, dtype=self.reduce_dtype)
            dist.reduce_scatter_tensor(out, g.contiguous(), group=self.pg)
        else:
            out = g.contiguous()
            if self.world > 1:
                dist.all_reduce(out, group=self.pg)
        self.num_reductions += 1
        out = out.to(self.dtype)
        if self.nshards > 1:  # the gradient is in: no gathered buffer is needed any more
            self._bw_full = None
            if not self.reshard_after_forward:
                self.reshard()
        if not self.use_orig_params:
            return (out,)
        if self.nshards == 1:
            return tuple(out[s.offset:s.offset + s.numel].view(s.shape) for s in self.slots)
        return tuple(out[s.local[0]:s.local[1]] for s in self.slots)

    def _unshard_for_backward(self):
        if self._bw_full is None:
            self._bw_full = self._gather(self.param_dtype)
        return self._bw_full

    # -- forward
    def pre_forward(self):
        self.reshard()  # a forward whose backward never ran leaves its buffer: gather afresh
        if ember.is_grad_enabled() and self.requires_grad:
            full = _Unshard.apply(self, *self.params())
            if self.reshard_after_forward:
                self._ptr = full.untyped_storage().data_ptr()
                _GATHERED[self._ptr] = self
        else:
            full = self._gather(self.param_dtype)
        self.full = full
        self._set_attrs(self._views(full))

    @property
    def packs_saved_views(self):
        return self._ptr is not None

    def post_forward(self):
        if self.reshard_after_forward or not (ember.is_grad_enabled() and self.requires_grad):
            self.reshard()

    def reshard(self):
        if self._ptr is not None:
            _GATHERED.pop(self._ptr, None)
            self._ptr = None
        if self.full is not None:
            self.full = None
            self._clear_attrs()

    def is_unsharded(self):
        return self.full is not None

    def _views(self, full):
        return [full[s.offset:s.offset + s.numel].view(s.shape) for s in self.slots]

    def _set_attrs(self, views):
        for s, v in zip(self.slots, views):
            for m, name, _ in s.aliases:
                m.__dict__[name] = v

    def _clear_attrs(self):
        for s in self.slots:
            for m, name, _ in s.aliases:
                if self.use_orig_params:
                    m.__dict__.pop(name, None)  # the sharded Parameter in _parameters shows again
                else:
                    m.__dict__[name] = ember.empty(0, dtype=self.dtype)

    # -- the full parameters outside forward (summon_full_params, state dicts)
    def full_values(self):
        """Every parameter's full value (a copy, the shard's dtype): one all-gather."""
        full = self._gather(self.dtype)
        return [v.clone() for v in self._views(full)]

    def summon_enter(self, expose=True):
        full = self._gather(self.dtype)
        if not expose:
            return
        self._summoned = full
        views = self._views(full)
        if self.use_orig_params:
            for s, v in zip(self.slots, views):
                s._sharded_data = s.param.data
                s.param.data = v
        else:
            self._set_attrs(views)

    def summon_exit(self, writeback):
        full = self._summoned
        if full is None:
            return
        self._summoned = None
        if writeback:
            with ember.no_grad():
                lo = self.shard_start
                self.local_shard().copy_(full[lo:lo + self.shard_numel])
        if self.use_orig_params:
            for s in self.slots:
                s.param.data = s._sharded_data
                del s._sharded_data
        else:
            self._clear_attrs()

    def load_slot(self, s, value, key):
        """Write `value` (the full parameter, or a FlatShardedTensor covering this
        rank's part) into this rank's shard; an error message, or None."""
        from ..checkpoint._sharded import FlatShardedTensor
        a, b = s.in_param
        if isinstance(value, FlatShardedTensor):
            if tuple(value.shape) != s.shape:
                return (f"size mismatch for {key}: copying a param with shape {ember.Size(value.shape)} from "
                        f"checkpoint, the shape in current model is {ember.Size(s.shape)}.")
            lo = value.offset
            if b > a and not (lo <= a and b <= lo + value.local_numel):
                return (f"{key}: the sharded value holds elements [{lo}, {lo + value.local_numel}) of the "
                        f"flattened parameter, but this rank's shard needs [{a}, {b})")
            src = value.to_local()[a - lo:b - lo]
        elif isinstance(value, ember.Tensor):
            if tuple(value.shape) != s.shape:
                return (f"size mismatch for {key}: copying a param with shape {ember.Size(value.shape)} from "
                        f"checkpoint, the shape in current model is {ember.Size(s.shape)}.")
            src = value.detach().reshape(-1)[a:b]
        else:
            return (f'While copying the parameter named "{key}", expected torch.Tensor or Tensor-like '
                    f"object from checkpoint but received {type(value)}")
        with ember.no_grad():
            self.local_piece(s).copy_(src)
        return None
