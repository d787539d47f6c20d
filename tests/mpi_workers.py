"""Scenarios for the "mpi" backend, run by tests/test_distributed_mpi.py under
`mpiexec -n N python -m mpi_workers SCENARIO` (the backend-neutral ones,
collectives and ddp, are in dist_workers.py). Expected values come from
NumPy on every rank's regenerated inputs."""
import datetime
import os
import sys
import time

import numpy as np

import ember
import ember.distributed as dist
import dist_workers
from dist_workers import same

R = dist.ReduceOp


def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return e
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


def extra():
    rank, world = int(os.environ["PMI_RANK"]), int(os.environ["PMI_SIZE"])
    assert dist.is_mpi_available()
    # rank and size are MPI's: an init that names others is refused
    raises(ValueError, lambda: dist.init_process_group("mpi", rank=world + 5, world_size=world),
           "disagree", f"rank {rank} of {world}")
    assert not dist.is_initialized()
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=30))
    assert (dist.get_rank(), dist.get_world_size()) == (rank, world)
    assert dist.get_backend() == "mpi" and dist.group.WORLD._comm.thread_level >= 2

    # complex: SUM and AVG as NumPy; the others are refused as torch does
    rng = [np.random.default_rng(r) for r in range(world)]
    zs = [g.standard_normal(9) + 1j * g.standard_normal(9) for g in rng]
    for dt, npdt, tol in ((ember.complex64, np.complex64, 1e-5), (ember.complex128, np.complex128, 1e-12)):
        for op, f in ((R.SUM, np.sum), (R.AVG, np.mean)):
            t = ember.from_numpy(zs[rank].astype(npdt))
            dist.all_reduce(t, op=op)
            want = f(np.stack(zs).astype(npdt), axis=0)
            same(t.numpy().real, want.real, f"all_reduce {dt} {op!r} (real)", tol)
            same(t.numpy().imag, want.imag, f"all_reduce {dt} {op!r} (imaginary)", tol)
        raises(ValueError, lambda: dist.all_reduce(ember.from_numpy(zs[rank].astype(npdt)), op=R.MAX),
               "MAX", "complex")
    # a complex broadcast and all_gather move the bytes as they are
    out = ember.empty(world, 9, dtype=ember.complex128)
    dist.all_gather_into_tensor(out, ember.from_numpy(zs[rank]))
    same(out.numpy(), np.stack(zs), "all_gather complex128")

    # unsupported op/dtype pairs: torch's error types, before any communication
    raises(RuntimeError, lambda: dist.all_reduce(ember.ones(3), op=R.BXOR), "non-integral")
    raises(RuntimeError, lambda: dist.all_reduce(ember.ones(3, dtype=ember.bool), op=R.AVG), "bool")
    raises(ValueError, lambda: dist.all_reduce(ember.ones(3), op=R.PREMUL_SUM), "mpi backend")
    raises(RuntimeError, lambda: dist.reduce_scatter_tensor(ember.empty(3), ember.empty(3 * world + 1)),
           "world_size")
    raises(ValueError, lambda: dist.isend(ember.ones(1), (rank + 1) % world, tag=-1).wait(), "tag")
    raises(RuntimeError, lambda: dist.monitored_barrier(), "only implemented for GLOO")

    # ranks whose calls disagree all raise (Note [MPI header]), and the group stays in step
    for bad in (lambda: dist.all_reduce(ember.ones(3 + rank)),
                lambda: dist.all_reduce(ember.ones(3, dtype=ember.float64 if rank else ember.float32)),
                lambda: dist.broadcast(ember.ones(3), src=rank),
                lambda: dist.all_gather_into_tensor(ember.empty(world * (2 + rank)), ember.ones(2 + rank)),
                lambda: dist.all_reduce(ember.ones(3), op=R.MAX if rank else R.MIN)):
        raises(dist.DistBackendError, bad, "disagree")
    e = raises(dist.DistBackendError,
               lambda: dist.all_reduce(ember.ones(2)) if rank else dist.broadcast(ember.ones(2), src=0),
               "same collectives")
    assert "all_reduce" in str(e) and "broadcast" in str(e), e

    # a receive posted for the wrong size fails the receiver, naming both sizes
    if rank == 0:
        dist.send(ember.ones(3), 1)
    elif rank == 1:
        raises(dist.DistBackendError, lambda: dist.recv(ember.empty(4), 0), "expected 4 elements",
               "sent 3")
    t = ember.ones(4)
    dist.all_reduce(t)  # the group is still in step
    same(t.numpy(), np.full(4, float(world), np.float32), "all_reduce after a short message")

    # two groups whose operations are in flight together (MPI_THREAD_MULTIPLE)
    sub = dist.new_group(list(range(world)))
    ws = []
    for i in range(20):
        ws.append(dist.all_reduce(ember.full((1000,), float(i + rank)), async_op=True))
        ws.append(dist.all_reduce(ember.full((1000,), float(i * rank)), group=sub, async_op=True))
    [w.wait() for w in ws]
    for i in range(20):
        same(ws[2 * i].result()[0].numpy()[:3], np.full(3, world * i + world * (world - 1) / 2, np.float32),
             "world all_reduce beside a subgroup's")
        same(ws[2 * i + 1].result()[0].numpy()[:3], np.full(3, i * world * (world - 1) / 2, np.float32),
             "subgroup all_reduce beside the world's")

    # a message larger than the posted receive: MPI truncates, the group is unusable after
    pair = dist.new_group([0, 1])
    if rank == 0:
        dist.send(ember.ones(5), 1, group=pair)
    elif rank == 1:
        raises(dist.DistBackendError, lambda: dist.recv(ember.empty(4), 0, group=pair), "larger",
               "recv of 4 elements")
        raises(dist.DistBackendError, lambda: dist.all_reduce(ember.ones(1), group=pair), "earlier")

    # a rank that is late past the group's timeout: the waiting rank raises in time and
    # the group is unusable after; the late rank's send still completes the posted receive
    # (a collective has two steps, Note [MPI header], so a late rank would time out too,
    # leaving a request that no rank completes and MPI_Finalize skipped)
    slow = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=1))
    if rank == 0:
        t0 = time.monotonic()
        raises(dist.DistBackendError, lambda: dist.recv(ember.empty(2), 1, group=slow), "timed out")
        assert time.monotonic() - t0 < 4, time.monotonic() - t0
        raises(dist.DistBackendError, lambda: dist.barrier(group=slow), "earlier")
    elif rank == 1:
        time.sleep(2.5)
        dist.send(ember.ones(2), 0, group=slow)
    dist.barrier()
    dist.destroy_process_group()
    # MPI stays initialized: a second init duplicates MPI_COMM_WORLD again
    dist.init_process_group("mpi")
    t = ember.tensor([rank], dtype=ember.int64)
    dist.all_reduce(t, op=R.MAX)
    same(t.numpy(), np.array([world - 1]), "all_reduce after a second init")
    dist.destroy_process_group()
    print("ok")


def main():
    try:
        name = sys.argv[1]  # a scenario here, or a backend-neutral one of dist_workers
        (globals().get(name) or getattr(dist_workers, name))()
    except BaseException:
        # exit at once, without MPI_Finalize: the other ranks' pending operations
        # with this one would make it wait, and mpiexec then ends them all
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
