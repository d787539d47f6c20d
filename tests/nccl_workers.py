"""Scenarios for the "nccl" backend, one process per GPU (rank r on cuda:r),
started by tests/test_distributed_nccl.py through dist_common.run_workers.
Inputs are regenerated on every rank with NumPy; results are compared with
NumPy on the host."""
import datetime
import sys

import numpy as np

import ember
import ember.distributed as dist
from dist_workers import DTYPES, FLOATS, data, env_rank, expected, same, to_np

R = dist.ReduceOp
# NCCL reduces these (no int16; no bitwise ops)
NCCL_OPS = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX]


def cuda(a, dtype):
    t = ember.from_numpy(np.array(a))
    return t.to(dtype).cuda() if dtype == ember.bfloat16 else t.cuda()


def host(t):
    return to_np(t.cpu())


def raises(exc, fn, *words):
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), (w, str(e))
        return
    raise AssertionError(f"{fn} did not raise {exc.__name__}")


def collectives():
    rank, world = env_rank()
    ember.cuda.set_device(rank)
    assert dist.is_nccl_available()
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == "nccl" and dist.get_world_size() == world

    for dtype in DTYPES:
        for op in NCCL_OPS:
            if dtype == ember.int16 or (dtype == ember.bool and op == R.AVG):
                continue
            arrays = [data(r, 1001, dtype, seed=op) for r in range(world)]
            t = cuda(arrays[rank], dtype)
            dist.all_reduce(t, op=op)
            tol = 1e-2 if (op == R.AVG and dtype in (ember.float16, ember.bfloat16)) else 0
            same(host(t), expected(arrays, op, dtype, world), f"nccl all_reduce {dtype} {op!r}", tol)
    # non-reducing collectives move every dtype, int16 and complex included
    for dtype in DTYPES + [ember.complex64]:
        a = [data(r, 12, ember.int64 if dtype == ember.complex64 else dtype, seed=3) for r in range(world)]
        if dtype == ember.complex64:
            a = [x.astype(np.complex64) * (1 + 2j) for x in a]
        t = cuda(a[rank], dtype)
        dist.broadcast(t, src=world - 1)
        same(host(t), a[world - 1].astype(host(t).dtype), f"nccl broadcast {dtype}")
        out = ember.empty(world, 12, dtype=dtype, device="cuda")
        dist.all_gather_into_tensor(out, cuda(a[rank], dtype))
        same(host(out), np.stack(a).astype(host(out).dtype), f"nccl all_gather {dtype}")

    # reduce: only the destination holds the result
    arrays = [data(r, 300, ember.float32, seed=5) for r in range(world)]
    t = cuda(arrays[rank], ember.float32)
    dist.reduce(t, dst=0, op=R.MAX)
    same(host(t), expected(arrays, R.MAX, ember.float32, world) if rank == 0 else arrays[rank], "nccl reduce")
    # reduce_scatter, AVG too
    for op in (R.SUM, R.AVG):
        full = [data(r, world * 5, ember.float64, seed=9) for r in range(world)]
        o = ember.empty(5, dtype=ember.float64, device="cuda")
        dist.reduce_scatter_tensor(o, cuda(full[rank], ember.float64), op=op)
        same(host(o), expected(full, op, ember.float64, world).reshape(world, 5)[rank],
             f"nccl reduce_scatter {op!r}", 1e-12)
    # complex SUM as float pairs
    z = [np.random.default_rng(r).standard_normal(6) + 1j for r in range(world)]
    t = ember.from_numpy(z[rank].astype(np.complex64)).cuda()
    dist.all_reduce(t)
    got, want = t.cpu().numpy(), np.sum(np.stack(z), axis=0)
    same(got.real, want.real, "nccl complex sum (real)", 1e-5)
    same(got.imag, want.imag, "nccl complex sum (imaginary)", 1e-5)

    # gather / scatter / all_to_all (grouped send and receive)
    g = [ember.empty(4, dtype=ember.int32, device="cuda") for _ in range(world)] if rank == 0 else None
    dist.gather(cuda(data(rank, 4, ember.int32), ember.int32), g, dst=0)
    if rank == 0:
        for r in range(world):
            same(host(g[r]), data(r, 4, ember.int32), "nccl gather")
    s = ember.empty(3, dtype=ember.float32, device="cuda")
    sl = [ember.full((3,), float(10 * r), device="cuda") for r in range(world)] if rank == world - 1 else None
    dist.scatter(s, sl, src=world - 1)
    same(host(s), np.full(3, 10.0 * rank, np.float32), "nccl scatter")
    rows_out = [rank + j + 1 for j in range(world)]
    rows_in = [j + rank + 1 for j in range(world)]
    inp = ember.cat([ember.full((k, 2), float(100 * rank + j)) for j, k in enumerate(rows_out)]).cuda()
    out = ember.empty(sum(rows_in), 2, device="cuda")
    dist.all_to_all_single(out, inp, output_split_sizes=rows_in, input_split_sizes=rows_out)
    want = np.concatenate([np.full((k, 2), 100.0 * j + rank, np.float32) for j, k in enumerate(rows_in)])
    same(host(out), want, "nccl all_to_all_single uneven")

    # point to point: a ring with batch_isend_irecv and with send/recv
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    r = ember.empty(1000, device="cuda")
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ember.full((1000,), float(rank), device="cuda"), nxt),
                                   dist.P2POp(dist.irecv, r, prv)])
    [q.wait() for q in reqs]
    same(host(r), np.full(1000, float(prv), np.float32), "nccl batch_isend_irecv")
    if rank == 0:
        dist.send(ember.full((7,), 5.0, device="cuda"), 1)
    elif rank == 1:
        x = ember.empty(7, device="cuda")
        dist.recv(x, 0)
        same(host(x), np.full(7, 5.0, np.float32), "nccl send/recv")

    # async work on the current stream, a subgroup, a barrier
    t = ember.full((100000,), float(rank), device="cuda")
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    same(host(t)[:4], np.full(4, world * (world - 1) / 2, np.float32), "nccl async all_reduce")
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        t = ember.tensor([float(rank + 1)], device="cuda")
        dist.all_reduce(t, group=sub)
        same(host(t), np.array([3.0], np.float32), "nccl subgroup all_reduce")
    dist.barrier()

    # bad input: torch's error types, before anything is enqueued
    raises(ValueError, lambda: dist.all_reduce(ember.ones(3, dtype=ember.int32, device="cuda"), op=R.BAND),
           "BAND", "NCCL")
    raises(TypeError, lambda: dist.all_reduce(ember.ones(3, dtype=ember.int16, device="cuda")), "int16")
    raises(RuntimeError, lambda: dist.all_reduce(ember.ones(3)), "CUDA tensors")
    raises(RuntimeError, lambda: dist.recv(ember.empty(2, device="cuda")), "any source")
    for dtype in FLOATS:
        raises(ValueError, lambda: dist.all_reduce(ember.ones(2, dtype=dtype, device="cuda"), op=R.BXOR), "BXOR")
    t = ember.ones(2, device="cuda")
    dist.all_reduce(t)  # still usable after refused calls
    same(host(t), np.full(2, float(world), np.float32), "nccl all_reduce after refusals")
    dist.destroy_process_group()
    print("ok")


def main():
    globals()[sys.argv[1]]()


if __name__ == "__main__":
    main()
