"""torch.distributed.checkpoint.state_dict: model and optimizer state dicts
keyed by the unwrapped model's names, for plain, FSDP and fully_shard models
alike. full_state_dict=False (the default) gives sharded values
(FlatShardedTensor) that distributed.checkpoint saves per rank; True gives
whole tensors, on every rank, or with cpu_offload=True on rank 0 only (as
torch). The optimizer state dicts of sharded models go through
fsdp/_optim_state.py."""
import contextlib
from dataclasses import dataclass

import ember

from ..fsdp._fully_shard import FSDPModule
from ..fsdp._optim_state import optim_state_dict as _fsdp_osd, optim_state_dict_to_load as _fsdp_osd_to_load
from ..fsdp.api import FullOptimStateDictConfig, FullStateDictConfig, StateDictType
from ..fsdp.fully_sharded_data_parallel import FullyShardedDataParallel as FSDP
from ._sharded import FlatShardedTensor

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
           "set_model_state_dict", "set_optimizer_state_dict", "set_state_dict"]


@dataclass
class StateDictOptions:
    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _options(options):
    opts = StateDictOptions() if options is None else options
    if opts.broadcast_from_rank0:
        raise NotImplementedError("StateDictOptions(broadcast_from_rank0=True) is not available in ember")
    if opts.flatten_optimizer_state_dict:
        raise NotImplementedError("StateDictOptions(flatten_optimizer_state_dict=True) is not available in ember")
    return opts


@contextlib.contextmanager
def _fsdp_context(model, opts):
    if not FSDP.fsdp_modules(model):
        yield
        return
    if opts.full_state_dict:
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=opts.cpu_offload, rank0_only=opts.cpu_offload),
                                  FullOptimStateDictConfig(offload_to_cpu=opts.cpu_offload,
                                                           rank0_only=opts.cpu_offload)):
            yield
    else:
        with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
            yield


def _is_sharded_model(model):
    return bool(FSDP.fsdp_modules(model)) or any(isinstance(m, FSDPModule) for m in model.modules())


def _full_fsdp2(sd, opts):
    from .. import distributed_c10d as c10d
    out = {}
    for k, v in sd.items():
        out[k] = v.full_tensor() if isinstance(v, FlatShardedTensor) else v
    if opts.cpu_offload and c10d.is_initialized() and c10d.get_rank() != 0:
        return {}
    return out


def get_model_state_dict(model, *, submodules=None, options=None):
    opts = _options(options)
    if submodules is not None:
        raise NotImplementedError("get_model_state_dict(submodules=) is not available in ember")
    with _fsdp_context(model, opts):
        sd = model.state_dict()
    if opts.full_state_dict and not FSDP.fsdp_modules(model):
        sd = _full_fsdp2(sd, opts)
    if opts.ignore_frozen_params:
        frozen = {n.replace("_fsdp_wrapped_module.", "") for n, p in model.named_parameters() if not p.requires_grad}
        sd = {k: v for k, v in sd.items() if k not in frozen}
    return sd


def _plain_osd(model, optim):
    """A plain model's optimizer state dict keyed by parameter names."""
    names = {id(p): n for n, p in model.named_parameters()}
    osd = optim.state_dict()
    params = [p for g in optim.param_groups for p in g["params"]]
    state = {names[id(params[i])]: dict(st) for i, st in osd["state"].items()}
    groups = [dict({k: v for k, v in sg.items() if k != "params"}, params=[names[id(p)] for p in g["params"]])
              for g, sg in zip(optim.param_groups, osd["param_groups"])]
    return {"state": state, "param_groups": groups}


def _init_optim_state(optim):
    """Give a fresh optimizer its state (as torch does before loading into it): one
    step with zero gradients and learning rate 0, which changes no parameter."""
    if optim.state:
        return
    params = [p for g in optim.param_groups for p in g["params"] if p.requires_grad]
    for p in params:
        if p.grad is not None:
            return  # a real step is under way: leave its gradients alone
    for p in params:
        p.grad = ember.zeros_like(p)
    lrs = [g["lr"] for g in optim.param_groups]
    for g in optim.param_groups:
        g["lr"] = 0.0
    optim.step()
    for g, lr in zip(optim.param_groups, lrs):
        g["lr"] = lr
    optim.zero_grad(set_to_none=True)


def _optims(optimizers):
    optims = list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]
    if len(optims) != 1:
        raise NotImplementedError("ember's distributed.checkpoint.state_dict takes one optimizer per call")
    return optims


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None):
    opts = _options(options)
    out = {"state": {}, "param_groups": []}
    for optim in _optims(optimizers):
        _init_optim_state(optim)
        if _is_sharded_model(model):
            with _fsdp_context(model, opts):
                osd = _fsdp_osd(model, optim)
            if opts.full_state_dict and not FSDP.fsdp_modules(model):
                osd = {"state": {k: _full_fsdp2(st, opts) for k, st in osd["state"].items()},
                       "param_groups": osd["param_groups"]}
        else:
            osd = _plain_osd(model, optim)
        out["state"].update(osd.get("state", {}))
        out["param_groups"] += osd.get("param_groups", [])
    return out


def get_state_dict(model, optimizers, *, submodules=None, options=None):
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules, options=options))


def set_model_state_dict(model, model_state_dict, *, options=None):
    opts = _options(options)
    with _fsdp_context(model, opts):
        return model.load_state_dict(model_state_dict, strict=opts.strict)


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None):
    opts = _options(options)
    for optim in _optims(optimizers):
        if _is_sharded_model(model):
            with _fsdp_context(model, opts):
                native = _fsdp_osd_to_load(model, optim, optim_state_dict)
        else:
            native = _plain_to_load(model, optim, optim_state_dict)
        optim.load_state_dict(native)


def _plain_to_load(model, optim, osd):
    names = {id(p): n for n, p in model.named_parameters()}
    params = [p for g in optim.param_groups for p in g["params"]]
    state = {i: dict(osd["state"][names[id(p)]]) for i, p in enumerate(params) if names[id(p)] in osd["state"]}
    groups = []
    for g, sg in zip(optim.param_groups, osd["param_groups"]):
        groups.append(dict({k: v for k, v in sg.items() if k != "params"},
                           params=[params.index(p) for p in g["params"]]))
    return {"state": state, "param_groups": groups}


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    res = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return res
