"""FullyShardedDataParallel (torch's FSDP1 API) on CPU tensors over ember's
collectives.

Each FSDP instance is a unit: it owns the parameters of its wrapped module
that no FSDP unit inside it owns, flattened into one FlatParamHandle
(_flat_param.py). auto_wrap_policy wraps submodules bottom-up first, so a
policy makes nested units. Names follow torch: the wrapped module is the
child `_fsdp_wrapped_module`; with use_orig_params=False its parameters are
replaced by one `_flat_param` (this rank's shard) registered on it, with
use_orig_params=True the original Parameter objects stay, each holding this
rank's 1-D part of itself. named_parameters() keeps the
`_fsdp_wrapped_module.` prefixes as torch does, except inside
summon_full_params(), where (as in torch) they are stripped. State dicts
(FULL_STATE_DICT and SHARDED_STATE_DICT) use the unwrapped module's keys.

Collectives run synchronously on the calling thread's turn (no prefetching or
overlap): backward_prefetch, forward_prefetch, limit_all_gathers and
cpu_offload are accepted and change nothing (the shards are on the CPU).
Not available: hybrid sharding, device meshes, param_init_fn (deferred
initialization), LOCAL_STATE_DICT, communication hooks.
"""
import contextlib
import itertools
import weakref

import ember
from ember import distributed as dist
from ember.autograd.graph import saved_tensors_hooks
from ember.nn.modules.module import Module

from ._flat_param import FlatParamHandle, _Slot, pack_saved, unpack_saved
from .api import (FullOptimStateDictConfig, FullStateDictConfig, LocalOptimStateDictConfig,
                  LocalStateDictConfig, ShardedOptimStateDictConfig, ShardedStateDictConfig,
                  ShardingStrategy, StateDictSettings, StateDictType, BackwardPrefetch)
from .wrap import _recursive_wrap

__all__ = ["FullyShardedDataParallel"]

FSDP_WRAPPED_MODULE = "_fsdp_wrapped_module"
FSDP_PREFIX = FSDP_WRAPPED_MODULE + "."
FLAT_PARAM = "_flat_param"

_HYBRID = (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2)
_CONFIG_TYPES = {
    StateDictType.FULL_STATE_DICT: (FullStateDictConfig, FullOptimStateDictConfig),
    StateDictType.LOCAL_STATE_DICT: (LocalStateDictConfig, LocalOptimStateDictConfig),
    StateDictType.SHARDED_STATE_DICT: (ShardedStateDictConfig, ShardedOptimStateDictConfig),
}
_forward_depth = [0]  # FSDP forwards running now: the outermost one is the root's
# data_ptr of a buffer cast by MixedPrecision.buffer_dtype -> (weak reference to it, its original dtype)
_CAST_BUFFERS = {}


def _check_strategy(strategy):
    if strategy is None:
        return ShardingStrategy.FULL_SHARD
    if isinstance(strategy, ShardingStrategy):
        return strategy
    names = ", ".join(m.name for m in ShardingStrategy)
    raise ValueError(f"{strategy!r} is not a valid ShardingStrategy (expected one of the members {names})")


def _check_device_id(device_id):
    if device_id is None:
        return
    dev = device_id if isinstance(device_id, ember.device) else \
        ember.device(device_id) if isinstance(device_id, str) else None
    if isinstance(device_id, int) and not isinstance(device_id, bool):
        dev = ember.device("cuda", device_id)
    if dev is None:
        raise TypeError(f"FullyShardedDataParallel: device_id must be an int, str or torch.device, got "
                        f"{type(device_id).__name__}")
    if dev.type != "cpu":
        raise NotImplementedError(f"FullyShardedDataParallel: device_id={dev}: ember's FSDP shards CPU "
                                  "tensors over the gloo backend only")


def _collect_slots(module, ignored_modules, ignored_params, unit_type):
    """The distinct parameters of `module` not owned by a unit inside it (nor
    ignored), each with every (module, name, fqn) it is reachable under."""
    slots, by_id, seen = [], {}, set()

    def walk(m, prefix):
        if id(m) in seen:
            return
        seen.add(id(m))
        for name, p in m._parameters.items():
            if p is None or id(p) in ignored_params:
                continue
            alias = (m, name, prefix + name)
            if id(p) in by_id:
                by_id[id(p)].aliases.append(alias)
            else:
                by_id[id(p)] = _Slot(p, [alias])
                slots.append(by_id[id(p)])
        for cname, c in m._modules.items():
            if c is None or isinstance(c, unit_type) or id(c) in ignored_modules:
                continue
            walk(c, prefix + cname + ".")
    walk(module, "")
    return slots


