"""Scenarios run inside each worker process of the distributed tests
(tests/dist_common.py starts them: `python -m dist_workers SCENARIO`). Every
expected value is computed here with NumPy from every rank's inputs, which
each rank can regenerate (seeded by rank)."""
import datetime
import os
import sys
import time

import numpy as np

import ember
import ember.distributed as dist

R = dist.ReduceOp
DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
          ember.float16, ember.bfloat16, ember.float32, ember.float64]
NP = {ember.bool: np.bool_, ember.uint8: np.uint8, ember.int8: np.int8, ember.int16: np.int16,
      ember.int32: np.int32, ember.int64: np.int64, ember.float16: np.float16,
      ember.bfloat16: np.float32, ember.float32: np.float32, ember.float64: np.float64}
FLOATS = (ember.float16, ember.bfloat16, ember.float32, ember.float64)


# the backend under test: gloo, or mpi when the test runs the workers under mpiexec
BACKEND = os.environ.get("EMBER_DIST_BACKEND", "gloo")


def env_rank():
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def data(rank, n, dtype, seed=0):
    """rank's input: small integers, exact in every dtype (sums and products too)."""
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype == ember.bool:
        return rng.integers(0, 2, n).astype(np.bool_)
    lo = 0 if dtype == ember.uint8 else -3
    return rng.integers(lo, 4, n).astype(NP[dtype])


def to_ember(a, dtype):
    t = ember.from_numpy(np.array(a))  # a copy: collectives write in place
    return t.to(dtype) if dtype == ember.bfloat16 else t


def to_np(t):
    return (t.float() if t.dtype == ember.bfloat16 else t).numpy()


def expected(arrays, op, dtype, world):
    a = np.stack(arrays)
    if dtype == ember.bool:
        f = {R.SUM: np.any, R.MAX: np.any, R.BOR: np.any, R.PRODUCT: np.all, R.MIN: np.all,
             R.BAND: np.all}.get(op)
        return f(a, axis=0) if f else np.logical_xor.reduce(a, axis=0)
    if op == R.SUM:
        return np.sum(a, axis=0, dtype=a.dtype)
    if op == R.AVG:
        s = np.sum(a, axis=0, dtype=np.float64) / world
        return (s if dtype in FLOATS else np.trunc(s)).astype(a.dtype)
    f = {R.PRODUCT: np.multiply, R.MIN: np.minimum, R.MAX: np.maximum, R.BAND: np.bitwise_and,
         R.BOR: np.bitwise_or, R.BXOR: np.bitwise_xor}[op]
    return f.reduce(a, axis=0)


def same(got, want, what, tol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if tol:
        wide = np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(want) else np.float64
        ok = np.allclose(got.astype(wide), want.astype(wide), rtol=tol, atol=tol)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        bad = np.argwhere(got != want)[:5]
        raise AssertionError(f"{what}: mismatch at {bad.tolist()}: got {got.ravel()[:8]} want "
                             f"{want.ravel()[:8]}")


def ops_for(dtype):
    ops = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]
    if dtype in FLOATS:
        ops = ops[:5]
    if dtype == ember.bool:
        ops = [o for o in ops if o != R.AVG]
    return ops


def init(timeout=30, **kw):
    dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=timeout), **kw)
    return dist.get_rank(), dist.get_world_size()


# ----------------------------------------------------------------- scenarios

