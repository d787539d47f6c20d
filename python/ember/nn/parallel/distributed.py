"""DistributedDataParallel: one model replica per process, gradients
averaged across the process group during backward.

At construction the parameters and buffers are broadcast from rank 0, and
the parameters that need gradients are split into buckets of about
`bucket_cap_mb` MB (in reverse registration order, the order backward
produces their gradients; one dtype per bucket; the first bucket 1 MB as
torch's). A post-accumulate-grad hook on every parameter marks it ready;
when every parameter of a bucket is ready the bucket's gradients are
copied into its flat buffer, divided by the world size and all-reduced with
async_op=True, so the all-reduce runs on the group's progress thread while
backward computes the next gradients. Buckets are launched in index order
on every rank (a bucket that fills early waits for the ones before it), so
all ranks issue the same collectives in the same order. When the last
bucket has been launched, the hook waits for all of them and writes the
averaged gradients back into `.grad`.

`find_unused_parameters=True` walks the autograd graph of the forward's
outputs to find the parameters this iteration does not reach: they count as
ready from the start with zero gradients, and one more all-reduce of a
"used" mask finds those no rank used, whose `.grad` is left untouched.
`no_sync()` skips the reduction (gradients accumulate locally; the next
synchronized backward reduces the sum).
"""
import contextlib

import ember
from ember.nn.modules.module import Module

_FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    def __init__(self, params, dtype):
        self.params = params
        self.dtype = dtype
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p.numel()
        self.buffer = ember.zeros(n, dtype=dtype)
        self.pending = 0
        self.work = None

    def view(self, i):
        p, o = self.params[i], self.offsets[i]
        return self.buffer[o:o + p.numel()].view(p.shape)