def _key_order(module, unit_type, prefix=""):
    """The state-dict keys of `module` as they were before any wrapping, in Module.state_dict's order."""
    keys = [prefix + n for n, p in module._parameters.items() if p is not None]
    keys += [prefix + n for n, b in module._buffers.items()
             if b is not None and n not in module._non_persistent_buffers_set]
    if type(module).get_extra_state is not Module.get_extra_state:
        keys.append(prefix + "_extra_state")
    for name, c in module._modules.items():
        if c is None:
            continue
        if isinstance(c, unit_type):
            keys += [prefix + name + "." + k for k in c._key_order]
        else:
            keys += _key_order(c, unit_type, prefix + name + ".")
    return keys


def _cast_inputs(obj, dtype):
    if isinstance(obj, ember.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, tuple):
        return tuple(_cast_inputs(o, dtype) for o in obj)
    if isinstance(obj, list):
        return [_cast_inputs(o, dtype) for o in obj]
    if isinstance(obj, dict):
        return {k: _cast_inputs(v, dtype) for k, v in obj.items()}
    return obj


def _rank(pg):
    return dist.get_rank(pg)


class FullyShardedDataParallel(Module):
    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None,
                 auto_wrap_policy=None, backward_prefetch=BackwardPrefetch.BACKWARD_PRE, mixed_precision=None,
                 ignored_modules=None, param_init_fn=None, device_id=None, sync_module_states=False,
                 forward_prefetch=False, limit_all_gathers=True, use_orig_params=False, ignored_states=None,
                 device_mesh=None):
        super().__init__()
        if not dist.is_initialized() and process_group is None:
            raise ValueError("Default process group has not been initialized, please make sure to "
                             "call init_process_group.")
        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel expects an nn.Module, got {type(module).__name__}")
        if device_mesh is not None:
            raise NotImplementedError("FullyShardedDataParallel: ember has no DeviceMesh; pass process_group")
        if isinstance(process_group, tuple):
            raise NotImplementedError("FullyShardedDataParallel: a (shard, replicate) process-group pair is "
                                      "hybrid sharding, which ember's FSDP does not have")
        strategy = _check_strategy(sharding_strategy)
        if strategy in _HYBRID:
            raise NotImplementedError(f"FullyShardedDataParallel: sharding_strategy={strategy}: ember's FSDP "
                                      "has no hybrid sharding (FULL_SHARD, SHARD_GRAD_OP and NO_SHARD only)")
        _check_device_id(device_id)
        if param_init_fn is not None:
            raise NotImplementedError("FullyShardedDataParallel: param_init_fn (deferred initialization) is "
                                      "not available in ember; build the module with its parameters")
        ignored = list(ignored_modules or []) + [s for s in (ignored_states or []) if isinstance(s, Module)]
        ignored_mod_ids = {id(m) for im in ignored for m in im.modules()}
        ignored_param_ids = {id(p) for im in ignored for p in im.parameters()}
        ignored_param_ids |= {id(s) for s in (ignored_states or []) if isinstance(s, ember.Tensor)}
        self.process_group = process_group
        self.sharding_strategy = strategy
        self.mixed_precision = mixed_precision
        self._use_orig_params = use_orig_params
        self._is_root = True
        if auto_wrap_policy is not None:
            kwargs = dict(process_group=process_group, sharding_strategy=strategy, cpu_offload=cpu_offload,
                          backward_prefetch=backward_prefetch, mixed_precision=mixed_precision,
                          device_id=device_id, sync_module_states=sync_module_states,
                          forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
                          use_orig_params=use_orig_params, ignored_modules=ignored_modules)
            _recursive_wrap(module, auto_wrap_policy, FullyShardedDataParallel, ignored_mod_ids,
                            ignored_param_ids, only_wrap_children=True, **kwargs)
        for m in module.modules():
            if isinstance(m, FullyShardedDataParallel):
                m._is_root = False
        self._fsdp_wrapped_module = module
        slots = _collect_slots(module, ignored_mod_ids, ignored_param_ids, FullyShardedDataParallel)
        if sync_module_states:
            self._broadcast_from_rank0([s.param for s in slots] + self._own_buffers())
        self._key_order = _key_order(module, FullyShardedDataParallel)
        mp = mixed_precision
        self._handle = FlatParamHandle(
            slots, process_group=process_group, sharded=strategy != ShardingStrategy.NO_SHARD,
            reshard_after_forward=strategy == ShardingStrategy.FULL_SHARD,
            param_dtype=mp.param_dtype if mp else None, reduce_dtype=mp.reduce_dtype if mp else None,
            use_orig_params=use_orig_params, flat_param_owner=module) if slots else None
        self._buffers_cast = False
        self._in_summon = False
        self._state_dict_type = StateDictType.FULL_STATE_DICT
        self._state_dict_config = FullStateDictConfig()
        self._optim_state_dict_config = FullOptimStateDictConfig()
        self._register_state_dict_hook(_post_state_dict_hook)
        self._register_load_state_dict_pre_hook(_pre_load_state_dict_hook, with_module=True)
        self.register_load_state_dict_post_hook(_post_load_state_dict_hook)

    # -- attributes and names
    @property
    def module(self):
        return self._fsdp_wrapped_module

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == FSDP_WRAPPED_MODULE or FSDP_WRAPPED_MODULE not in self.__dict__.get("_modules", {}):
                raise
            return getattr(self._fsdp_wrapped_module, name)

    def __getitem__(self, key):
        return self._fsdp_wrapped_module.__getitem__(key)

    def _own_buffers(self):
        out, stack = [], [self._fsdp_wrapped_module]
        while stack:
            m = stack.pop()
            out += [b for b in m._buffers.values() if b is not None]
            stack += [c for c in m._modules.values() if c is not None and not isinstance(c, FullyShardedDataParallel)]
        return out

    def _broadcast_from_rank0(self, tensors):
        src = 0 if self.process_group is None else dist.get_global_rank(self.process_group, 0)
        with ember.no_grad():
            for t in tensors:
                dist.broadcast(t.detach(), src=src, group=self.process_group)

    def named_parameters(self, *args, **kwargs):
        for name, p in super().named_parameters(*args, **kwargs):
            yield (name.replace(FSDP_PREFIX, "") if self._in_summon else name), p

    def named_buffers(self, *args, **kwargs):
        for name, b in super().named_buffers(*args, **kwargs):
            yield (name.replace(FSDP_PREFIX, "") if self._in_summon else name), b

    def extra_repr(self):
        return ""

    # -- forward
    def forward(self, *args, **kwargs):
        mp = self.mixed_precision
        if _forward_depth[0] == 0 and mp is not None:
            if mp.param_dtype is not None and mp.cast_root_forward_inputs:
                args, kwargs = _cast_inputs(args, mp.param_dtype), _cast_inputs(kwargs, mp.param_dtype)
            if mp.buffer_dtype is not None:
                self._cast_buffers(mp.buffer_dtype)
        elif mp is not None and mp.cast_forward_inputs and mp.param_dtype is not None:
            args, kwargs = _cast_inputs(args, mp.param_dtype), _cast_inputs(kwargs, mp.param_dtype)
        h = self._handle
        hooks = None
        _forward_depth[0] += 1
        try:
            if h is not None:
                h.pre_forward()
                if h.packs_saved_views:
                    hooks = saved_tensors_hooks(pack_saved, unpack_saved)
                    hooks.__enter__()
            return self._fsdp_wrapped_module(*args, **kwargs)
        finally:
            if hooks is not None:
                hooks.__exit__(None, None, None)
            if h is not None:
                h.post_forward()
            _forward_depth[0] -= 1

    def _cast_buffers(self, dtype):
        """Cast every floating buffer to buffer_dtype once; state dicts give them in their own dtype again."""
        if self._buffers_cast:
            return
        for m in self.modules():
            if isinstance(m, FullyShardedDataParallel):
                m._buffers_cast = True
            for k, b in m._buffers.items():
                if b is not None and b.is_floating_point() and b.dtype != dtype:
                    new = b.to(dtype)
                    _CAST_BUFFERS[new.data_ptr()] = (weakref.ref(new), b.dtype)
                    m._buffers[k] = new

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate unreduced gradients (kept unsharded);
        the first backward after it reduces their sum."""
        units = [u._handle for u in self.fsdp_modules(self) if u._handle is not None]
        old = [h.no_sync for h in units]
        for h in units:
            h.no_sync = True
        try:
            yield
        finally:
            for h, o in zip(units, old):
                h.no_sync = o

    # -- unit discovery
    @staticmethod
    def fsdp_modules(module, root_only=False):
        units = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        if root_only:
            inner = {id(u) for m in units for u in m._fsdp_wrapped_module.modules()
                     if isinstance(u, FullyShardedDataParallel)}
            units = [u for u in units if id(u) not in inner]
        return units

    # -- gradients
    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Scale every gradient so that their global norm (all shards of all
        ranks) is at most max_norm; returns the norm before clipping."""
        if not self._is_root:
            raise RuntimeError("`clip_grad_norm_()` should only be called on the root FSDP instance")
        norm_type = float(norm_type)
        sharded, replicated, managed = [], [], set()
        for u in self.fsdp_modules(self):
            h = u._handle
            if h is None:
                continue
            managed |= {id(p) for p in h.params()}
            (sharded if h.nshards > 1 else replicated).extend(h.grads())
        replicated += [p.grad for p in self.parameters() if id(p) not in managed and p.grad is not None]
        grads = sharded + replicated
        dtype = grads[0].dtype if grads else ember.float32
        inf = norm_type == float("inf")

        def local(gs):
            gs = [g for g in gs if g.numel()]
            if not gs:
                return ember.zeros((), dtype=ember.float64)
            if inf:
                return ember.stack([g.detach().abs().max().double() for g in gs]).max()
            return ember.stack([g.detach().double().abs().pow(norm_type).sum() for g in gs]).sum()
        mine, rep = local(sharded), local(replicated)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX if inf else dist.ReduceOp.SUM, group=self.process_group)
        total = ember.maximum(mine, rep) if inf else (mine + rep).pow(1.0 / norm_type)
        total = total.to(dtype)
        coef = float(max_norm) / (float(total) + 1e-6)
        if coef < 1.0:
            with ember.no_grad():
                for g in grads:
                    g.mul_(coef)
        return total

    # -- full parameters
    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse=True, writeback=True, rank0_only=False, offload_to_cpu=False,
                           with_grads=False):
        """Inside, every unit's parameters are whole (the unwrapped module's
        shapes, the shard's dtype); with writeback, changes made to them are
        kept (each rank keeps its own shard of what it holds)."""
        if with_grads:
            raise NotImplementedError("summon_full_params(with_grads=True) is not available in ember's FSDP")
        if rank0_only and writeback:
            raise ValueError("writeback=True and rank0_only=True is not supported, as model parameter shapes "
                             "will be different across ranks, and writing to them can lead to "
                             "inconsistencies across ranks when the context is exited.")
        if _forward_depth[0]:
            raise AssertionError("summon_full_params cannot be entered during a forward or backward pass")
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not recurse:
            units = units[:1] if isinstance(module, FullyShardedDataParallel) else \
                FullyShardedDataParallel.fsdp_modules(module, root_only=True)
        entered = []
        try:
            for u in units:
                if u._handle is not None:
                    u._handle.summon_enter(expose=not rank0_only or _rank(u.process_group) == 0)
                    entered.append(u)
                u._in_summon = True
            yield
        finally:
            for u in units:
                u._in_summon = False
            for u in reversed(entered):
                u._handle.summon_exit(writeback)

    # -- state dicts
    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        if state_dict_type not in _CONFIG_TYPES:
            raise KeyError(state_dict_type)
        cfg_type, optim_cfg_type = _CONFIG_TYPES[state_dict_type]
        state_dict_config = cfg_type() if state_dict_config is None else state_dict_config
        optim_state_dict_config = optim_cfg_type() if optim_state_dict_config is None else optim_state_dict_config
        if type(state_dict_config) is not cfg_type:
            raise RuntimeError(f"Expected state_dict_config of type {cfg_type} but got {type(state_dict_config)}")
        if type(optim_state_dict_config) is not optim_cfg_type:
            raise RuntimeError(f"Expected optim_state_dict_config of type {optim_cfg_type} but got "
                               f"{type(optim_state_dict_config)}")
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError(f"set_state_dict_type: {type(module).__name__} holds no FullyShardedDataParallel module")
        prev = None
        for u in units:
            if prev is None:
                prev = StateDictSettings(u._state_dict_type, u._state_dict_config, u._optim_state_dict_config)
            elif prev.state_dict_type != u._state_dict_type:
                raise AssertionError("All FSDP modules should have the same state_dict_type.")
            u._state_dict_type = state_dict_type
            u._state_dict_config = state_dict_config
            u._optim_state_dict_config = optim_state_dict_config
        return prev

    @staticmethod
    def get_state_dict_type(module):
        units = FullyShardedDataParallel.fsdp_modules(module)
        if not units:
            raise ValueError(f"get_state_dict_type: {type(module).__name__} holds no FullyShardedDataParallel module")
        u = units[0]
        for v in units[1:]:
            if v._state_dict_type != u._state_dict_type:
                raise AssertionError("All FSDP modules must have the same state dict settings.")
        return StateDictSettings(u._state_dict_type, u._state_dict_config, u._optim_state_dict_config)

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None, optim_state_dict_config=None):
        prev = FullyShardedDataParallel.set_state_dict_type(module, state_dict_type, state_dict_config,
                                                            optim_state_dict_config)
        try:
            yield
        finally:
            FullyShardedDataParallel.set_state_dict_type(module, *prev)

    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None):
        from . import _optim_state
        return _optim_state.optim_state_dict(model, optim, optim_state_dict, group)

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False, load_directly=False,
                                 group=None):
        from . import _optim_state
        return _optim_state.optim_state_dict_to_load(model, optim, optim_state_dict)

    def register_comm_hook(self, state, hook):
        raise NotImplementedError("FullyShardedDataParallel.register_comm_hook is not available in ember")