def collectives():
    rank, world = init()
    assert dist.is_initialized() and dist.get_backend() == BACKEND
    # all_reduce: every dtype x op, a tree-sized and (for some) a ring-sized tensor
    for dtype in DTYPES:
        sizes = [7, 70001] if dtype in (ember.float32, ember.int64, ember.float16, ember.bool) else [7]
        for n in sizes:
            for op in ops_for(dtype):
                arrays = [data(r, n, dtype, seed=op) for r in range(world)]
                t = to_ember(arrays[rank], dtype)
                dist.all_reduce(t, op=op)
                tol = 1e-2 if (op == R.AVG and dtype in (ember.float16, ember.bfloat16)) else 0
                same(to_np(t), expected(arrays, op, dtype, world), f"all_reduce {dtype} {op!r} n={n}", tol)
    # blocks of several 256 KB receive pieces (the ring folds each into place
    # while the next arrives), the last one partial
    for dtype, n in ((ember.int64, 300001), (ember.float16, 1000003)):
        arrays = [data(r, n, dtype, seed=11) for r in range(world)]
        t = to_ember(arrays[rank], dtype)
        dist.all_reduce(t, op=R.MAX)
        same(to_np(t), expected(arrays, R.MAX, dtype, world), f"all_reduce {dtype} MAX n={n}")
    # complex: SUM and AVG part by part, against NumPy's complex sums; the
    # other ops raise torch's ValueError before any communication
    for dtype, npt in ((ember.complex64, np.complex64), (ember.complex128, np.complex128)):
        for n in (5, 100003):  # tree- and ring-sized
            g = [np.random.default_rng(r + 20) for r in range(world)]
            arrays = [(x.standard_normal(n) + 1j * x.standard_normal(n)).astype(npt) for x in g]
            for op, want in ((R.SUM, np.sum(np.stack(arrays), axis=0)), (R.AVG, np.mean(np.stack(arrays), axis=0))):
                t = ember.from_numpy(arrays[rank].copy())
                dist.all_reduce(t, op=op)
                same(t.numpy(), want.astype(npt), f"all_reduce {dtype} {op!r} n={n}", 1e-5)
        t = ember.from_numpy(arrays[rank].copy())
        dist.reduce(t, dst=0)
        if rank == 0:
            same(t.numpy(), np.sum(np.stack(arrays), axis=0).astype(npt), f"reduce {dtype}", 1e-5)
        o = ember.empty(n // world, dtype=dtype)
        dist.reduce_scatter_tensor(o, ember.from_numpy(arrays[rank][:n // world * world].copy()))
        part = np.sum(np.stack(arrays), axis=0)[:n // world * world].reshape(world, -1)[rank]
        same(o.numpy(), part.astype(npt), f"reduce_scatter_tensor {dtype}", 1e-5)
        for op in (R.MAX, R.MIN, R.PRODUCT, R.BAND):
            try:
                dist.all_reduce(ember.ones(3, dtype=dtype), op=op)
                raise AssertionError(f"{op!r} on complex did not raise")
            except ValueError as e:
                assert "on complex tensors" in str(e), e
    # float AVG exactly as NumPy in float64
    a = [np.random.default_rng(r).standard_normal(100000) for r in range(world)]
    t = ember.from_numpy(a[rank].copy())
    dist.all_reduce(t, op=R.AVG)
    same(t.numpy(), np.mean(np.stack(a), axis=0), "all_reduce AVG float64", 1e-12)
    # unsupported op/dtype pairs raise before any communication
    for op in (R.BAND, R.BOR, R.BXOR):
        try:
            dist.all_reduce(ember.ones(3), op=op)
            raise AssertionError("BAND on float did not raise")
        except RuntimeError as e:
            assert "non-integral" in str(e), e
    # non-contiguous: a transposed view and a strided slice
    base = [np.arange(24, dtype=np.float32).reshape(4, 6) * (r + 1) for r in range(world)]
    b = ember.from_numpy(base[rank].copy())
    dist.all_reduce(b.t())
    same(b.numpy(), sum(base), "all_reduce transposed")
    b = ember.from_numpy(base[rank].copy())
    dist.all_reduce(b[:, ::2])
    want = base[rank].copy()
    want[:, ::2] = sum(x[:, ::2] for x in base)
    same(b.numpy(), want, "all_reduce strided slice leaves the other elements alone")
    # 0 elements, 0-d
    e = ember.empty(0)
    dist.all_reduce(e)
    z = ember.tensor(float(rank + 1))
    dist.all_reduce(z)
    same(z.numpy(), np.float32(world * (world + 1) / 2), "all_reduce 0-d")

    # broadcast from each root, a large one and a non-contiguous one
    for root in range(world):
        for n, dtype in ((5, ember.int32), (90000, ember.float32), (3, ember.bfloat16)):
            t = to_ember(data(rank, n, dtype, seed=root), dtype)
            dist.broadcast(t, src=root)
            same(to_np(t), data(root, n, dtype, seed=root).astype(np.float32)
                 if dtype == ember.bfloat16 else data(root, n, dtype, seed=root), f"broadcast root {root}")
    m = ember.from_numpy(np.full((3, 4), rank, np.int64))
    dist.broadcast(m[:, 1], src=world - 1)
    want = np.full((3, 4), rank, np.int64)
    want[:, 1] = world - 1
    same(m.numpy(), want, "broadcast into a column")

    # reduce: only the destination gets the result, the others keep their input
    for op in (R.SUM, R.MAX, R.AVG):
        arrays = [data(r, 300, ember.float64, seed=5) for r in range(world)]
        t = ember.from_numpy(arrays[rank].copy())
        dist.reduce(t, dst=world - 1, op=op)
        same(t.numpy(), expected(arrays, op, ember.float64, world) if rank == world - 1 else arrays[rank],
             f"reduce {op!r}", 1e-12)

    # all_gather / all_gather_into_tensor
    for dtype in DTYPES:
        arrays = [data(r, 6, dtype, seed=7) for r in range(world)]
        outs = [ember.empty(2, 3, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, to_ember(arrays[rank], dtype).reshape(2, 3))
        for r in range(world):
            same(to_np(outs[r]).ravel(), arrays[r].astype(to_np(outs[r]).dtype), f"all_gather {dtype}")
    big = [data(r, 50001, ember.float32, seed=8) for r in range(world)]
    out = ember.empty(world, 50001)
    dist.all_gather_into_tensor(out, ember.from_numpy(big[rank]))
    same(out.numpy(), np.stack(big), "all_gather_into_tensor")
    out = ember.empty(world * 2, 3)[:, ::1]
    dist.all_gather_into_tensor(out, ember.full((2, 3), float(rank)))
    same(out.numpy(), np.repeat(np.arange(world, dtype=np.float32), 6).reshape(world * 2, 3), "ag into 2-d")

    # reduce_scatter / reduce_scatter_tensor
    for op in (R.SUM, R.MIN, R.PRODUCT):
        full = [data(r, world * 5, ember.int32, seed=9) for r in range(world)]
        want = expected(full, op, ember.int32, world).reshape(world, 5)[rank]
        o = ember.empty(5, dtype=ember.int32)
        dist.reduce_scatter_tensor(o, ember.from_numpy(full[rank]), op=op)
        same(o.numpy(), want, f"reduce_scatter_tensor {op!r}")
        o = ember.empty(5, dtype=ember.int32)
        dist.reduce_scatter(o, list(ember.from_numpy(full[rank]).reshape(world, 5).unbind(0)), op=op)
        same(o.numpy(), want, f"reduce_scatter {op!r}")
    full = [data(r, world * 40000, ember.float32, seed=10) for r in range(world)]
    o = ember.empty(40000)
    dist.reduce_scatter_tensor(o, ember.from_numpy(full[rank]))
    same(o.numpy(), np.sum(np.stack(full), axis=0).reshape(world, -1)[rank], "reduce_scatter large")

    # gather / scatter
    root = world - 1
    g = [ember.empty(4, dtype=ember.int16) for _ in range(world)] if rank == root else None
    dist.gather(ember.from_numpy(data(rank, 4, ember.int16)), g, dst=root)
    if rank == root:
        for r in range(world):
            same(g[r].numpy(), data(r, 4, ember.int16), "gather")
    s = ember.empty(3, dtype=ember.float64)
    sl = [ember.full((3,), float(10 * r), dtype=ember.float64) for r in range(world)] if rank == 0 else None
    dist.scatter(s, sl, src=0)
    same(s.numpy(), np.full(3, 10.0 * rank), "scatter")

    # all_to_all with uneven split sizes: rank r sends (r + j + 1) rows to rank j
    rows_out = [rank + j + 1 for j in range(world)]
    rows_in = [j + rank + 1 for j in range(world)]
    inp = ember.cat([ember.full((k, 2), float(100 * rank + j)) for j, k in enumerate(rows_out)])
    out = ember.empty(sum(rows_in), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=rows_in, input_split_sizes=rows_out)
    want = np.concatenate([np.full((k, 2), 100.0 * j + rank, np.float32) for j, k in enumerate(rows_in)])
    same(out.numpy(), want, "all_to_all_single uneven")
    inp = ember.arange(world * 2, dtype=ember.int64) + 100 * rank
    out = ember.empty(world * 2, dtype=ember.int64)
    dist.all_to_all_single(out, inp)
    same(out.numpy(), np.concatenate([100 * j + np.arange(2 * rank, 2 * rank + 2) for j in range(world)]),
         "all_to_all_single even")
    outs = [ember.empty(j + 1) for j in range(world)]
    dist.all_to_all(outs, [ember.full((rank + 1,), float(rank * 10 + j)) for j in range(world)])
    for j in range(world):
        same(outs[j].numpy(), np.full(j + 1, j * 10.0 + rank, np.float32), "all_to_all")

    # point to point: a ring with send/recv, isend/irecv, batch_isend_irecv, recv from any
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    buf = ember.empty(200000)
    if rank % 2 == 0:
        dist.send(ember.full((200000,), float(rank)), nxt)
        dist.recv(buf, prv)
    else:
        dist.recv(buf, prv)
        dist.send(ember.full((200000,), float(rank)), nxt)
    same(buf.numpy(), np.full(200000, float(prv), np.float32), "send/recv ring")
    r = ember.empty(3, dtype=ember.int64)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ember.full((3,), rank, dtype=ember.int64), nxt),
                                   dist.P2POp(dist.irecv, r, prv)])
    for q in reqs:
        q.wait()
    same(r.numpy(), np.full(3, prv), "batch_isend_irecv")
    big_s, big_r = ember.full((3_000_000,), float(rank)), ember.empty(3_000_000)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, big_r, prv), dist.P2POp(dist.isend, big_s, nxt)])
    [q.wait() for q in reqs]
    same(big_r.numpy()[::1000], np.full(3000, float(prv), np.float32), "batch_isend_irecv 12 MB")
    # separate isend + irecv of 12 MB each way: they progress together, no deadlock
    big_r2 = ember.empty(3_000_000)
    ws = [dist.isend(big_s, nxt), dist.irecv(big_r2, prv)]
    [q.wait() for q in ws]
    same(big_r2.numpy()[::1000], np.full(3000, float(prv), np.float32), "isend + irecv 12 MB")
    x = ember.empty(2, 2)
    if rank == 0:
        srcs = set()
        for _ in range(world - 1):
            src = dist.recv(x, tag=3)
            same(x.numpy(), np.full((2, 2), float(src), np.float32), "recv from any source")
            srcs.add(src)
        assert srcs == set(range(1, world)), srcs
    else:
        w = dist.isend(ember.full((2, 2), float(rank)), 0, tag=3)
        w.wait()
        assert w.is_completed()
    # a message whose size disagrees with the posted receive raises on the receiver
    dist.barrier()

    # async: Work and its future
    t = ember.full((100000,), float(rank))
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    w.wait()
    assert w.is_completed() and w.is_success()
    same(fut.wait()[0].numpy()[:5], np.full(5, world * (world - 1) / 2, np.float32), "async all_reduce")
    works = [dist.all_reduce(ember.full((10,), float(i)), async_op=True) for i in range(5)]
    [w.wait() for w in works]
    same(works[4].result()[0].numpy(), np.full(10, 4.0 * world, np.float32), "queued async ops keep their order")

    # object collectives
    objs = [{"rank": rank, "data": list(range(rank))}, "x" * rank]
    lst = [None] * world
    dist.all_gather_object(lst, objs)
    assert lst == [[{"rank": r, "data": list(range(r))}, "x" * r] for r in range(world)], lst
    bl = [1, "two", {3: 4}] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(bl, src=1)
    assert bl == [1, "two", {3: 4}], bl
    gl = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), gl, dst=0)
    if rank == 0:
        assert gl == [("r", r) for r in range(world)], gl
    out = [None]
    dist.scatter_object_list(out, [{"to": r} for r in range(world)] if rank == 0 else None, src=0)
    assert out == [{"to": rank}], out

    # subgroups: every rank calls new_group; members use it, others get NON_GROUP_MEMBER
    members = [1, world - 1] if world > 2 else [0, 1]
    sub = dist.new_group(members)
    if rank in members:
        assert dist.get_world_size(sub) == 2 and dist.get_rank(sub) == members.index(rank)
        t = ember.tensor([float(rank)])
        dist.all_reduce(t, group=sub)
        same(t.numpy(), np.array([float(sum(members))], np.float32), "subgroup all_reduce")
        t = ember.tensor([float(rank)])
        dist.broadcast(t, src=members[1], group=sub)  # src is a global rank
        same(t.numpy(), np.array([float(members[1])], np.float32), "subgroup broadcast")
        assert dist.get_process_group_ranks(sub) == members
    else:
        assert sub is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(sub) == -1
    dist.barrier()
    if BACKEND == "gloo":
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=20))
    dist.destroy_process_group()
    assert not dist.is_initialized()


