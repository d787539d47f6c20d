"""Scenarios run in each worker process of tests/test_distributed_fsdp.py
(`python -m dist_workers_fsdp SCENARIO`). The model is a small MLP
(Linear-ReLU, Linear-ReLU, Linear) whose training every rank also computes
with NumPy in float64 from the global batch: the reference FSDP's sharded
training must reproduce."""
import datetime
import functools
import gc
import os
import sys
import weakref

import numpy as np

import ember
import ember.distributed as dist
import ember.distributed.checkpoint as dcp
from ember.distributed.fsdp import (FullStateDictConfig, FullyShardedDataParallel as FSDP, MixedPrecision,
                                    ShardingStrategy, StateDictType, fully_shard, FSDPModule, MixedPrecisionPolicy)
from ember.distributed.fsdp.wrap import ModuleWrapPolicy, size_based_auto_wrap_policy, transformer_auto_wrap_policy

SIZES = [(5, 7), (7, 6), (6, 3)]  # units of 42, 48 and 21 elements: 21 needs padding on 2 ranks
KEYS = ["b1.lin.weight", "b1.lin.bias", "b2.lin.weight", "b2.lin.bias", "head.weight", "head.bias"]


class Block(ember.nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.lin = ember.nn.Linear(i, o)

    def forward(self, x):
        return ember.relu(self.lin(x))


class Net(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = Block(*SIZES[0])
        self.b2 = Block(*SIZES[1])
        self.head = ember.nn.Linear(*SIZES[2])

    def forward(self, x):
        return self.head(self.b2(self.b1(x)))


def init():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    return dist.get_rank(), dist.get_world_size()


def same(got, want, what, tol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if tol == 0:
        ok = np.array_equal(got, want)
    else:
        ok = np.allclose(got, want, rtol=tol, atol=tol)
    if not ok:
        raise AssertionError(f"{what}: max difference {np.max(np.abs(got - want))} (tolerance {tol}):\n"
                             f"got {got.ravel()[:6]}\nwant {want.ravel()[:6]}")


def numpy_params(seed):
    """The initial parameters of Net() after ember.manual_seed(seed), as NumPy (read before wrapping)."""
    ember.manual_seed(seed)
    net = Net()
    return net, [net.state_dict()[k].numpy().astype(np.float64) for k in KEYS]


def np_grads(params, x, t):
    """NumPy forward/backward of the MLP with mean squared error over the whole batch."""
    W1, b1, W2, b2, W3, b3 = params
    h1 = x @ W1.T + b1
    r1 = np.maximum(h1, 0)
    h2 = r1 @ W2.T + b2
    r2 = np.maximum(h2, 0)
    y = r2 @ W3.T + b3
    dy = 2 * (y - t) / y.size
    dr2 = dy @ W3
    dh2 = dr2 * (h2 > 0)
    dr1 = dh2 @ W2
    dh1 = dr1 * (h1 > 0)
    return [dh1.T @ x, dh1.sum(0), dh2.T @ r1, dh2.sum(0), dy.T @ r2, dy.sum(0)]


def np_sgd(params, grads, lr):
    return [p - lr * g for p, g in zip(params, grads)]


def np_adam(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
    """torch.optim.Adam's documented update (no weight decay, no amsgrad)."""
    out = []
    for i, (p, g) in enumerate(zip(params, grads)):
        m, v, t = state.get(i, (np.zeros_like(p), np.zeros_like(p), 0))
        t += 1
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        out.append(p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps))
        state[i] = (m, v, t)
    return out


def data(steps, world, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((steps, 2 * world, 5)), rng.standard_normal((steps, 2 * world, 3))


def full_params(model):
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
        sd = model.state_dict()
    assert [k for k in sd if k in KEYS] == KEYS, list(sd)
    return [sd[k].float().numpy() for k in KEYS]


def units(model):
    return [u for u in FSDP.fsdp_modules(model) if u._handle is not None]


# ----------------------------------------------------------------- scenarios

VARIANTS = {
    "full_shard": dict(strategy=ShardingStrategy.FULL_SHARD, orig=False, opt="sgd",
                       policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})),
    "shard_grad_op": dict(strategy=ShardingStrategy.SHARD_GRAD_OP, orig=False, opt="adam",
                          policy=ModuleWrapPolicy({Block})),
    "no_shard": dict(strategy=ShardingStrategy.NO_SHARD, orig=True, opt="sgd",
                     policy=functools.partial(size_based_auto_wrap_policy, min_num_params=45)),
    "full_shard_orig": dict(strategy=ShardingStrategy.FULL_SHARD, orig=True, opt="adam",
                            policy=ModuleWrapPolicy({Block})),
}


def train():
    """6 steps of each strategy (nested units from an auto-wrap policy) on the
    ranks' halves of the global batch give NumPy's training on the whole
    batch; the units hold 1/world of their padded flat buffer and
    gather/free as their strategy says."""
    rank, world = init()
    X, T = data(6, world)
    lo, hi = 2 * rank, 2 * rank + 2
    for name, v in VARIANTS.items():
        net, params = numpy_params(seed=3)
        model = FSDP(net, sharding_strategy=v["strategy"], auto_wrap_policy=v["policy"],
                     use_orig_params=v["orig"], device_id=ember.device("cpu"))
        us = units(model)
        want_units = 2 if name == "no_shard" else 3  # size policy: only b2 (48) wraps, the rest is the root's
        assert len(us) == want_units, (name, len(us))
        for u in us:
            h = u._handle
            n = h.numel
            shards = 1 if v["strategy"] == ShardingStrategy.NO_SHARD else world
            assert h.shard_numel == -(-n // shards), (name, n, h.shard_numel)
            assert h.local_shard().numel() == h.shard_numel
        opt = (ember.optim.SGD(model.parameters(), lr=0.1) if v["opt"] == "sgd"
               else ember.optim.Adam(model.parameters(), lr=0.01))
        gathered = {}  # unit -> weak references to the buffers its all-gathers made
        for u in us:
            def record(dtype, key=id(u), gather=u._handle._gather):
                t = gather(dtype)
                gathered.setdefault(key, []).append(weakref.ref(t))
                return t
            u._handle._gather = record
        state = {}
        for step in range(6):
            opt.zero_grad()
            gathered.clear()
            out = model(ember.from_numpy(X[step, lo:hi]).float())
            gc.collect()
            alive = {k: any(r() is not None for r in refs) for k, refs in gathered.items()}
            if v["strategy"] == ShardingStrategy.FULL_SHARD:
                # freed after forward (only the last unit's may still be held by the group's last work)
                assert not alive[id(us[0])] and not alive[id(us[1])], (name, alive)
            elif v["strategy"] == ShardingStrategy.SHARD_GRAD_OP:
                assert all(alive.values()), (name, alive)
            unsharded = [u._handle.is_unsharded() for u in us]
            if v["strategy"] == ShardingStrategy.SHARD_GRAD_OP:
                assert all(unsharded), (name, unsharded)  # kept from forward to backward
            else:
                want = v["strategy"] == ShardingStrategy.NO_SHARD
                assert unsharded == [want] * len(us), (name, unsharded)
            ember.nn.functional.mse_loss(out, ember.from_numpy(T[step, lo:hi]).float()).backward()
            assert not any(u._handle.is_unsharded() for u in us if u._handle.nshards > 1), name
            opt.step()
            grads = np_grads(params, X[step], T[step])
            params = np_sgd(params, grads, 0.1) if v["opt"] == "sgd" else np_adam(params, grads, state, 0.01)
        if v["strategy"] == ShardingStrategy.SHARD_GRAD_OP:
            assert all(u._handle.num_all_gathers == 6 for u in us), [u._handle.num_all_gathers for u in us]
        if v["strategy"] == ShardingStrategy.FULL_SHARD:
            # forward, and again in backward for the units whose weights backward reads (the input of
            # b1 needs no gradient, so whether its weight is read depends on the op's saved tensors)
            counts = {n.replace("_fsdp_wrapped_module.", ""): u._handle.num_all_gathers
                      for n, u in model.named_modules() if isinstance(u, FSDP)}
            assert counts[""] == counts["b2"] == 12 and 6 <= counts["b1"] <= 12, counts
        for got, want, k in zip(full_params(model), params, KEYS):
            same(got, want, f"{name}: {k} after 6 steps", 1e-6)
        # an evaluation forward without autograd gathers and frees as well
        with ember.no_grad():
            out = model(ember.from_numpy(X[0]).float())
        assert not any(u._handle.is_unsharded() for u in us if u._handle.nshards > 1), name
        W1, b1, W2, b2, W3, b3 = params
        want = np.maximum(np.maximum(X[0] @ W1.T + b1, 0) @ W2.T + b2, 0) @ W3.T + b3
        same(out.numpy(), want, f"{name}: no-grad forward", 1e-5)
        names = [n for n, _ in model.named_parameters()]
        if v["orig"]:
            assert sorted(n.replace("_fsdp_wrapped_module.", "") for n in names) == sorted(KEYS), names
        else:
            assert all(n.endswith("_flat_param") for n in names), names
    print("ok")


def mixed():
    """MixedPrecision(bfloat16): forward and backward in bfloat16, gradients
    reduced in bfloat16 (or float32), the shards stay float32; the result is
    NumPy's float64 training within bfloat16's precision."""
    rank, world = init()
    X, T = data(5, world, seed=1)
    lo, hi = 2 * rank, 2 * rank + 2
    for reduce_dtype in (ember.bfloat16, ember.float32):
        net, params = numpy_params(seed=4)
        net.register_buffer("scale", ember.tensor([1.0 / 3.0]))
        mp = MixedPrecision(param_dtype=ember.bfloat16, reduce_dtype=reduce_dtype, buffer_dtype=ember.bfloat16)
        model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({Block}), mixed_precision=mp)
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        for step in range(5):
            opt.zero_grad()
            out = model(ember.from_numpy(X[step, lo:hi]).float())
            assert out.dtype == ember.bfloat16, out.dtype
            ember.nn.functional.mse_loss(out.float(), ember.from_numpy(T[step, lo:hi]).float()).backward()
            for p in model.parameters():
                assert p.dtype == ember.float32 and p.grad.dtype == ember.float32, (p.dtype, p.grad.dtype)
            opt.step()
            params = np_sgd(params, np_grads(params, X[step], T[step]), 0.1)
        assert net.scale.dtype == ember.bfloat16  # buffer_dtype in forward
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
            sd = model.state_dict()
        assert sd["scale"].dtype == ember.float32 and abs(float(sd["scale"]) - 1 / 3) < 2e-3, sd["scale"]
        for got, want, k in zip(full_params(model), params, KEYS):
            same(got, want, f"bf16 (reduce {reduce_dtype}): {k}", 3e-2)
    # fully_shard's MixedPrecisionPolicy: bfloat16 compute, float32 output
    net, params = numpy_params(seed=4)
    mp = MixedPrecisionPolicy(param_dtype=ember.bfloat16, reduce_dtype=ember.float32)
    for b in (net.b1, net.b2):
        fully_shard(b, mp_policy=mp)
    # the output cast on the root only (a block's float32 output would meet the root's bfloat16 head)
    fully_shard(net, mp_policy=MixedPrecisionPolicy(param_dtype=ember.bfloat16, output_dtype=ember.float32))
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    for step in range(5):
        opt.zero_grad()
        out = net(ember.from_numpy(X[step, lo:hi]).float())
        assert out.dtype == ember.float32
        ember.nn.functional.mse_loss(out, ember.from_numpy(T[step, lo:hi]).float()).backward()
        assert all(p.dtype == ember.float32 and p.grad.dtype == ember.float32 for p in net.parameters())
        opt.step()
        params = np_sgd(params, np_grads(params, X[step], T[step]), 0.1)
    for m in (net.b1, net.b2, net):
        m.unshard()
    for k, want in zip(KEYS, params):
        same(dict(net.named_parameters())[k].detach().numpy(), want, f"fully_shard bf16: {k}", 3e-2)
    print("ok")


def clip():
    """clip_grad_norm_ returns NumPy's norm of the whole (unsharded) gradient
    and scales every shard's gradient by max_norm / norm."""
    rank, world = init()
    X, T = data(1, world, seed=2)
    lo, hi = 2 * rank, 2 * rank + 2
    cases = [(ShardingStrategy.FULL_SHARD, 2.0, 0.05, False), (ShardingStrategy.FULL_SHARD, float("inf"), 0.01, True),
             (ShardingStrategy.FULL_SHARD, 1.0, 1e6, True), (ShardingStrategy.NO_SHARD, 2.0, 0.05, True),
             (ShardingStrategy.NO_SHARD, float("inf"), 0.01, False)]
    for strategy, norm_type, max_norm, orig in cases:
        net, params = numpy_params(seed=5)
        model = FSDP(net, sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy({Block}),
                     use_orig_params=orig)
        ember.nn.functional.mse_loss(model(ember.from_numpy(X[0, lo:hi]).float()),
                                     ember.from_numpy(T[0, lo:hi]).float()).backward()
        grads = np_grads(params, X[0], T[0])
        flat = np.concatenate([g.ravel() for g in grads])
        want = np.max(np.abs(flat)) if norm_type == float("inf") else np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
        total = model.clip_grad_norm_(max_norm, norm_type)
        same(float(total), want, f"{strategy} norm {norm_type}", 1e-6)
        scale = min(1.0, max_norm / (want + 1e-6))
        # this rank's part of every parameter's gradient is NumPy's, scaled
        want_grads = {id(s.param): g for s, g in zip(_slots_in_key_order(model), grads)}
        for h in [u._handle for u in units(model)]:
            for s in h.slots:
                a, b = s.in_param
                if orig:
                    got = s.param.grad.numpy().ravel()
                else:
                    got = h.flat_param.grad[s.local[0]:s.local[1]].numpy()
                same(got, (want_grads[id(s.param)] * scale).ravel()[a:b],
                     f"{strategy} clipped gradient of {s.fqn}", 1e-6)
    try:
        FSDP.fsdp_modules(model)[1].clip_grad_norm_(1.0)
        raise AssertionError("clip_grad_norm_ on a nested unit did not raise")
    except RuntimeError as e:
        assert "root FSDP instance" in str(e), e
    print("ok")


def _slots_in_key_order(model):
    """The flat-parameter slots of every unit, in KEYS' order (b1, b2, head)."""
    by_unit = {}
    for name, u in model.named_modules():
        if isinstance(u, FSDP) and u._handle is not None:
            by_unit[name.replace("_fsdp_wrapped_module.", "").replace("_fsdp_wrapped_module", "")] = u._handle
    order = []
    for k in KEYS:
        unit = k.split(".")[0] if k.split(".")[0] in by_unit else ""
        rel = k[len(unit) + 1:] if unit else k
        order.append([s for s in by_unit[unit].slots if s.fqn == rel][0])
    return order


def state_dicts():
    """Full state dict (rank0_only) is the unwrapped model's, keys and values;
    loading it into a differently initialised FSDP model gives the same
    parameters; a sharded state dict saved with distributed.checkpoint loads
    back bit-exactly into a fresh, differently initialised model."""
    rank, world = init()
    ckpt = os.environ["CKPT_DIR"]
    for orig in (False, True):
        ember.manual_seed(11)
        net = Net()
        net.register_buffer("steps", ember.arange(3.0))  # a buffer travels with the parameters
        ref = {k: v.clone() for k, v in net.state_dict().items()}
        model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            sd = model.state_dict()
        if rank == 0:
            assert list(sd) == list(ref), (list(sd), list(ref))
            for k in ref:
                same(sd[k].numpy(), ref[k].numpy(), f"full state dict {k}", 0)
        else:
            assert sd == {}, list(sd)
        # every rank loads the full state dict (rank 0's, sent to all)
        blob = [{k: v.numpy() for k, v in sd.items()} if rank == 0 else None]
        dist.broadcast_object_list(blob, src=0)
        full = {k: ember.from_numpy(v) for k, v in blob[0].items()}
        ember.manual_seed(12)
        other = Net()
        other.register_buffer("steps", ember.zeros(3))
        model2 = FSDP(other, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        with FSDP.state_dict_type(model2, StateDictType.FULL_STATE_DICT):
            res = model2.load_state_dict(full)
            assert not res.missing_keys and not res.unexpected_keys, res
        for got, (k, want) in zip(full_params(model2), [(k, ref[k]) for k in KEYS]):
            same(got, want.numpy(), f"after loading the full state dict: {k}", 0)
        # strict loading names the missing key without FSDP's prefixes
        try:
            with FSDP.state_dict_type(model2, StateDictType.FULL_STATE_DICT):
                model2.load_state_dict({k: v for k, v in full.items() if k != "b2.lin.bias"})
            raise AssertionError("a missing key did not raise")
        except RuntimeError as e:
            assert 'Missing key(s) in state_dict: "b2.lin.bias"' in str(e), e
        # sharded state dict -> distributed.checkpoint -> a fresh model
        path = os.path.join(ckpt, f"orig{int(orig)}")
        with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
            ssd = model.state_dict()
            assert sorted(ssd) == sorted(ref), list(ssd)
            dcp.save({"model": ssd, "step": 7}, checkpoint_id=path)
        ember.manual_seed(13)
        fresh = Net()
        fresh.register_buffer("steps", ember.zeros(3))
        model3 = FSDP(fresh, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        with FSDP.state_dict_type(model3, StateDictType.SHARDED_STATE_DICT):
            target = {"model": model3.state_dict(), "step": 0}
            dcp.load(target, storage_reader=dcp.FileSystemReader(path))
            model3.load_state_dict(target["model"])
        assert target["step"] == 7
        for got, (k, want) in zip(full_params(model3), [(k, ref[k]) for k in KEYS]):
            same(got, want.numpy(), f"after the sharded checkpoint round trip: {k}", 0)
        with FSDP.state_dict_type(model3, StateDictType.FULL_STATE_DICT):
            same(model3.state_dict()["steps"].numpy(), ref["steps"].numpy(), "buffer after the round trip", 0)
        if rank == 0:
            np.save(os.path.join(ckpt, f"ref{int(orig)}.npy"),
                    np.concatenate([ref[k].numpy().ravel() for k in KEYS]))
    print("ok")


def reshard_load():
    """The sharded checkpoint of state_dicts (saved by 2 ranks) loads into an
    FSDP model on this world size (1 or 4): the ranges are re-split."""
    rank, world = init()
    ckpt = os.environ["CKPT_DIR"]
    for orig in (False, True):
        want = np.load(os.path.join(ckpt, f"ref{int(orig)}.npy"))
        ember.manual_seed(99)
        model = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        model._fsdp_wrapped_module.register_buffer("steps", ember.zeros(3))
        with FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT):
            target = {"model": model.state_dict()}
            dcp.load(target, checkpoint_id=os.path.join(ckpt, f"orig{int(orig)}"))
            model.load_state_dict(target["model"])
        got = np.concatenate([p.ravel() for p in full_params(model)])
        same(got, want, f"world {world} loading a 2-rank checkpoint", 0)
    print("ok")


def fsdp2():
    """fully_shard on each block and the root: the class becomes FSDP<Class>,
    parameters are this rank's 1-D ranges, 5 Adam steps give NumPy's, and
    unshard()/reshard() show and hide the whole parameters."""
    rank, world = init()
    X, T = data(5, world, seed=6)
    lo, hi = 2 * rank, 2 * rank + 2
    for reshard in (True, False):
        net, params = numpy_params(seed=8)
        for b in (net.b1, net.b2):
            fully_shard(b, reshard_after_forward=reshard)
        fully_shard(net, reshard_after_forward=reshard)
        assert isinstance(net, FSDPModule) and isinstance(net, Net) and type(net).__name__ == "FSDPNet"
        assert isinstance(net.b1, FSDPModule) and isinstance(net.b1, Block)
        assert [n for n, _ in net.named_parameters()] == KEYS
        w = net.b1.lin.weight
        assert w.dim() == 1 and w.numel() <= -(-42 // world), w.shape
        opt = ember.optim.Adam(net.parameters(), lr=0.01)
        state = {}
        for step in range(5):
            opt.zero_grad()
            ember.nn.functional.mse_loss(net(ember.from_numpy(X[step, lo:hi]).float()),
                                         ember.from_numpy(T[step, lo:hi]).float()).backward()
            opt.step()
            params = np_adam(params, np_grads(params, X[step], T[step]), state, 0.01)
        for m in (net.b1, net.b2, net):
            m.unshard()
        got = [dict(net.named_parameters())[k].detach().numpy() for k in KEYS]
        for g, want, k in zip(got, params, KEYS):
            same(g, want, f"fully_shard(reshard_after_forward={reshard}) {k} after 5 steps", 1e-6)
        for m in (net.b1, net.b2, net):
            m.reshard()
        assert net.b1.lin.weight.dim() == 1
        # the sharded state dict through distributed.checkpoint, into a fresh sharded model
        path = os.path.join(os.environ["CKPT_DIR"], f"fsdp2_{int(reshard)}")
        sd = net.state_dict()
        assert list(sd) == KEYS and all(isinstance(v, dcp.FlatShardedTensor) for v in sd.values())
        dcp.save(sd, checkpoint_id=path)
        ember.manual_seed(77)
        fresh = Net()
        for b in (fresh.b1, fresh.b2):
            fully_shard(b)
        fully_shard(fresh)
        target = fresh.state_dict()
        dcp.load(target, checkpoint_id=path)
        fresh.load_state_dict(target)
        for m in (fresh.b1, fresh.b2, fresh):
            m.unshard()
        loaded = dict(fresh.named_parameters())
        for m in (net.b1, net.b2, net):
            m.unshard()
        trained = dict(net.named_parameters())
        for k in KEYS:
            same(loaded[k].detach().numpy(), trained[k].detach().numpy(), f"fully_shard checkpoint round trip {k}", 0)
    print("ok")


def optim_states():
    """FSDP.optim_state_dict (FULL) holds NumPy's Adam moments under the
    unwrapped names; loaded into a fresh model's optimizer (and, sharded,
    through distributed.checkpoint with get_state_dict/set_state_dict), the
    next steps are NumPy's continued training."""
    from ember.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    rank, world = init()
    X, T = data(5, world, seed=9)
    lo, hi = 2 * rank, 2 * rank + 2
    lossf = ember.nn.functional.mse_loss

    def step(model, opt, i):
        opt.zero_grad()
        lossf(model(ember.from_numpy(X[i, lo:hi]).float()), ember.from_numpy(T[i, lo:hi]).float()).backward()
        opt.step()

    def fresh(orig, seed):
        ember.manual_seed(seed)
        m = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        return m, ember.optim.Adam(m.parameters(), lr=0.01)

    for orig in (False, True):
        net, params = numpy_params(seed=21)
        model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=orig)
        opt = ember.optim.Adam(model.parameters(), lr=0.01)
        state = {}
        for i in range(3):
            step(model, opt, i)
            params = np_adam(params, np_grads(params, X[i], T[i]), state, 0.01)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
            osd = FSDP.optim_state_dict(model, opt)
            msd = model.state_dict()
        assert sorted(osd["state"]) == sorted(KEYS) and sorted(osd["param_groups"][0]["params"]) == sorted(KEYS)
        for j, k in enumerate(KEYS):
            m, v, t = state[j]
            same(osd["state"][k]["exp_avg"].numpy(), m, f"exp_avg of {k}", 1e-6)
            same(osd["state"][k]["exp_avg_sq"].numpy(), v, f"exp_avg_sq of {k}", 1e-6)
            assert float(osd["state"][k]["step"]) == t == 3
        # the full optimizer state into a fresh model: two more steps are NumPy's
        model2, opt2 = fresh(orig, seed=22)
        with FSDP.state_dict_type(model2, StateDictType.FULL_STATE_DICT):
            model2.load_state_dict(msd)
            opt2.load_state_dict(FSDP.optim_state_dict_to_load(model2, opt2, osd))
        # sharded model + optimizer state through distributed.checkpoint
        path = os.path.join(os.environ["CKPT_DIR"], f"optim{int(orig)}")
        msd_s, osd_s = get_state_dict(model, opt)
        assert all(isinstance(v, dcp.FlatShardedTensor) for v in msd_s.values())
        dcp.save({"model": msd_s, "optim": osd_s}, checkpoint_id=path)
        model3, opt3 = fresh(orig, seed=23)
        msd3, osd3 = get_state_dict(model3, opt3)
        target = {"model": msd3, "optim": osd3}
        dcp.load(target, checkpoint_id=path)
        set_state_dict(model3, opt3, model_state_dict=target["model"], optim_state_dict=target["optim"])
        for i in (3, 4):
            step(model2, opt2, i)
            step(model3, opt3, i)
            params = np_adam(params, np_grads(params, X[i], T[i]), state, 0.01)
        for got2, got3, want, k in zip(full_params(model2), full_params(model3), params, KEYS):
            same(got2, want, f"2 steps after loading the full optimizer state: {k}", 1e-6)
            same(got3, want, f"2 steps after the sharded checkpoint of model and optimizer: {k}", 1e-6)
    print("ok")


def no_sync():
    """Under no_sync the first micro-batch's gradient is kept unreduced; the
    next backward reduces the sum: SGD then steps on NumPy's summed gradient
    (from rank 0's initial weights, which sync_module_states broadcast)."""
    rank, world = init()
    X, T = data(3, world, seed=10)
    _, params = numpy_params(seed=31)
    net, _ = numpy_params(seed=31 + rank)  # different weights per rank: sync_module_states sends rank 0's
    model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({Block}), sync_module_states=True)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    lossf = ember.nn.functional.mse_loss
    a, b = 2 * rank, 2 * rank + 1  # rank's two rows: one micro-batch each
    for i in range(3):
        opt.zero_grad()
        with model.no_sync():
            lossf(model(ember.from_numpy(X[i, a:a + 1]).float()), ember.from_numpy(T[i, a:a + 1]).float()).backward()
        assert all(p.grad is None for p in model.parameters())  # nothing reduced yet
        lossf(model(ember.from_numpy(X[i, b:b + 1]).float()), ember.from_numpy(T[i, b:b + 1]).float()).backward()
        opt.step()
        g1 = np_grads(params, X[i, 0::2], T[i, 0::2])
        g2 = np_grads(params, X[i, 1::2], T[i, 1::2])
        params = np_sgd(params, [x + y for x, y in zip(g1, g2)], 0.1)
    for got, want, k in zip(full_params(model), params, KEYS):
        same(got, want, f"no_sync accumulation: {k}", 1e-6)
    print("ok")


def main():
    globals()[sys.argv[1]]()


if __name__ == "__main__":
    main()