def _check_state_dict_type(unit):
    if unit._state_dict_type == StateDictType.LOCAL_STATE_DICT:
        raise NotImplementedError("StateDictType.LOCAL_STATE_DICT is not available in ember's FSDP; use "
                                  "FULL_STATE_DICT or SHARDED_STATE_DICT")


def sharded_values(h, pg):
    """FlatShardedTensor per slot: this rank's range of each parameter (views of the shard)."""
    from ..checkpoint._sharded import FlatShardedTensor
    return [FlatShardedTensor(h.local_piece(s), s.in_param[0], s.shape, process_group=pg) for s in h.slots]


def _post_state_dict_hook(unit, destination, prefix, local_metadata):
    _check_state_dict_type(unit)
    mine = {}
    for k in [k for k in destination if k.startswith(prefix)]:
        v = destination.pop(k)
        rest = k[len(prefix):]
        if rest.startswith(FSDP_PREFIX):
            rest = rest[len(FSDP_PREFIX):]
        if rest == FLAT_PARAM:
            continue
        cast = _CAST_BUFFERS.get(v.data_ptr()) if isinstance(v, ember.Tensor) and v.numel() else None
        buf = cast[0]() if cast is not None else None
        if buf is None and cast is not None:
            del _CAST_BUFFERS[v.data_ptr()]  # that buffer is gone; the address was reused
        elif buf is not None and v.dtype == buf.dtype:
            v = v.to(cast[1])
        mine[rest] = v
    h = unit._handle
    if h is not None:
        if unit._state_dict_type == StateDictType.FULL_STATE_DICT:
            values = h.full_values()
        else:
            values = sharded_values(h, unit.process_group)
        for s, v in zip(h.slots, values):
            for _, _, fqn in s.aliases:
                mine[fqn] = v
    cfg = unit._state_dict_config
    if unit._state_dict_type == StateDictType.FULL_STATE_DICT and cfg.rank0_only \
            and _rank(unit.process_group) != 0:
        return destination
    for k in itertools.chain([k for k in unit._key_order if k in mine], [k for k in mine if k not in unit._key_order]):
        destination[prefix + k] = mine.pop(k) if k in mine else None
    if hasattr(destination, "_metadata"):
        for k in [k for k in destination._metadata if FSDP_PREFIX in k or k.endswith(FSDP_WRAPPED_MODULE)]:
            destination._metadata.pop(k)
    return destination