def mismatch():
    rank, world = init(timeout=20)
    for bad in (lambda: dist.all_reduce(ember.ones(3 + rank)),
                lambda: dist.all_reduce(ember.ones(3, dtype=ember.float64 if rank else ember.float32)),
                lambda: dist.broadcast(ember.ones(3), src=rank)):
        try:
            bad()
            raise AssertionError("disagreeing arguments did not raise")
        except dist.DistBackendError as e:
            assert "disagree" in str(e), e
    t = ember.ones(4)
    dist.all_reduce(t)  # the group is still in step
    same(t.numpy(), np.full(4, float(world), np.float32), "all_reduce after a mismatch")
    # a receive posted for the wrong size fails the receiver, naming both sizes
    if rank == 0:
        dist.send(ember.ones(5), 1)
    else:
        try:
            dist.recv(ember.empty(4), 0)
            raise AssertionError("size-mismatched recv did not raise")
        except dist.DistBackendError as e:
            assert "expected 4 elements" in str(e) and "sent 5" in str(e), e
    print("ok")


def dead_peer():
    rank, world = init(timeout=20)
    if rank == 1:
        os._exit(0)  # dies without a word
    t0 = time.monotonic()
    try:
        dist.all_reduce(ember.ones(1000))
        raise AssertionError("all_reduce with a dead peer did not raise")
    except RuntimeError as e:
        assert "rank 1" in str(e), e
    assert time.monotonic() - t0 < 15
    try:  # the group stays failed, with the first error
        dist.all_reduce(ember.ones(3))
        raise AssertionError("a broken group did not raise")
    except RuntimeError as e:
        assert "earlier" in str(e), e
    print("ok")


