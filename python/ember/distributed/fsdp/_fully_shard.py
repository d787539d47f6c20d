"""fully_shard (torch's FSDP2 API): shard one module's parameters in place.

fully_shard(module) flattens the parameters of `module` that no
fully_shard-ed submodule owns into one FlatParamHandle (as FSDP1's unit) and
swaps the module's class for FSDP<Class>, a subclass of FSDPModule and the
original class. Each original Parameter object stays registered under its
name and holds this rank's 1-D range of its flattened elements (torch holds a
DTensor sharded on dim 0; ember has no DTensor). Forward pre/post hooks
all-gather and reshard (reshard_after_forward), backward reduce-scatters.
model.state_dict() gives FlatShardedTensor values under the original keys,
which distributed.checkpoint saves and loads, and load_state_dict takes them
or full tensors."""
from dataclasses import dataclass
from typing import Optional

import ember
from ember import distributed as dist
from ember.autograd.graph import saved_tensors_hooks
from ember.nn.modules.module import Module

from ._flat_param import FlatParamHandle, pack_saved, unpack_saved

__all__ = ["fully_shard", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy", "CPUOffloadPolicy",
           "UnshardHandle"]


@dataclass(frozen=True)
class MixedPrecisionPolicy:
    param_dtype: Optional[ember.dtype] = None
    reduce_dtype: Optional[ember.dtype] = None
    output_dtype: Optional[ember.dtype] = None
    cast_forward_inputs: bool = True


@dataclass
class OffloadPolicy:
    pass


@dataclass
class CPUOffloadPolicy(OffloadPolicy):
    """Accepted as torch's: ember's shards live on the CPU already."""
    pin_memory: bool = True


class UnshardHandle:
    def wait(self):
        return None


class _State:
    def __init__(self, handle, mp, pg):
        self.handle = handle
        self.mp = mp
        self.pg = pg
        self.hooks = None


def _cast(obj, dtype):
    if isinstance(obj, ember.Tensor):
        return obj.to(dtype) if obj.is_floating_point() and obj.dtype != dtype else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(_cast(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, dtype) for k, v in obj.items()}
    return obj


class FSDPModule:
    """What fully_shard makes a module: its class becomes FSDP<Class>, a subclass of this and the original."""

    def __new__(cls, *args, **kwargs):
        if cls is FSDPModule:
            raise TypeError("FSDPModule is not made directly: call fully_shard(module)")
        return super().__new__(cls)

    def reshard(self):
        """Free the gathered parameters (after an unshard() or a forward that kept them)."""
        st = self._fsdp_state
        if st.handle is not None:
            st.handle.summon_exit(writeback=False)
            st.handle.reshard()

    def unshard(self, async_op=False):
        """Gather the parameters: each Parameter holds its whole value until reshard()."""
        st = self._fsdp_state
        if st.handle is not None and st.handle._summoned is None:
            st.handle.summon_enter()
        return UnshardHandle() if async_op else None

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        mods = [m for m in self.modules() if isinstance(m, FSDPModule)] if recurse else [self]
        for m in mods:
            if m._fsdp_state.handle is not None:
                m._fsdp_state.handle.no_sync = not requires_gradient_sync

    def set_reshard_after_forward(self, reshard_after_forward, recurse=True):
        mods = [m for m in self.modules() if isinstance(m, FSDPModule)] if recurse else [self]
        for m in mods:
            h = m._fsdp_state.handle
            if h is not None:
                h.reshard_after_forward = bool(reshard_after_forward) and h.nshards > 1


_CLASSES = {}


def _fsdp_class(cls):
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {"__module__": cls.__module__})
    return _CLASSES[cls]


def _pre_forward(module, args, kwargs):
    st = module._fsdp_state
    mp = st.mp
    if mp.cast_forward_inputs and mp.param_dtype is not None:
        args, kwargs = _cast(args, mp.param_dtype), _cast(kwargs, mp.param_dtype)
    h = st.handle
    if h is not None:
        h.summon_exit(writeback=False)
        h.pre_forward()
        if h.packs_saved_views:
            st.hooks = saved_tensors_hooks(pack_saved, unpack_saved)
            st.hooks.__enter__()
    return args, kwargs


def _post_forward(module, args, kwargs, output):
    st = module._fsdp_state
    if st.hooks is not None:
        st.hooks.__exit__(None, None, None)
        st.hooks = None
    if st.handle is not None:
        st.handle.post_forward()
    if output is not None and st.mp.output_dtype is not None:
        return _cast(output, st.mp.output_dtype)
    return None


def _state_dict_hook(module, destination, prefix, local_metadata):
    from .fully_sharded_data_parallel import sharded_values
    h = module._fsdp_state.handle
    if h is None:
        return destination
    for s, v in zip(h.slots, sharded_values(h, module._fsdp_state.pg)):
        for _, _, fqn in s.aliases:
            if prefix + fqn in destination:
                destination[prefix + fqn] = v
    return destination


def _load_pre_hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    h = module._fsdp_state.handle
    if h is None:
        return
    for s in h.slots:
        for _, _, fqn in s.aliases:
            key = prefix + fqn
            if key in state_dict:
                err = h.load_slot(s, state_dict[key], key)
                if err:
                    error_msgs.append(err)
                state_dict[key] = s.param  # loaded already: the loader copies it onto itself


def fully_shard(module, *, mesh=None, reshard_after_forward=True, shard_placement_fn=None,
                mp_policy=MixedPrecisionPolicy(), offload_policy=OffloadPolicy(), ignored_params=None):
    """Shard `module`'s parameters over the default process group (see the module docstring)."""
    if isinstance(module, (list, tuple)):
        raise NotImplementedError("fully_shard: a list of modules sharing one group is not available in ember")
    if not isinstance(module, Module):
        raise TypeError(f"fully_shard expects an nn.Module, got {type(module).__name__}")
    if mesh is not None:
        raise NotImplementedError("fully_shard: ember has no DeviceMesh; the default process group is the mesh")
    if shard_placement_fn is not None:
        raise NotImplementedError("fully_shard: shard_placement_fn needs DTensor placements, which ember lacks")
    if not isinstance(reshard_after_forward, bool):
        raise NotImplementedError("fully_shard: reshard_after_forward must be a bool in ember "
                                  f"(resharding to a smaller group is not available), got {reshard_after_forward!r}")
    if not dist.is_initialized():
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    if isinstance(module, FSDPModule):
        return module
    from .fully_sharded_data_parallel import _collect_slots
    ignored = {id(p) for p in (ignored_params or ())}
    slots = _collect_slots(module, set(), ignored, FSDPModule)
    handle = FlatParamHandle(slots, process_group=None, sharded=True,
                             reshard_after_forward=reshard_after_forward, param_dtype=mp_policy.param_dtype,
                             reduce_dtype=mp_policy.reduce_dtype, use_orig_params=True) if slots else None
    module.__dict__["_fsdp_state"] = _State(handle, mp_policy, None)
    module.register_forward_pre_hook(_pre_forward, prepend=True, with_kwargs=True)
    module.register_forward_hook(_post_forward, with_kwargs=True, always_call=True)
    module._register_state_dict_hook(_state_dict_hook)
    module._register_load_state_dict_pre_hook(_load_pre_hook, with_module=True)
    module.__class__ = _fsdp_class(type(module))
    return module
