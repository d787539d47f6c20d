"""The parts of torch.distributed's sharded-tensor stack ember does not have
(DTensor, device meshes, HuggingFace checkpoint storage) answer "not
available" (python/ember/distributed/_absent.py): they import, as
transformers imports them whenever torch.distributed is available, nothing is
an instance of them, and using one raises NotImplementedError naming what is
missing. The parts that are real (placement descriptions, wait_tensor on a
finished tensor) behave as torch's."""
import pytest

import ember


def test_the_names_import_and_nothing_is_an_instance():
    from ember.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: F401
    from ember.distributed.tensor.placement_types import _StridedShard  # noqa: F401
    from ember.distributed.tensor._utils import compute_local_shape_and_global_offset  # noqa: F401
    from ember.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
    from ember.distributed.fsdp import CPUOffloadPolicy, FullyShardedDataParallel, MixedPrecisionPolicy  # noqa: F401
    from ember.distributed._composable.fsdp import fully_shard  # noqa: F401
    from ember.distributed.checkpoint.hf_storage import HuggingFaceStorageReader  # noqa: F401
    assert not isinstance(ember.ones(2), DTensor)
    assert not isinstance(ember.nn.Linear(2, 2), FullyShardedDataParallel)


@pytest.mark.parametrize("make", [
    lambda: __import__("ember.distributed.tensor", fromlist=["DTensor"]).DTensor(),
    lambda: __import__("ember.distributed.tensor", fromlist=["x"]).distribute_tensor(ember.ones(2), None, None),
    lambda: __import__("ember.distributed.device_mesh", fromlist=["x"]).init_device_mesh("cpu", (2,)),
    lambda: __import__("ember.distributed.checkpoint.hf_storage", fromlist=["x"]).HuggingFaceStorageReader("x"),
])
def test_using_them_raises_not_implemented(make):
    with pytest.raises(NotImplementedError, match="ember has no"):
        make()


def test_placements_are_descriptions_as_torchs():
    from ember.distributed.tensor import Partial, Replicate, Shard
    assert Shard(1) == Shard(1) and Shard(0) != Shard(1) and repr(Shard(1)) == "Shard(dim=1)"
    assert Replicate() == Replicate() and repr(Replicate()) == "Replicate()"
    assert Shard(0).is_shard() and Shard(0).is_shard(0) and not Shard(0).is_shard(1)
    assert Replicate().is_replicate() and Partial().is_partial() and repr(Partial()) == "Partial(sum)"


def test_wait_tensor_hands_back_a_finished_tensor():
    from ember.distributed._functional_collectives import wait_tensor
    t = ember.ones(3)
    assert wait_tensor(t) is t
    with pytest.raises(TypeError, match="expected a Tensor"):
        wait_tensor([1, 2])


def test_join_is_a_no_op_when_disabled_and_not_available_when_enabled():
    from ember.distributed.algorithms.join import Join, Joinable
    from ember.distributed.fsdp.fully_sharded_data_parallel import FullyShardedDataParallel  # noqa: F401

    class J(Joinable):
        pass

    with Join([J()], enable=False) as j:
        assert isinstance(j, Join)
    with pytest.raises(NotImplementedError, match="uneven inputs"):
        with Join([J()]):
            pass
    with pytest.raises(TypeError, match="int"):
        Join([1])
    with pytest.raises(ValueError):
        Join([])


def test_data_parallel_without_devices_runs_the_module():
    lin = ember.nn.Linear(3, 2)
    dp = ember.nn.DataParallel(lin)
    x = ember.ones(4, 3)
    assert dp.module is lin and ember.equal(dp(x), lin(x))
    assert isinstance(dp, ember.nn.parallel.DataParallel)
    assert [n for n, _ in dp.named_parameters()] == ["module.weight", "module.bias"]