def _reached_leaves(outputs):
    """ids of the leaf tensors the autograd graph of `outputs` accumulates into."""
    found, seen, stack = set(), set(), []

    def collect(o):
        if isinstance(o, ember.Tensor):
            if o.grad_fn is not None:
                stack.append(o.grad_fn)
            elif o.requires_grad:
                found.add(id(o))
        elif isinstance(o, (list, tuple)):
            for x in o:
                collect(x)
        elif isinstance(o, dict):
            for x in o.values():
                collect(x)
    collect(outputs)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None)
        if var is not None:
            found.add(id(var))
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return found


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None,
                 mixed_precision=None, device_mesh=None):
        super().__init__()
        from ember import distributed as dist
        self._dist = dist
        if not dist.is_initialized() and process_group is None:
            raise ValueError("Default process group has not been initialized, please make sure to "
                             "call init_process_group.")
        self.module = module
        self.process_group = process_group
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self._world = dist.get_world_size(process_group)
        params, seen = [], set()
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any "
                               "parameter that requires a gradient.")
        self._params = params
        if init_sync:
            self._broadcast_coalesced(list(module.parameters()) + list(module.buffers()))
        self._build_buckets()
        self._handles = [p.register_post_accumulate_grad_hook(self._make_hook(i))
                         for i, p in enumerate(params)]
        self._reset()
        self._expect_reduction = False

    # -- setup
    def _broadcast_coalesced(self, tensors):
        """Rank 0's values of `tensors`, one broadcast per dtype."""
        by_dtype = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        with ember.no_grad():
            for dtype, ts in by_dtype.items():
                flat = ember.cat([t.detach().reshape(-1) for t in ts])
                self._dist.broadcast(flat, src=self._global_rank0(), group=self.process_group)
                o = 0
                for t in ts:
                    t.copy_(flat[o:o + t.numel()].view(t.shape))
                    o += t.numel()

    def _global_rank0(self):
        if self.process_group is None:
            return 0
        return self._dist.get_global_rank(self.process_group, 0)

    def _build_buckets(self):
        self._buckets = []
        self._where = [None] * len(self._params)  # param index -> (bucket, slot)
        open_ = {}  # dtype -> (params, bytes)
        cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap)

        def close(dtype):
            ps, _ = open_.pop(dtype)
            b = _Bucket([self._params[i] for i in ps], dtype)
            for slot, i in enumerate(ps):
                self._where[i] = (len(self._buckets), slot)
            self._buckets.append(b)
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            ps, nbytes = open_.setdefault(p.dtype, ([], 0))
            ps.append(i)
            nbytes += p.numel() * p.element_size()
            open_[p.dtype] = (ps, nbytes)
            if nbytes >= cap:
                close(p.dtype)
                cap = self.bucket_bytes_cap
        for dtype in list(open_):
            close(dtype)

    # -- per iteration
    def _reset(self):
        self._ready = [False] * len(self._params)
        self._used = [True] * len(self._params)
        for b in self._buckets:
            b.pending = len(b.params)
            b.work = None
        self._next_launch = 0
        self._any_ready = False

    def forward(self, *inputs, **kwargs):
        grad_on = ember.is_grad_enabled()
        if grad_on and self.require_backward_grad_sync:
            if self._expect_reduction and self._any_ready:
                raise RuntimeError(
                    "Expected to have finished reduction in the prior iteration before starting a "
                    "new one. This error indicates that your module has parameters that were not "
                    "used in producing loss. You can enable unused parameter detection by passing "
                    "the keyword argument `find_unused_parameters=True` to "
                    "`torch.nn.parallel.DistributedDataParallel`, and by making sure all `forward` "
                    "function outputs participate in calculating loss.")
            self._reset()
        if self.broadcast_buffers and self.require_backward_grad_sync:
            bufs = list(self.module.buffers())
            if bufs:
                self._broadcast_coalesced(bufs)
        out = self.module(*inputs, **kwargs)
        if grad_on and self.require_backward_grad_sync:
            self._expect_reduction = True
            if self.find_unused_parameters or self.static_graph:
                reached = _reached_leaves(out)
                for i, p in enumerate(self._params):
                    if id(p) not in reached:
                        self._used[i] = False
                        self._mark_ready(i)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of backward passes inside accumulate locally, unreduced."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _make_hook(self, i):
        def hook(param):
            if self.require_backward_grad_sync and self._expect_reduction:
                self._mark_ready(i)
        return hook

    def _mark_ready(self, i):
        if self._ready[i]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter at index {i} has been "
                "marked as ready twice: it took part in two backward passes of one iteration, or "
                "is shared (pass static_graph=True or run the second backward under no_sync()).")
        self._ready[i] = True
        self._any_ready = True
        b, _ = self._where[i]
        self._buckets[b].pending -= 1
        # launch every bucket, in order, whose parameters are all ready
        while self._next_launch < len(self._buckets) and self._buckets[self._next_launch].pending == 0:
            self._launch(self._buckets[self._next_launch])
            self._next_launch += 1
        if self._next_launch == len(self._buckets):
            self._finalize()

    def _launch(self, b):
        with ember.no_grad():
            for slot, p in enumerate(b.params):
                view = b.view(slot)
                g = p.grad
                if g is None or not self._used[self._where_index(b, slot)]:
                    view.zero_()
                elif g.data_ptr() != view.data_ptr():
                    view.copy_(g)
            b.buffer.div_(self._world)
        b.work = self._dist.all_reduce(b.buffer, group=self.process_group, async_op=True)

    def _where_index(self, b, slot):
        return self._param_index[id(b.params[slot])]

    @property
    def _param_index(self):
        idx = self.__dict__.get("_param_index_cache")
        if idx is None:
            idx = {id(p): i for i, p in enumerate(self._params)}
            self.__dict__["_param_index_cache"] = idx
        return idx

    def _finalize(self):
        for b in self._buckets:
            b.work.wait()
        globally_used = None
        if self.find_unused_parameters or self.static_graph:
            mask = ember.tensor([1 if u else 0 for u in self._used], dtype=ember.int32)
            self._dist.all_reduce(mask, group=self.process_group)
            globally_used = mask.tolist()
        with ember.no_grad():
            for b in self._buckets:
                for slot, p in enumerate(b.params):
                    i = self._where_index(b, slot)
                    if globally_used is not None and globally_used[i] == 0:
                        continue  # no rank used it: .grad stays as it was
                    view = b.view(slot)
                    if self.gradient_as_bucket_view:
                        if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                            p.grad = view
                    elif p.grad is None:
                        p.grad = view.clone()
                    else:
                        p.grad.copy_(view)
        self._expect_reduction = False
