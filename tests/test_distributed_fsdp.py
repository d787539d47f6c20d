"""ember.distributed.fsdp (FullyShardedDataParallel, fully_shard) and
ember.distributed.checkpoint. Multi-process scenarios (tests/dist_workers_fsdp.py)
train a small MLP on 2 ranks and compare with NumPy's float64 training on the
global batch; the rest runs in this process on a 1-rank group."""
import functools
import os

import numpy as np
import pytest

import ember
import ember.distributed as dist
import ember.distributed.checkpoint as dcp
from dist_common import check_ok, run_workers
from dist_workers_fsdp import Block
from ember.distributed.fsdp import (FullyShardedDataParallel as FSDP, ShardedStateDictConfig,
                                    ShardingStrategy, StateDictType, fully_shard)
from ember.distributed.fsdp.wrap import (ModuleWrapPolicy, enable_wrap, size_based_auto_wrap_policy,
                                         transformer_auto_wrap_policy, wrap)


def run(scenario, world, tmp_path, timeout=60):
    """Start `world` workers of dist_workers_fsdp SCENARIO; fail on a timeout."""
    check_ok(run_workers(scenario, world, timeout=timeout, env={"CKPT_DIR": str(tmp_path)},
                         module="dist_workers_fsdp"))


def test_each_strategy_trains_as_numpy(tmp_path):
    run("train", 2, tmp_path)


def test_bf16_mixed_precision_within_bf16_of_numpy(tmp_path):
    run("mixed", 2, tmp_path)


def test_clip_grad_norm_is_the_global_norm(tmp_path):
    run("clip", 2, tmp_path)


def test_state_dicts_and_checkpoint_round_trip_then_reshard_to_other_world_sizes(tmp_path):
    run("state_dicts", 2, tmp_path)
    run("reshard_load", 1, tmp_path)
    run("reshard_load", 4, tmp_path)


def test_fully_shard_trains_and_checkpoints(tmp_path):
    run("fsdp2", 2, tmp_path)


def test_optimizer_state_dicts_full_and_through_the_checkpoint(tmp_path):
    run("optim_states", 2, tmp_path)


def test_no_sync_accumulates_then_reduces_the_sum(tmp_path):
    run("no_sync", 2, tmp_path)


# ------------------------------------------------------------ one process

@pytest.fixture
def group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def net():
    return ember.nn.Sequential(Block(4, 6), Block(6, 6), ember.nn.Linear(6, 2))


def test_policies_follow_torchs_rules():
    lin, ml = ember.nn.Linear(2, 2), ember.nn.ModuleList([ember.nn.Linear(2, 2)])
    assert size_based_auto_wrap_policy(lin, recurse=False, nonwrapped_numel=100, min_num_params=100)
    assert not size_based_auto_wrap_policy(lin, recurse=False, nonwrapped_numel=99, min_num_params=100)
    assert not size_based_auto_wrap_policy(ml, recurse=False, nonwrapped_numel=10**9)  # never wraps containers
    assert size_based_auto_wrap_policy(ml, recurse=True, nonwrapped_numel=0)
    assert not size_based_auto_wrap_policy(ember.nn.MultiheadAttention(4, 2), recurse=True, nonwrapped_numel=0)
    assert transformer_auto_wrap_policy(lin, True, 0, transformer_layer_cls={Block})
    assert not transformer_auto_wrap_policy(lin, False, 0, transformer_layer_cls={Block})
    assert transformer_auto_wrap_policy(Block(2, 2), False, 0, transformer_layer_cls={Block})
    p = ModuleWrapPolicy({Block})
    assert p(module=Block(1, 1), recurse=False, nonwrapped_numel=0) and not p(module=lin, recurse=False,
                                                                             nonwrapped_numel=0)


def test_auto_wrap_makes_nested_units_and_wrap_context(group):
    model = FSDP(net(), auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=40))
    # bottom-up: the Linear(6, 6) in the second block has 42 parameters and wraps (its block has none
    # left over); Block(4, 6) (30) and the head (14) stay with the root
    assert isinstance(model, FSDP) and isinstance(model.module[1].lin, FSDP)
    assert not isinstance(model.module[1], FSDP) and not isinstance(model.module[0].lin, FSDP)
    assert model._handle.numel == 30 + 14 and model.module[1].lin._handle.numel == 42
    assert len(FSDP.fsdp_modules(model)) == 2 and FSDP.fsdp_modules(model, root_only=True) == [model]
    lin = ember.nn.Linear(2, 2)
    assert wrap(lin) is lin  # outside enable_wrap: unchanged
    with enable_wrap(wrapper_cls=FSDP, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP):
        w = wrap(ember.nn.Linear(2, 2))
    assert isinstance(w, FSDP) and w.sharding_strategy == ShardingStrategy.SHARD_GRAD_OP


def test_ignored_modules_keep_their_parameters(group):
    base = net()
    head = base[2]
    model = FSDP(base, auto_wrap_policy=ModuleWrapPolicy({Block}), ignored_modules=[head])
    assert isinstance(head.weight, ember.nn.Parameter) and tuple(head.weight.shape) == (2, 6)
    assert model._handle is None  # the root has nothing left to shard
    out = model(ember.ones(3, 4))
    out.sum().backward()
    assert head.weight.grad is not None and tuple(out.shape) == (3, 2)


