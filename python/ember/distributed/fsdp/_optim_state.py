"""Optimizer state dicts of sharded models, keyed by the unwrapped
parameters' names (torch's FSDP.optim_state_dict / optim_state_dict_to_load).

The optimizer steps the shards (flat parameters, or with use_orig_params and
fully_shard each parameter's local range), so a state tensor shaped like its
parameter is sharded as the parameter is. FULL_STATE_DICT all-gathers it into
each original parameter's shape; SHARDED_STATE_DICT gives each rank's range
as a FlatShardedTensor. Other state ("step") is the same on every rank and is
copied. Loading reverses it for the optimizer of the current model (any
world size, from either form)."""
import ember
from ember import distributed as dist

from ..checkpoint._sharded import FlatShardedTensor
from .api import StateDictType

FSDP_PREFIX = "_fsdp_wrapped_module."


def _units(model):
    """[(fqn prefix in the unwrapped model, handle, process group)] of every FSDP unit and fully_shard module."""
    from ._fully_shard import FSDPModule
    from .fully_sharded_data_parallel import FullyShardedDataParallel
    out = []
    for name, m in model.named_modules():
        if isinstance(m, FullyShardedDataParallel) and m._handle is not None:
            clean = name.replace(FSDP_PREFIX, "")
            if clean.endswith("_fsdp_wrapped_module"):
                clean = clean[:-len("_fsdp_wrapped_module")].rstrip(".")
            out.append((clean + "." if clean else "", m._handle, m.process_group))
        elif isinstance(m, FSDPModule) and m._fsdp_state.handle is not None:
            out.append((name + "." if name else "", m._fsdp_state.handle, None))
    return out


def _param_map(model):
    """id(optimizer parameter) -> (handle or None, [(slot, fqn)] or fqn, group)."""
    where = {}
    for prefix, h, pg in _units(model):
        if h.use_orig_params:
            for s in h.slots:
                where[id(s.param)] = (h, [(s, prefix + s.fqn)], pg)
        else:
            where[id(h.flat_param)] = (h, [(s, prefix + s.fqn) for s in h.slots], pg)
    for name, p in model.named_parameters():
        if id(p) not in where:
            where[id(p)] = (None, name.replace(FSDP_PREFIX, ""), None)
    return where


def _settings(model):
    from .fully_sharded_data_parallel import FullyShardedDataParallel
    units = FullyShardedDataParallel.fsdp_modules(model)
    if not units:
        return StateDictType.SHARDED_STATE_DICT, None  # fully_shard models: sharded, as their state_dict
    u = units[0]
    if u._state_dict_type == StateDictType.LOCAL_STATE_DICT:
        raise NotImplementedError("StateDictType.LOCAL_STATE_DICT is not available in ember's FSDP")
    return u._state_dict_type, u._optim_state_dict_config


def _shard_shaped(h, slots_states):
    """One shard-sized buffer holding each slot's local piece (use_orig_params layouts)."""
    dtype = next(t.dtype for _, t in slots_states)
    buf = ember.zeros(h.shard_numel, dtype=dtype)
    for s, t in slots_states:
        a, b = s.local
        buf[a:b] = t.reshape(-1)
    return buf


def _gather_full(h, shard, pg):
    if h.nshards == 1:
        return shard
    out = ember.empty(h.padded_numel, dtype=shard.dtype)
    dist.all_gather_into_tensor(out, shard.contiguous(), group=pg)
    return out