def hung_peer():
    rank, world = init(timeout=2)
    store = dist.distributed_c10d._world.store
    if rank == 1:  # alive but never joins the collectives, until rank 0 is done
        store.wait(["hung_peer/done"], datetime.timedelta(seconds=40))
        return
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=1))
        raise AssertionError("monitored_barrier did not raise")
    except RuntimeError as e:
        assert "Ranks 1 failed to pass monitoredBarrier" in str(e), e
    t0 = time.monotonic()
    try:
        dist.all_reduce(ember.ones(10))
        raise AssertionError("all_reduce with a hung peer did not raise")
    except RuntimeError as e:
        assert "timed out" in str(e) and "rank 1" in str(e), e
    assert time.monotonic() - t0 < 5
    store.set("hung_peer/done", b"1")
    time.sleep(0.5)  # this rank hosts the store: let rank 1 read the key
    print("ok")


def close_while_running():
    """The transport closed (as destroy_process_group does past its join timeout)
    while a collective still runs on the progress thread: the collective fails at
    once saying so, and nothing frees the sockets under it (Note [transport
    ownership]; ThreadSanitizer found the old race)."""
    rank, world = init(timeout=20)
    store = dist.distributed_c10d._world.store
    if rank == 1:  # never joins the all_reduce
        store.wait(["close_while_running/done"], datetime.timedelta(seconds=40))
        return
    pg = dist.group.WORLD
    w = dist.all_reduce(ember.ones(10), async_op=True)
    time.sleep(0.3)  # the progress thread is inside the transfer
    t0 = time.monotonic()
    pg._comm.close()
    try:
        w.wait()
        raise AssertionError("a collective whose transport was closed did not fail")
    except dist.DistBackendError as e:
        assert "destroyed while this operation was running" in str(e), e
    assert time.monotonic() - t0 < 5, time.monotonic() - t0
    try:
        dist.all_reduce(ember.ones(1))
        raise AssertionError("a closed transport ran a collective")
    except RuntimeError as e:
        assert "destroyed" in str(e) or "not connected" in str(e), e
    store.set("close_while_running/done", b"1")
    time.sleep(0.5)  # this rank hosts the store: let rank 1 read the key
    print("ok")


