"""ember.distributed: stores, rendezvous, the gloo (ember's C TCP) transport's
collectives against NumPy, and failure behaviour. Multi-process tests run
workers (tests/dist_workers.py) on 127.0.0.1, each bounded by a timeout."""
import datetime
import gc
import socket
import time

import pytest

import ember
import ember.distributed as dist
from dist_common import check_ok, free_port, run_workers


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_against_numpy(world):
    check_ok(run_workers("collectives", world, timeout=90))


def test_ddp_matches_single_process_numpy_training():
    check_ok(run_workers("ddp", 2))


def test_disagreeing_arguments_raise_on_every_rank():
    check_ok(run_workers("mismatch", 2))


def test_dead_peer_raises_naming_it():
    check_ok(run_workers("dead_peer", 2))


def test_hung_peer_times_out_naming_it():
    check_ok(run_workers("hung_peer", 2))


def test_closing_the_transport_under_a_running_collective_fails_it_cleanly():
    check_ok(run_workers("close_while_running", 2))


def test_init_methods_env_slurm_tcp_file(tmp_path):
    check_ok(run_workers("init_methods", 2, env={"DIST_FILE": str(tmp_path / "store")}))


def test_tcp_store_many_clients():
    check_ok(run_workers("stores", 3))


def test_availability_answers():
    assert dist.is_available() and dist.is_gloo_available()
    assert not dist.is_nccl_available() and not dist.is_mpi_available()
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        dist.get_rank()
    with pytest.raises(RuntimeError, match="NCCL"):
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1)
    assert issubclass(dist.DistStoreError, RuntimeError) and issubclass(dist.DistBackendError, RuntimeError)


def _store_semantics(s):
    s.set("a", "x")
    s.set("b", b"\x00\xff")
    assert s.get("a") == b"x" and s.get("b") == b"\x00\xff"
    assert s.add("n", 3) == 3 and s.add("n", -1) == 2 and s.get("n") == b"2"
    assert s.compare_set("n", "2", "7") == b"7"          # matches: set
    assert s.compare_set("n", "2", "8") == b"7"          # no match: the current value
    assert s.compare_set("new", "", "z") == b"z"         # missing and expected "": set
    assert s.compare_set("none", "q", "z") == b"q"       # missing: the expected value, not set
    assert s.check(["a", "new"]) and not s.check(["none"])
    k = s.num_keys()
    assert s.delete_key("a") and not s.delete_key("a") and s.num_keys() == k - 1
    t0 = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="wait timeout after 200ms, keys: .*missing"):
        s.wait(["missing"], datetime.timedelta(seconds=0.2))
    assert time.monotonic() - t0 < 2
    s.set_timeout(datetime.timedelta(seconds=0.2))
    with pytest.raises(dist.DistStoreError):
        s.get("missing")
    s.set("after", "1")  # still usable after a timeout
    assert s.get("after") == b"1"


def test_hash_store():
    _store_semantics(dist.HashStore())


def test_file_store(tmp_path):
    _store_semantics(dist.FileStore(str(tmp_path / "fs")))
    a, b = dist.FileStore(str(tmp_path / "shared")), dist.FileStore(str(tmp_path / "shared"))
    a.set("k", "v")
    assert b.get("k") == b"v" and b.add("c", 2) == 2 and a.add("c", 2) == 4


def test_tcp_store_and_prefix_store():
    s = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=5))
    assert s.port > 0
    _store_semantics(s)
    p = dist.PrefixStore("pre", s)
    p.set("k", "v")
    assert s.get("pre/k") == b"v" and p.get("k") == b"v" and p.add("c", 1) == 1


def test_tcp_store_port_in_use_and_unreachable_master():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(dist.DistNetworkError, match="in use"):
            dist.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=1))
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(dist.DistNetworkError, match="timed out"):
        dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=0.5))
    assert time.monotonic() - t0 < 5


def test_wrong_world_size_times_out_naming_the_missing_rank():
    port = free_port()
    with pytest.raises(dist.DistStoreError, match="rank 1 did not join"):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2,
                                timeout=datetime.timedelta(seconds=0.5))
    assert not dist.is_initialized()


def test_single_process_group_and_bad_arguments():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.get_backend() == "gloo"
        with pytest.raises(ValueError, match="twice"):
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        t = ember.arange(4.0)
        dist.all_reduce(t)
        assert t.tolist() == [0, 1, 2, 3]
        with pytest.raises(TypeError, match="torch.Tensor"):
            dist.all_reduce([1, 2])
        with pytest.raises(RuntimeError, match="output tensor size"):
            dist.all_gather_into_tensor(ember.empty(3), ember.empty(2))
        with pytest.raises(ValueError):
            dist.broadcast(t, src=3)
        with pytest.raises(RuntimeError, match="non-integral"):
            dist.all_reduce(t, op=dist.ReduceOp.BXOR)
        w = dist.all_reduce(t, async_op=True)
        assert w.wait() and w.is_completed()
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_file_store_removes_its_file_when_the_last_user_goes(tmp_path):
    path = tmp_path / "f"
    a, b = dist.FileStore(str(path)), dist.FileStore(str(path))
    a.set("k", "v")
    del a
    value = b.get("k")
    assert path.exists()
    assert value == b"v"
    del b
    gc.collect()
    assert not path.exists()


def test_zero_redundancy_optimizer_matches_numpy_adam():
    check_ok(run_workers("zero", 2, timeout=120))


def test_sync_batch_norm_uses_the_whole_batch():
    check_ok(run_workers("sync_bn", 2))