def optim_state_dict(model, optim, optim_state_dict=None, group=None):
    typ, cfg = _settings(model)
    osd = optim.state_dict() if optim_state_dict is None else optim_state_dict
    params = [p for g in optim.param_groups for p in g["params"]]
    where = _param_map(model)
    state_out, names = {}, {}
    # a collective per sharded state tensor: walk in the same order on every rank
    for i, p in enumerate(params):
        if id(p) not in where:
            raise ValueError(f"optim_state_dict: the optimizer's parameter {i} (shape {tuple(p.shape)}) is not "
                             "a parameter of the model")
        h, slots, pg = where[id(p)]
        st = osd["state"].get(i, {})
        if h is None:
            names[i] = [slots]
            if st:
                state_out[slots] = dict(st)
            continue
        names[i] = [fqn for _, fqn in slots]
        keys = sorted(st)
        if dist.is_initialized() and h.world > 1:  # every rank must gather the same keys
            all_keys = [None] * h.world
            dist.all_gather_object(all_keys, keys, group=pg)
            keys = sorted(set().union(*all_keys))
        for k in keys:
            v = st.get(k)
            sharded = isinstance(v, ember.Tensor) and v.dim() > 0 and v.numel() == p.numel() and \
                (h.use_orig_params or v.numel() == h.shard_numel)
            if h.use_orig_params and v is None:
                sharded = True
                v = ember.zeros(p.numel(), dtype=p.dtype)
            for s, fqn in slots:
                entry = state_out.setdefault(fqn, {})
                if not sharded:
                    entry[k] = v.clone() if isinstance(v, ember.Tensor) else v
                    continue
                piece = v.reshape(-1) if h.use_orig_params else v.reshape(-1)[s.local[0]:s.local[1]]
                if typ == StateDictType.SHARDED_STATE_DICT:
                    entry[k] = FlatShardedTensor(piece, s.in_param[0], s.shape, process_group=pg)
            if sharded and typ == StateDictType.FULL_STATE_DICT:
                shard = _shard_shaped(h, [(s, v)]) if h.use_orig_params else v.reshape(-1)
                full = _gather_full(h, shard, pg)
                for s, fqn in slots:
                    state_out[fqn][k] = full[s.offset:s.offset + s.numel].view(s.shape).clone()
    groups = []
    for g, sg in zip(optim.param_groups, osd["param_groups"]):
        d = {k: v for k, v in sg.items() if k != "params"}
        d["params"] = [fqn for p in g["params"] for fqn in names[_index(params, p)]]
        groups.append(d)
    if typ == StateDictType.FULL_STATE_DICT and cfg is not None and cfg.rank0_only and dist.get_rank() != 0:
        return {}
    return {"state": state_out, "param_groups": groups}


def _index(params, p):
    for i, q in enumerate(params):
        if q is p:
            return i
    raise ValueError("parameter not in the optimizer")


def optim_state_dict_to_load(model, optim, optim_state_dict):
    """The optimizer-native state dict (integer keys, this rank's shards) of
    a name-keyed one, for optim.load_state_dict()."""
    params = [p for g in optim.param_groups for p in g["params"]]
    where = _param_map(model)
    src = optim_state_dict["state"]
    state = {}
    for i, p in enumerate(params):
        h, slots, _ = where[id(p)]
        if h is None:
            if slots in src:
                state[i] = {k: (v.clone() if isinstance(v, ember.Tensor) else v) for k, v in src[slots].items()}
            continue
        present = [(s, fqn) for s, fqn in slots if fqn in src]
        if not present:
            continue
        st = {}
        for k, v0 in src[present[0][1]].items():
            sharded = isinstance(v0, FlatShardedTensor) or (isinstance(v0, ember.Tensor) and v0.dim() > 0 and
                                                            tuple(v0.shape) == present[0][0].shape)
            if not sharded:
                st[k] = v0.clone() if isinstance(v0, ember.Tensor) else v0
                continue
            dtype = v0.dtype
            local = ember.zeros(p.numel() if h.use_orig_params else h.shard_numel, dtype=dtype)
            for s, fqn in present:
                v = src[fqn][k]
                a, b = s.in_param
                if isinstance(v, FlatShardedTensor):
                    if not (v.offset <= a and b <= v.offset + v.local_numel):
                        raise RuntimeError(f"optim_state_dict_to_load: the sharded {k!r} of {fqn} holds elements "
                                           f"[{v.offset}, {v.offset + v.local_numel}) but this rank needs [{a}, {b})")
                    piece = v.to_local()[a - v.offset:b - v.offset]
                else:
                    piece = v.reshape(-1)[a:b]
                if h.use_orig_params:
                    local = piece.clone()
                else:
                    local[s.local[0]:s.local[1]] = piece
            st[k] = local.view(p.shape) if h.use_orig_params else local
        state[i] = st
    groups = []
    for g, sg in zip(optim.param_groups, optim_state_dict["param_groups"]):
        d = {k: v for k, v in sg.items() if k != "params"}
        d["params"] = [_index(params, p) for p in g["params"]]
        groups.append(d)
    return {"state": state, "param_groups": groups}