def init_methods():
    """env:// (torchrun's variables), Slurm's variables, tcp:// and file://, with
    destroy in between."""
    rank, world = env_rank()

    def check():
        assert dist.get_rank() == rank and dist.get_world_size() == world
        t = ember.tensor([rank + 1])
        dist.all_reduce(t)
        assert t.item() == world * (world + 1) // 2
        dist.destroy_process_group()
    init()
    check()
    port = int(os.environ["MASTER_PORT"])
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK"):
        os.environ.pop(k)
    os.environ.update(SLURM_PROCID=str(rank), SLURM_NTASKS=str(world), SLURM_LOCALID=str(rank),
                      SLURM_NODELIST="127.0.0.[1-4]", MASTER_PORT=str(port + 1))
    init()
    check()
    init(init_method=f"tcp://127.0.0.1:{port + 2}", rank=rank, world_size=world)
    check()
    init(init_method="file://" + os.environ["DIST_FILE"], rank=rank, world_size=world)
    check()
    print("ok")


def stores():
    """Many clients on one TCPStore served by rank 0."""
    rank, world = env_rank()
    s = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), world, rank == 0,
                      timeout=datetime.timedelta(seconds=20))
    for i in range(20):
        s.add("counter", 1)
    s.set(f"hello/{rank}", f"from {rank}")
    s.wait([f"hello/{r}" for r in range(world)])
    assert [s.get(f"hello/{r}") for r in range(world)] == [f"from {r}".encode() for r in range(world)]
    # compare_set elects exactly one winner
    won = s.compare_set("leader", "", str(rank)) == str(rank).encode()
    s.add("winners", int(won))
    s.add("done", 1)
    while int(s.add("done", 0)) < world:
        time.sleep(0.01)
    assert int(s.get("counter")) == 20 * world
    assert int(s.get("winners")) == 1
    p = dist.PrefixStore("pre", s)
    p.set("k", "v")
    assert s.get("pre/k") == b"v"
    s.add("exit", 1)
    if rank == 0:  # the server outlives the clients
        while int(s.add("exit", 0)) < world:
            time.sleep(0.01)
    print("ok")