def test_summon_full_params_shows_and_writes_back(group):
    ember.manual_seed(0)
    base = net()
    want = {k: v.clone() for k, v in base.state_dict().items()}
    model = FSDP(base, auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=True)
    with FSDP.summon_full_params(model):
        got = dict(model.named_parameters())
        assert sorted(got) == sorted(want)  # names without FSDP's prefixes inside, as torch
        for k, v in want.items():
            assert ember.equal(got[k], v), k
        with ember.no_grad():
            got["2.bias"].fill_(3.0)
    with FSDP.summon_full_params(model, writeback=False):
        assert ember.equal(dict(model.named_parameters())["2.bias"], ember.full((2,), 3.0))
        with ember.no_grad():
            dict(model.named_parameters())["2.bias"].fill_(-1.0)
    with FSDP.summon_full_params(model):
        assert ember.equal(dict(model.named_parameters())["2.bias"], ember.full((2,), 3.0))
    assert any(n.startswith("_fsdp_wrapped_module.") for n, _ in model.named_parameters())


def test_bad_arguments_raise_torchs_errors(group):
    with pytest.raises(ValueError, match="not a valid ShardingStrategy"):
        FSDP(net(), sharding_strategy="FULL")
    with pytest.raises(NotImplementedError, match="hybrid"):
        FSDP(net(), sharding_strategy=ShardingStrategy.HYBRID_SHARD)
    with pytest.raises(NotImplementedError, match="CPU"):
        FSDP(net(), device_id=0)
    mixed = ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.Linear(2, 2).double())
    with pytest.raises(ValueError, match="uniform dtype"):
        FSDP(mixed)
    model = FSDP(net(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    with pytest.raises(RuntimeError, match="Expected state_dict_config of type"):
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, ShardedStateDictConfig()):
            pass
    with pytest.raises(KeyError):
        FSDP.set_state_dict_type(model, "full")
    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT):
        with pytest.raises(NotImplementedError, match="LOCAL_STATE_DICT"):
            model.state_dict()
    assert FSDP.get_state_dict_type(model).state_dict_type == StateDictType.FULL_STATE_DICT
    with pytest.raises(ValueError, match="rank0_only=True"):
        with FSDP.summon_full_params(model, rank0_only=True, writeback=True):
            pass
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        sd = model.state_dict()
        sd["0.lin.weight"] = ember.zeros(3, 3)
        with pytest.raises(RuntimeError, match=r"size mismatch for 0.lin.weight"):
            model.load_state_dict(sd)
    with pytest.raises(NotImplementedError, match="DeviceMesh"):
        fully_shard(net(), mesh=object())


def test_fsdp_needs_a_process_group():
    with pytest.raises(ValueError, match="not been initialized"):
        FSDP(net())
    with pytest.raises(ValueError, match="not been initialized"):
        fully_shard(net())


def test_checkpoint_single_process_and_errors(tmp_path):
    sd = {"w": ember.arange(6.0).view(2, 3), "opt": {"step": 4, "lr": 0.5, "name": "adam", "none": None,
                                                    "bf": ember.ones(3, dtype=ember.bfloat16)}}
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(tmp_path / "c"))
    assert sorted(os.listdir(tmp_path / "c")) == [".metadata", "__0_0.safetensors"]
    target = {"w": ember.zeros(2, 3), "opt": {"step": 0, "lr": 0.0, "name": "", "none": 1,
                                             "bf": ember.zeros(3, dtype=ember.bfloat16)}}
    dcp.load(target, checkpoint_id=tmp_path / "c")
    assert target["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and target["opt"]["bf"].tolist() == [1, 1, 1]
    assert (target["opt"]["step"], target["opt"]["lr"], target["opt"]["name"], target["opt"]["none"]) == \
        (4, 0.5, "adam", None)
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: extra"):
        dcp.load({"extra": ember.zeros(1)}, checkpoint_id=tmp_path / "c")
    with pytest.raises(RuntimeError, match=r"Size mismatch between saved \[2, 3\] and current: \[3\] for w"):
        dcp.load({"w": ember.zeros(3)}, checkpoint_id=tmp_path / "c")
    with pytest.raises(TypeError, match="never pickles"):
        dcp.save({"f": object()}, checkpoint_id=tmp_path / "d")
    with pytest.raises(FileNotFoundError, match="metadata"):
        dcp.load({"w": ember.zeros(2, 3)}, checkpoint_id=tmp_path / "missing")
    with pytest.raises(RuntimeError, match="checkpoint_id"):
        dcp.save(sd)
    partial = {"w": ember.zeros(2, 3), "not_saved": ember.zeros(1)}
    dcp.load(partial, checkpoint_id=tmp_path / "c", planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
    assert partial["w"].tolist() == [[0, 1, 2], [3, 4, 5]] and partial["not_saved"].tolist() == [0]
    s = dcp.FlatShardedTensor(ember.arange(2.0), 3, (2, 3))
    assert s.shape == (2, 3) and s.local_numel == 2 and s.offset == 3
    with pytest.raises(ValueError, match="outside"):
        dcp.FlatShardedTensor(ember.arange(2.0), 5, (2, 3))
    np.testing.assert_array_equal(dcp.FlatShardedTensor(ember.arange(2.0), 0, (2,)).to_local().numpy(), [0, 1])