def _pre_load_state_dict_hook(unit, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
    _check_state_dict_type(unit)
    h = unit._handle
    inner = prefix + FSDP_PREFIX
    if h is not None:
        for s in h.slots:
            value = None
            for _, _, fqn in s.aliases:
                if prefix + fqn in state_dict:
                    value = state_dict.pop(prefix + fqn)
            if value is None:
                if strict:
                    missing_keys.append(prefix + s.fqn)
            else:
                err = h.load_slot(s, value, (prefix + s.fqn).replace(FSDP_PREFIX, ""))
                if err:
                    error_msgs.append(err)
    for k in [k for k in state_dict if k.startswith(prefix) and not k.startswith(inner)]:
        state_dict[inner + k[len(prefix):]] = state_dict.pop(k)
    if h is not None:  # the shard already holds the loaded values: let the loader copy them onto themselves
        if h.use_orig_params:
            for s in h.slots:
                for _, _, fqn in s.aliases:
                    state_dict[inner + fqn] = s.param
        else:
            state_dict[inner + FLAT_PARAM] = h.flat_param


def _post_load_state_dict_hook(unit, incompatible_keys):
    for keys in (incompatible_keys.missing_keys, incompatible_keys.unexpected_keys):
        keys[:] = [k.replace(FSDP_PREFIX, "") for k in keys]