# ------------------------------------------------------------------- DDP

def _mlp_grads(W1, b1, W2, b2, x, t):
    """NumPy forward/backward of Linear-ReLU-Linear with mean squared error."""
    h = x @ W1.T + b1
    r = np.maximum(h, 0)
    y = r @ W2.T + b2
    dy = 2 * (y - t) / y.size
    dr = dy @ W2
    dh = dr * (h > 0)
    return [dh.T @ x, dh.sum(0), dy.T @ r, dy.sum(0)]


class _Net(ember.nn.Module):
    def __init__(self, with_unused=False):
        super().__init__()
        self.fc1 = ember.nn.Linear(5, 8)
        self.fc2 = ember.nn.Linear(8, 3)
        if with_unused:
            self.unused = ember.nn.Linear(2, 2)  # never called: no rank produces its gradient

    def forward(self, x):
        return self.fc2(ember.relu(self.fc1(x)))


def ddp():
    """20 SGD steps of DDP on 2 ranks (each its half of the global batch) give
    NumPy's single-process training on the global batch; also with tiny
    buckets, no_sync accumulation and find_unused_parameters."""
    from ember.nn.parallel import DistributedDataParallel as DDP
    rank, world = init()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 2 * world, 5))
    T = rng.standard_normal((20, 2 * world, 3))
    for variant in ("plain", "tiny_buckets", "no_sync", "unused"):
        ember.manual_seed(100 + rank)  # different initial weights: DDP must broadcast rank 0's
        net = _Net(with_unused=variant == "unused").double()
        model = DDP(net, bucket_cap_mb=1e-5 if variant == "tiny_buckets" else None,
                    find_unused_parameters=variant == "unused",
                    gradient_as_bucket_view=variant == "tiny_buckets")
        if variant == "tiny_buckets":
            assert len(model._buckets) == 4, len(model._buckets)
        params = [p.detach().numpy().copy() for p in (net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias)]
        unused_before = net.unused.weight.detach().numpy().copy() if variant == "unused" else None
        opt = ember.optim.SGD(model.parameters(), lr=0.1)
        lo, hi = rank * 2, rank * 2 + 2
        for step in range(20):
            opt.zero_grad()
            if variant == "no_sync":  # two micro-batches of one row each, the first unsynchronized
                with model.no_sync():
                    ember.nn.functional.mse_loss(model(ember.from_numpy(X[step, lo:lo + 1])),
                                                 ember.from_numpy(T[step, lo:lo + 1])).backward()
                ember.nn.functional.mse_loss(model(ember.from_numpy(X[step, lo + 1:hi])),
                                             ember.from_numpy(T[step, lo + 1:hi])).backward()
                g1 = _mlp_grads(*params, X[step, 0::2], T[step, 0::2])
                g2 = _mlp_grads(*params, X[step, 1::2], T[step, 1::2])
                grads = [a + b for a, b in zip(g1, g2)]
            else:
                out = model(ember.from_numpy(X[step, lo:hi]))
                ember.nn.functional.mse_loss(out, ember.from_numpy(T[step, lo:hi])).backward()
                grads = _mlp_grads(*params, X[step], T[step])
            opt.step()
            params = [p - 0.1 * g for p, g in zip(params, grads)]
        got = [p.detach().numpy() for p in (net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias)]
        for g, w in zip(got, params):
            same(g, w, f"DDP {variant} parameters after 20 steps", 1e-9)
        if variant == "unused":
            assert net.unused.weight.grad is None
            same(net.unused.weight.detach().numpy(), unused_before, "an unused parameter is untouched")
        sd = model.state_dict()
        assert "module.fc1.weight" in sd, list(sd)
    # without find_unused_parameters an unused parameter is an error at the next forward
    model = DDP(_Net(with_unused=True).double())
    lossf = ember.nn.functional.mse_loss
    lossf(model(ember.from_numpy(X[0, :2])), ember.from_numpy(T[0, :2])).backward()
    try:
        model(ember.from_numpy(X[0, :2]))
        raise AssertionError("DDP did not report the unfinished reduction")
    except RuntimeError as e:
        assert "find_unused_parameters=True" in str(e), e
    print("ok")


def _adam_numpy(params, grads, state, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """torch.optim.Adam's update (no amsgrad), written from its documented formula."""
    b1, b2 = betas
    out = []
    for i, (p, g) in enumerate(zip(params, grads)):
        m, v, t = state.get(i, (np.zeros_like(p), np.zeros_like(p), 0))
        g = g + weight_decay * p
        t += 1
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        out.append(p - lr * mhat / (np.sqrt(vhat) + eps))
        state[i] = (m, v, t)
    return out


def zero():
    """ZeroRedundancyOptimizer(Adam) under DDP on the ranks: each rank holds the
    Adam state of its share only (torch's greedy partition), the parameters
    after 10 steps are NumPy's Adam on the global batch, and the consolidated
    state dict is the whole optimizer's, loadable back."""
    from ember.distributed.optim import ZeroRedundancyOptimizer
    from ember.nn.parallel import DistributedDataParallel as DDP
    rank, world = init()
    rng = np.random.default_rng(1)
    X = rng.standard_normal((10, 2 * world, 5))
    T = rng.standard_normal((10, 2 * world, 3))
    for bucket_view in (False, True):
        ember.manual_seed(7)
        net = _Net().double()
        model = DDP(net)
        plist = [net.fc1.weight, net.fc1.bias, net.fc2.weight, net.fc2.bias]
        params = [p.detach().numpy().copy() for p in plist]
        opt = ZeroRedundancyOptimizer(model.parameters(), ember.optim.Adam, lr=0.01,
                                      parameters_as_bucket_view=bucket_view)
        # torch's partition: largest first, each to the rank with the fewest elements so far
        sizes, owner = [0] * world, {}
        for i in sorted(range(4), key=lambda i: -params[i].size):
            r = min(range(world), key=lambda r: sizes[r])
            owner[i] = r
            sizes[r] += params[i].size
        mine = [i for i in range(4) if owner[i] == rank]
        assert [p.numel() for p in opt.optim.param_groups[0]["params"]] == [params[i].size for i in mine], \
            (rank, [p.shape for p in opt.optim.param_groups[0]["params"]])
        state = {}
        lo, hi = rank * 2, rank * 2 + 2
        for step in range(10):
            opt.zero_grad()
            out = model(ember.from_numpy(X[step, lo:hi]))
            ember.nn.functional.mse_loss(out, ember.from_numpy(T[step, lo:hi])).backward()
            opt.step()
            params = _adam_numpy(params, _mlp_grads(*params, X[step], T[step]), state, 0.01)
        for g, w in zip(plist, params):
            same(g.detach().numpy(), w, f"ZeRO Adam (bucket view {bucket_view}) parameters after 10 steps", 1e-9)
        # only this rank's share has state
        held = {id(p) for p in opt.optim.state}
        assert held == {id(plist[i]) for i in mine}, (rank, len(held))
        try:
            opt.state_dict()
            raise AssertionError("state_dict before consolidate_state_dict did not raise")
        except RuntimeError as e:
            assert "consolidate_state_dict" in str(e), e
        opt.consolidate_state_dict(to=0)
        if rank == 0:
            sd = opt.state_dict()
            assert sorted(sd["state"]) == [0, 1, 2, 3], sorted(sd["state"])
            assert sd["param_groups"][0]["params"] == [0, 1, 2, 3]
            for i in range(4):
                m, v, t = state[i]
                same(sd["state"][i]["exp_avg"].numpy(), m, f"consolidated exp_avg of parameter {i}", 1e-9)
                same(sd["state"][i]["exp_avg_sq"].numpy(), v, f"consolidated exp_avg_sq of parameter {i}", 1e-9)
                assert float(sd["state"][i]["step"]) == t
            blob = [sd]
        else:
            blob = [None]
        # the whole state dict, loaded on every rank, gives the same next step as NumPy
        dist.broadcast_object_list(blob, src=0)
        ember.manual_seed(7)
        net2 = _Net().double()
        with ember.no_grad():
            for p, w in zip([net2.fc1.weight, net2.fc1.bias, net2.fc2.weight, net2.fc2.bias], params):
                p.copy_(ember.from_numpy(w))
        model2 = DDP(net2)
        opt2 = ZeroRedundancyOptimizer(model2.parameters(), ember.optim.Adam, lr=0.01)
        opt2.load_state_dict(blob[0])
        opt2.zero_grad()
        ember.nn.functional.mse_loss(model2(ember.from_numpy(X[0, lo:hi])), ember.from_numpy(T[0, lo:hi])).backward()
        opt2.step()
        want = _adam_numpy(params, _mlp_grads(*params, X[0], T[0]), state, 0.01)
        for g, w in zip([net2.fc1.weight, net2.fc1.bias, net2.fc2.weight, net2.fc2.bias], want):
            same(g.detach().numpy(), w, "a step after load_state_dict", 1e-9)
    print("ok")


def _bn_numpy(x, w, b, eps):
    """BatchNorm training forward over the whole batch, and the input/weight/bias
    gradients of sum(y * gy), by hand."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = [1, -1] + [1] * (x.ndim - 2)
    mean = x.mean(axes)
    var = x.var(axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return xhat * w.reshape(shape) + b.reshape(shape), xhat, mean, var


def sync_bn():
    """SyncBatchNorm on the ranks (each a slice of the batch, of different
    sizes) normalizes by the whole batch: outputs, input gradients and
    running statistics are NumPy's BatchNorm on the global batch; the weight
    and bias gradients are each rank's own share (DDP averages them)."""
    rank, world = init()
    rng = np.random.default_rng(2)
    counts = [3 + r for r in range(world)]  # unequal batches per rank
    X = rng.standard_normal((sum(counts), 4, 5, 6))
    GY = rng.standard_normal(X.shape)
    lo = sum(counts[:rank])
    hi = lo + counts[rank]
    bn = ember.nn.SyncBatchNorm(4, momentum=0.3).double()
    with ember.no_grad():
        bn.weight.copy_(ember.from_numpy(rng.standard_normal(4)))
        bn.bias.copy_(ember.from_numpy(rng.standard_normal(4)))
    w, b = bn.weight.detach().numpy().copy(), bn.bias.detach().numpy().copy()
    x = ember.from_numpy(X[lo:hi].copy()).requires_grad_()
    y = bn(x)
    (y * ember.from_numpy(GY[lo:hi])).sum().backward()
    want, xhat, mean, var = _bn_numpy(X, w, b, 1e-5)
    same(y.detach().numpy(), want[lo:hi], "SyncBatchNorm output", 1e-10)
    n = X.size // 4
    axes = (0, 2, 3)
    shape = [1, -1, 1, 1]
    gxhat = GY * w.reshape(shape)
    gx = (gxhat - gxhat.mean(axes).reshape(shape) - xhat * (gxhat * xhat).mean(axes).reshape(shape)) \
        / np.sqrt(var.reshape(shape) + 1e-5)
    same(x.grad.numpy(), gx[lo:hi], "SyncBatchNorm input gradient", 1e-10)
    same(bn.weight.grad.numpy(), (GY[lo:hi] * xhat[lo:hi]).sum(axes), "local weight gradient", 1e-10)
    same(bn.bias.grad.numpy(), GY[lo:hi].sum(axes), "local bias gradient", 1e-10)
    same(bn.running_mean.numpy(), 0.3 * mean, "running mean", 1e-12)
    same(bn.running_var.numpy(), 0.7 + 0.3 * var * n / (n - 1), "running var (unbiased)", 1e-12)
    assert int(bn.num_batches_tracked) == 1
    # eval: the running statistics, no communication
    bn.eval()
    out = bn(ember.from_numpy(X[lo:hi]))
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    same(out.detach().numpy(), (X[lo:hi] - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + 1e-5)
         * w.reshape(shape) + b.reshape(shape), "SyncBatchNorm in eval", 1e-12)
    print("ok")


def main():
    globals()[sys.argv[1]]()


if __name__ == "__main__":
    main()
