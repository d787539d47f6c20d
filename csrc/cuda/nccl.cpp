/* nccl.cpp — the "nccl" backend of ember.distributed: the Python type
 * ember._cuda._NcclComm, one NCCL communicator per process group, with the
 * method set of the CPU backends' communicators (the Python adapter in
 * python/ember/distributed/_backends.py hands it buffer descriptors
 * (data pointer, element count, ember dtype code, device) of contiguous CUDA
 * tensors).
 *
 * libnccl is loaded at run time (dlopen: ember._cuda links no NCCL, so it
 * imports where NCCL is absent); the types and enum values below are NCCL 2's
 * stable ABI (nccl.h of 2.x), declared here so the build needs no nccl.h.
 * Every operation is enqueued on ember's current stream of the
 * communicator's device and returns at once (stream-ordered, as every other
 * CUDA op of ember); all_to_all, gather, scatter and batched p2p are
 * ncclSend/ncclRecv inside ncclGroupStart/End. barrier() waits for its
 * stream under the group's timeout, polling ncclCommGetAsyncError, and
 * aborts the communicator when a peer is gone.
 *
 * Types: NCCL's own for int8/uint8/int32/int64/float16/bfloat16/float32/
 * float64; bool travels as uint8 and reduces with MAX for SUM/MAX and MIN for
 * PRODUCT/MIN (torch's mapping); int16 and complex move as raw bytes in the
 * collectives that do not reduce; complex reduces SUM/AVG as float pairs;
 * AVG is ncclAvg (integers truncate). NCCL has no bitwise reductions and no
 * receive from any source: those raise. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <type_traits>
#include <vector>

#include "runtime.h"

namespace {

/* ---------------------------------------------------------- NCCL 2's ABI */
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t; /* ncclSuccess = 0, ncclInProgress = 7 */
enum { N_INT8 = 0, N_UINT8 = 1, N_INT32 = 2, N_INT64 = 4, N_FLOAT16 = 6, N_FLOAT32 = 7,
       N_FLOAT64 = 8, N_BFLOAT16 = 9 };
enum { N_SUM = 0, N_PROD = 1, N_MAX = 2, N_MIN = 3, N_AVG = 4 };
constexpr int kInProgress = 7;

/* torch's ReduceOp values, as csrc/distributed/transport.h */
enum { R_SUM, R_AVG, R_PRODUCT, R_MIN, R_MAX, R_BAND, R_BOR, R_BXOR, R_NUM };
const char *op_names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"};
/* ember's dtype codes past float64 (csrc/ember.h) */
enum { DT_COMPLEX64 = DT_COUNT, DT_COMPLEX128 };
const char *dtype_names[] = {"torch.bool", "torch.uint8", "torch.int8", "torch.int16",
                             "torch.int32", "torch.int64", "torch.float16", "torch.bfloat16",
                             "torch.float32", "torch.float64", "torch.complex64",
                             "torch.complex128"};
const int itemsizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};

struct Nccl {
    void *lib = nullptr;
    int version = 0;
    ncclResult_t (*GetVersion)(int *);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    const char *(*GetErrorString)(ncclResult_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Reduce)(const void *, void *, size_t, int, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Send)(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
} nccl;

PyObject *dist_backend_error() {
    static PyObject *cls = nullptr;
    if (!cls) {
        PyObject *m = PyImport_ImportModule("ember._C");
        if (m) cls = PyObject_GetAttrString(m, "DistBackendError");
        Py_XDECREF(m);
        if (!cls) {
            PyErr_Clear();
            cls = PyExc_RuntimeError;
        }
    }
    return cls;
}

/* _nccl_load(path) -> NCCL's version code (e.g. 22807). */
PyObject *nccl_load(PyObject *, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path) return nullptr;
    if (nccl.lib) return PyLong_FromLong(nccl.version);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, dlerror());
    Nccl n;
    bool ok = true;
    auto get = [&](auto &fn, const char *name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
        if (!fn && ok) {
            ok = false;
            PyErr_Format(PyExc_OSError, "%s has no %s (NCCL 2.7 or newer needed)", path, name);
        }
    };
    get(n.GetVersion, "ncclGetVersion");
    get(n.GetUniqueId, "ncclGetUniqueId");
    get(n.CommInitRank, "ncclCommInitRank");
    get(n.CommDestroy, "ncclCommDestroy");
    get(n.CommAbort, "ncclCommAbort");
    get(n.CommGetAsyncError, "ncclCommGetAsyncError");
    get(n.GetErrorString, "ncclGetErrorString");
    get(n.AllReduce, "ncclAllReduce");
    get(n.Broadcast, "ncclBroadcast");
    get(n.Reduce, "ncclReduce");
    get(n.AllGather, "ncclAllGather");
    get(n.ReduceScatter, "ncclReduceScatter");
    get(n.Send, "ncclSend");
    get(n.Recv, "ncclRecv");
    get(n.GroupStart, "ncclGroupStart");
    get(n.GroupEnd, "ncclGroupEnd");
    if (!ok) {
        dlclose(h);
        return nullptr;
    }
    if (n.GetVersion(&n.version) != 0 || n.version < 20700) {
        dlclose(h);
        return PyErr_Format(PyExc_OSError, "%s: NCCL %d is too old (2.7 or newer needed)", path, n.version);
    }
    n.lib = h;
    nccl = n;
    return PyLong_FromLong(nccl.version);
}

/* _nccl_why() -> "" when the backend can run here, else the reason. */
PyObject *nccl_why(PyObject *, PyObject *) {
    if (!nccl.lib) return PyUnicode_FromString("libnccl.so.2 is not loaded (install nvidia-nccl-cu13, "
                                               "or set EMBER_NCCL_LIBRARY)");
    if (emc_device_count() <= 0) return PyUnicode_FromString("no CUDA device");
    return PyUnicode_FromString("");
}

PyObject *nccl_available(PyObject *, PyObject *) {
    return PyBool_FromLong(nccl.lib && emc_device_count() > 0);
}

PyObject *nccl_unique_id(PyObject *, PyObject *) {
    if (!nccl.lib) return PyErr_Format(PyExc_RuntimeError, "NCCL is not loaded");
    ncclUniqueId id;
    ncclResult_t r;
    Py_BEGIN_ALLOW_THREADS
    r = nccl.GetUniqueId(&id);
    Py_END_ALLOW_THREADS
    if (r != 0) return PyErr_Format(dist_backend_error(), "ncclGetUniqueId: %s", nccl.GetErrorString(r));
    return PyBytes_FromStringAndSize(id.internal, sizeof id.internal);
}

/* ------------------------------------------------------------ the type */
struct CommObject {
    PyObject_HEAD
    ncclComm_t comm;
    int rank, size, dev;
    double timeout;
    bool broken;
    char err[512];
};

struct Desc {
    void *ptr;
    long long n;
    int dtype, dev;
};

double now() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int parse_desc(CommObject *self, PyObject *o, Desc *d, const char *what) {
    unsigned long long p;
    if (!PyArg_ParseTuple(o, "KLii", &p, &d->n, &d->dtype, &d->dev)) return -1;
    d->ptr = reinterpret_cast<void *>(p);
    if (d->dtype < 0 || d->dtype > DT_COMPLEX128) {
        PyErr_Format(PyExc_TypeError, "%s: unknown dtype code %d", what, d->dtype);
        return -1;
    }
    if (d->dev != self->dev) {
        PyErr_Format(PyExc_ValueError, "%s: the tensor is on cuda:%d, the process group's NCCL "
                     "communicator on cuda:%d", what, d->dev, self->dev);
        return -1;
    }
    return 0;
}

/* NCCL type and count for moving (not reducing) d's bytes. */
void raw(const Desc &d, int *type, size_t *count) {
    switch (d.dtype) {
    case DT_BOOL: case DT_UINT8: *type = N_UINT8, *count = d.n; return;
    case DT_INT8: *type = N_INT8, *count = d.n; return;
    case DT_INT32: *type = N_INT32, *count = d.n; return;
    case DT_INT64: *type = N_INT64, *count = d.n; return;
    case DT_FLOAT16: *type = N_FLOAT16, *count = d.n; return;
    case DT_BFLOAT16: *type = N_BFLOAT16, *count = d.n; return;
    case DT_FLOAT32: *type = N_FLOAT32, *count = d.n; return;
    case DT_FLOAT64: *type = N_FLOAT64, *count = d.n; return;
    case DT_COMPLEX64: *type = N_FLOAT32, *count = 2 * d.n; return;
    case DT_COMPLEX128: *type = N_FLOAT64, *count = 2 * d.n; return;
    default: *type = N_UINT8, *count = 2 * d.n; return; /* int16: its bytes */
    }
}

/* NCCL type, count and op for reducing d with ReduceOp op; -1 with a Python
 * error (torch's types: ValueError for an op NCCL lacks, TypeError for a
 * dtype it cannot reduce). */
int reducing(const Desc &d, int op, int *type, size_t *count, int *nop) {
    if (op < 0 || op >= R_NUM) {
        PyErr_Format(PyExc_ValueError, "unknown reduce op %d", op);
        return -1;
    }
    if (op >= R_BAND) {
        PyErr_Format(PyExc_ValueError, "Cannot use ReduceOp.%s with NCCL", op_names[op]);
        return -1;
    }
    if (d.dtype == DT_INT16) {
        PyErr_Format(PyExc_TypeError, "the nccl backend cannot reduce torch.int16 tensors (NCCL has "
                     "no 16-bit integer type)");
        return -1;
    }
    bool cplx = d.dtype == DT_COMPLEX64 || d.dtype == DT_COMPLEX128;
    if (cplx && op != R_SUM && op != R_AVG) {
        PyErr_Format(PyExc_ValueError, "all_reduce does not support ReduceOp.%s on complex tensors",
                     op_names[op]);
        return -1;
    }
    raw(d, type, count);
    if (d.dtype == DT_BOOL) {
        if (op == R_AVG) {
            PyErr_SetString(PyExc_TypeError, "Cannot use ReduceOp.AVG with boolean inputs");
            return -1;
        }
        *nop = (op == R_SUM || op == R_MAX) ? N_MAX : N_MIN;
        return 0;
    }
    static const int ops[] = {N_SUM, N_AVG, N_PROD, N_MIN, N_MAX};
    *nop = ops[op];
    return 0;
}

int usable(CommObject *self) {
    if (!self->comm) {
        PyErr_SetString(dist_backend_error(), "the NCCL communicator was destroyed");
        return -1;
    }
    if (self->broken) {
        PyErr_Format(dist_backend_error(), "the process group is unusable after an earlier "
                     "communication failure: %s", self->err);
        return -1;
    }
    return 0;
}

cudaStream_t stream_of(CommObject *self) {
    return static_cast<cudaStream_t>(emc_current_stream(self->dev));
}

/* r of an enqueue: None, or DistBackendError naming the call. */
PyObject *done(CommObject *self, ncclResult_t r, const char *what) {
    if (r == 0 || r == kInProgress) Py_RETURN_NONE;
    snprintf(self->err, sizeof self->err, "rank %d: %s failed in NCCL: %s", self->rank, what,
             nccl.GetErrorString(r));
    self->broken = true;
    PyErr_SetString(dist_backend_error(), self->err);
    return nullptr;
}

/* Runs `enqueue` with the communicator's device current and the GIL released. */
template <class F>
PyObject *enqueue(CommObject *self, const char *what, F f) {
    ncclResult_t r;
    int dev_ok;
    Py_BEGIN_ALLOW_THREADS
    {
        EmcDeviceGuard g(self->dev);
        dev_ok = g.ok;
        r = dev_ok ? f(stream_of(self)) : 0;
    }
    Py_END_ALLOW_THREADS
    if (!dev_ok) return PyErr_Format(PyExc_RuntimeError, "%s: %s", what, emc_last_error());
    return done(self, r, what);
}

PyObject *comm_all_reduce(CommObject *self, PyObject *args) {
    PyObject *o;
    int op, t, nop;
    size_t n;
    Desc d;
    if (!PyArg_ParseTuple(args, "Oi", &o, &op) || parse_desc(self, o, &d, "all_reduce") < 0 ||
        reducing(d, op, &t, &n, &nop) < 0 || usable(self) < 0)
        return nullptr;
    if (!n) Py_RETURN_NONE;
    return enqueue(self, "all_reduce", [&](cudaStream_t s) {
        return nccl.AllReduce(d.ptr, d.ptr, n, t, nop, self->comm, s);
    });
}

PyObject *comm_broadcast(CommObject *self, PyObject *args) {
    PyObject *o;
    int root, t;
    size_t n;
    Desc d;
    if (!PyArg_ParseTuple(args, "Oi", &o, &root) || parse_desc(self, o, &d, "broadcast") < 0 ||
        usable(self) < 0)
        return nullptr;
    raw(d, &t, &n);
    if (!n) Py_RETURN_NONE;
    return enqueue(self, "broadcast", [&](cudaStream_t s) {
        return nccl.Broadcast(d.ptr, d.ptr, n, t, root, self->comm, s);
    });
}

PyObject *comm_reduce(CommObject *self, PyObject *args) {
    PyObject *o;
    int root, op, t, nop;
    size_t n;
    Desc d;
    if (!PyArg_ParseTuple(args, "Oii", &o, &root, &op) || parse_desc(self, o, &d, "reduce") < 0 ||
        reducing(d, op, &t, &n, &nop) < 0 || usable(self) < 0)
        return nullptr;
    if (!n) Py_RETURN_NONE;
    /* the non-roots' input stays as it was: NCCL writes only the root's recvbuff */
    return enqueue(self, "reduce", [&](cudaStream_t s) {
        return nccl.Reduce(d.ptr, d.ptr, n, t, nop, root, self->comm, s);
    });
}

int check_big(const Desc &big, const Desc &small, int size, const char *what) {
    if (big.dtype != small.dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: output and input dtypes differ (%s and %s)", what,
                     dtype_names[big.dtype], dtype_names[small.dtype]);
        return -1;
    }
    if (big.n != small.n * size) {
        PyErr_Format(PyExc_RuntimeError, "%s: output has %lld elements, expected %lld (%lld per rank)",
                     what, big.n, small.n * size, small.n);
        return -1;
    }
    return 0;
}

PyObject *comm_all_gather(CommObject *self, PyObject *args) {
    PyObject *oo, *io;
    Desc out, in;
    int t;
    size_t n;
    if (!PyArg_ParseTuple(args, "OO", &oo, &io) || parse_desc(self, oo, &out, "all_gather") < 0 ||
        parse_desc(self, io, &in, "all_gather") < 0 || check_big(out, in, self->size, "all_gather") < 0 ||
        usable(self) < 0)
        return nullptr;
    raw(in, &t, &n);
    if (!n) Py_RETURN_NONE;
    return enqueue(self, "all_gather", [&](cudaStream_t s) {
        return nccl.AllGather(in.ptr, out.ptr, n, t, self->comm, s);
    });
}

PyObject *comm_reduce_scatter(CommObject *self, PyObject *args) {
    PyObject *oo, *io;
    Desc out, in;
    int op, t, nop;
    size_t n;
    if (!PyArg_ParseTuple(args, "OOi", &oo, &io, &op) || parse_desc(self, oo, &out, "reduce_scatter") < 0 ||
        parse_desc(self, io, &in, "reduce_scatter") < 0 ||
        check_big(in, out, self->size, "reduce_scatter") < 0 || reducing(out, op, &t, &n, &nop) < 0 ||
        usable(self) < 0)
        return nullptr;
    if (!n) Py_RETURN_NONE;
    return enqueue(self, "reduce_scatter", [&](cudaStream_t s) {
        return nccl.ReduceScatter(in.ptr, out.ptr, n, t, nop, self->comm, s);
    });
}

/* One grouped set of sends and receives: (is_send, ptr, count, type, peer). */
struct P2p {
    bool send;
    void *ptr;
    size_t count;
    int type, peer;
};

ncclResult_t grouped(CommObject *self, const std::vector<P2p> &ops, cudaStream_t s) {
    ncclResult_t r = nccl.GroupStart();
    for (size_t i = 0; r == 0 && i < ops.size(); i++) {
        const P2p &p = ops[i];
        if (!p.count) continue;
        r = p.send ? nccl.Send(p.ptr, p.count, p.type, p.peer, self->comm, s)
                   : nccl.Recv(p.ptr, p.count, p.type, p.peer, self->comm, s);
    }
    ncclResult_t e = nccl.GroupEnd();
    return r ? r : e;
}

/* gather (to the root) and scatter (from it), as grouped sends and receives;
 * the root's own block is a device copy on the same stream. */
PyObject *root_call(CommObject *self, PyObject *args, bool gather) {
    PyObject *so, *bo;
    int root, t;
    size_t n;
    Desc small, big{};
    const char *what = gather ? "gather" : "scatter";
    if (!PyArg_ParseTuple(args, "OOi", &so, &bo, &root) || parse_desc(self, so, &small, what) < 0)
        return nullptr;
    if (root < 0 || root >= self->size)
        return PyErr_Format(PyExc_ValueError, "invalid root rank %d for a group of %d", root, self->size);
    if (self->rank == root) {
        if (bo == Py_None) return PyErr_Format(PyExc_ValueError, "%s: the root rank needs its list of tensors", what);
        if (parse_desc(self, bo, &big, what) < 0 || check_big(big, small, self->size, what) < 0) return nullptr;
    }
    if (usable(self) < 0) return nullptr;
    raw(small, &t, &n);
    if (!n) Py_RETURN_NONE;
    size_t bytes = small.n * itemsizes[small.dtype];
    std::vector<P2p> ops;
    if (self->rank != root) ops.push_back({gather, small.ptr, n, t, root});
    else
        for (int j = 0; j < self->size; j++)
            if (j != root) ops.push_back({!gather, static_cast<char *>(big.ptr) + j * bytes, n, t, j});
    return enqueue(self, what, [&](cudaStream_t s) -> ncclResult_t {
        if (self->rank == root) {
            char *mine = static_cast<char *>(big.ptr) + root * bytes;
            cudaError_t e = gather ? cudaMemcpyAsync(mine, small.ptr, bytes, cudaMemcpyDeviceToDevice, s)
                                   : cudaMemcpyAsync(small.ptr, mine, bytes, cudaMemcpyDeviceToDevice, s);
            if (e != cudaSuccess) return 1; /* ncclUnhandledCudaError */
        }
        return grouped(self, ops, s);
    });
}

PyObject *comm_gather(CommObject *self, PyObject *args) { return root_call(self, args, true); }
PyObject *comm_scatter(CommObject *self, PyObject *args) { return root_call(self, args, false); }

int counts(PyObject *o, int n, std::vector<long long> &out, const char *what) {
    PyObject *f = PySequence_Fast(o, what);
    if (!f) return -1;
    int rc = 0;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d counts", what, n);
        rc = -1;
    }
    for (int i = 0; i < n && rc == 0; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (v == -1 && PyErr_Occurred()) rc = -1;
        else if (v < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative count %lld", what, v);
            rc = -1;
        } else out.push_back(v);
    }
    Py_DECREF(f);
    return rc;
}

/* all_to_all(out, in, send_counts, recv_counts): one grouped set of sends and
 * receives (NCCL cannot check that the sizes agree: a mismatch is the
 * caller's error, as in torch's NCCL backend). */
PyObject *comm_all_to_all(CommObject *self, PyObject *args) {
    PyObject *oo, *io, *sco, *rco;
    Desc out, in;
    std::vector<long long> sc, rc;
    if (!PyArg_ParseTuple(args, "OOOO", &oo, &io, &sco, &rco) || parse_desc(self, oo, &out, "all_to_all") < 0 ||
        parse_desc(self, io, &in, "all_to_all") < 0 || counts(sco, self->size, sc, "all_to_all send counts") < 0 ||
        counts(rco, self->size, rc, "all_to_all receive counts") < 0)
        return nullptr;
    if (out.dtype != in.dtype)
        return PyErr_Format(PyExc_RuntimeError, "all_to_all: output and input dtypes differ (%s and %s)",
                            dtype_names[out.dtype], dtype_names[in.dtype]);
    long long ts = 0, tr = 0;
    for (int j = 0; j < self->size; j++) ts += sc[j], tr += rc[j];
    if (ts != in.n || tr != out.n)
        return PyErr_Format(PyExc_RuntimeError, "all_to_all: the split sizes add up to %lld sent and "
                            "%lld received elements, but the tensors have %lld and %lld", ts, tr, in.n, out.n);
    if (usable(self) < 0) return nullptr;
    int t;
    size_t per_elem;
    Desc one = in;
    one.n = 1;
    raw(one, &t, &per_elem); /* NCCL elements per ember element */
    size_t isz = itemsizes[in.dtype];
    std::vector<P2p> ops;
    long long so = 0, ro = 0;
    for (int j = 0; j < self->size; j++) {
        ops.push_back({true, static_cast<char *>(in.ptr) + so * isz, size_t(sc[j]) * per_elem, t, j});
        ops.push_back({false, static_cast<char *>(out.ptr) + ro * isz, size_t(rc[j]) * per_elem, t, j});
        so += sc[j], ro += rc[j];
    }
    return enqueue(self, "all_to_all", [&](cudaStream_t s) { return grouped(self, ops, s); });
}

/* p2p([(is_send, desc, peer, tag), ...]): one group (NCCL has no tags: the
 * messages between two ranks match in order). */
PyObject *comm_p2p(CommObject *self, PyObject *list) {
    PyObject *f = PySequence_Fast(list, "p2p: expected a list of operations");
    if (!f) return nullptr;
    std::vector<P2p> ops;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(f);
    for (Py_ssize_t i = 0; i < m; i++) {
        int is_send, peer;
        long long tag;
        PyObject *dob;
        Desc d;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(f, i), "pOiL", &is_send, &dob, &peer, &tag) ||
            parse_desc(self, dob, &d, is_send ? "send" : "recv") < 0) {
            Py_DECREF(f);
            return nullptr;
        }
        if (peer < 0 || peer >= self->size || peer == self->rank) {
            Py_DECREF(f);
            return PyErr_Format(PyExc_ValueError, "%s: invalid peer rank %d (this is rank %d of %d)",
                                is_send ? "send" : "recv", peer, self->rank, self->size);
        }
        int t;
        size_t n;
        raw(d, &t, &n);
        ops.push_back({bool(is_send), d.ptr, n, t, peer});
    }
    Py_DECREF(f);
    if (usable(self) < 0) return nullptr;
    return enqueue(self, "send/recv", [&](cudaStream_t s) { return grouped(self, ops, s); });
}

PyObject *comm_recv_any(CommObject *, PyObject *) {
    return PyErr_Format(PyExc_RuntimeError, "the nccl backend cannot receive from any source "
                        "(NCCL has no wildcard receive): give src=");
}

/* barrier(): an all_reduce of one int on the current stream, then a wait for
 * that stream under the timeout; a peer that never arrives aborts the
 * communicator (the only way to take back an NCCL operation). */
PyObject *comm_barrier(CommObject *self, PyObject *) {
    if (usable(self) < 0) return nullptr;
    int code = 0; /* 0 ok, 1 NCCL error, 2 CUDA error, 3 timeout, 4 no memory */
    ncclResult_t r = 0;
    cudaError_t ce = cudaSuccess;
    Py_BEGIN_ALLOW_THREADS
    {
        EmcDeviceGuard g(self->dev);
        cudaStream_t s = stream_of(self);
        EmcScratch scratch(self->dev, s, "barrier");
        void *buf = g.ok ? scratch.get(sizeof(int)) : nullptr;
        if (!buf) code = 4;
        else if ((ce = cudaMemsetAsync(buf, 0, sizeof(int), s)) != cudaSuccess) code = 2;
        else if ((r = nccl.AllReduce(buf, buf, 1, N_INT32, N_SUM, self->comm, s)) != 0 && r != kInProgress) code = 1;
        double deadline = now() + self->timeout;
        while (code == 0) {
            ce = cudaStreamQuery(s);
            if (ce == cudaSuccess) break;
            if (ce != cudaErrorNotReady) {
                code = 2;
                break;
            }
            ncclResult_t a = 0;
            if (nccl.CommGetAsyncError(self->comm, &a) == 0 && a != 0 && a != kInProgress) {
                r = a, code = 1;
                break;
            }
            if (now() > deadline) {
                code = 3;
                break;
            }
            timespec ts{0, 200000};
            nanosleep(&ts, nullptr);
        }
    }
    Py_END_ALLOW_THREADS
    if (code == 0) Py_RETURN_NONE;
    if (code == 4) return PyErr_Format(PyExc_RuntimeError, "barrier: %s", emc_last_error());
    if (code == 1) snprintf(self->err, sizeof self->err, "rank %d: barrier failed in NCCL: %s", self->rank,
                            nccl.GetErrorString(r));
    else if (code == 2) snprintf(self->err, sizeof self->err, "rank %d: barrier: %s", self->rank,
                                 cudaGetErrorString(ce));
    else snprintf(self->err, sizeof self->err, "rank %d: barrier timed out after %.1f s (a peer is "
                  "gone, or the ranks called different collectives); the NCCL communicator was "
                  "aborted", self->rank, self->timeout);
    if (code != 2) {
        Py_BEGIN_ALLOW_THREADS
        nccl.CommAbort(self->comm);
        Py_END_ALLOW_THREADS
        self->comm = nullptr;
    }
    self->broken = true;
    PyErr_SetString(dist_backend_error(), self->err);
    return nullptr;
}

void release(CommObject *self) {
    if (!self->comm) return;
    ncclComm_t c = self->comm;
    self->comm = nullptr;
    if (self->broken) nccl.CommAbort(c);
    else nccl.CommDestroy(c);
}

PyObject *comm_close(CommObject *self, PyObject *) {
    Py_BEGIN_ALLOW_THREADS
    release(self);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

void comm_dealloc(CommObject *self) {
    release(self);
    Py_TYPE(self)->tp_free(reinterpret_cast<PyObject *>(self));
}

/* _NcclComm(rank, size, unique_id, device, timeout): joins the communicator
 * rank 0's id names (every rank blocks in ncclCommInitRank until all join). */
int comm_init(CommObject *self, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"rank", "size", "unique_id", "device", "timeout", nullptr};
    int rank, size, dev;
    const char *id;
    Py_ssize_t idlen;
    double timeout = 1800.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iiy#i|d", const_cast<char **>(kwlist), &rank, &size,
                                     &id, &idlen, &dev, &timeout))
        return -1;
    if (!nccl.lib) {
        PyErr_SetString(PyExc_RuntimeError, "NCCL is not loaded (_nccl_load first)");
        return -1;
    }
    if (size < 1 || rank < 0 || rank >= size) {
        PyErr_Format(PyExc_ValueError, "invalid rank %d for world size %d", rank, size);
        return -1;
    }
    if (idlen != (Py_ssize_t)sizeof(ncclUniqueId)) {
        PyErr_Format(PyExc_ValueError, "an NCCL unique id has %zu bytes, got %zd", sizeof(ncclUniqueId), idlen);
        return -1;
    }
    if (self->comm) {
        PyErr_SetString(PyExc_RuntimeError, "_NcclComm is already initialized");
        return -1;
    }
    ncclUniqueId uid;
    memcpy(uid.internal, id, sizeof uid.internal);
    ncclResult_t r = 0;
    int dev_ok;
    Py_BEGIN_ALLOW_THREADS
    {
        EmcDeviceGuard g(dev);
        dev_ok = g.ok;
        if (dev_ok) r = nccl.CommInitRank(&self->comm, size, uid, rank);
    }
    Py_END_ALLOW_THREADS
    if (!dev_ok) {
        PyErr_Format(PyExc_RuntimeError, "_NcclComm: %s", emc_last_error());
        return -1;
    }
    if (r != 0) {
        self->comm = nullptr;
        PyErr_Format(dist_backend_error(), "rank %d: ncclCommInitRank failed: %s", rank, nccl.GetErrorString(r));
        return -1;
    }
    self->rank = rank, self->size = size, self->dev = dev;
    self->timeout = timeout > 0 ? timeout : 1800.0;
    return 0;
}

PyObject *comm_new(PyTypeObject *type, PyObject *, PyObject *) {
    CommObject *self = reinterpret_cast<CommObject *>(type->tp_alloc(type, 0));
    if (self) self->comm = nullptr;
    return reinterpret_cast<PyObject *>(self);
}

PyObject *get_rank(CommObject *self, void *) { return PyLong_FromLong(self->rank); }
PyObject *get_size(CommObject *self, void *) { return PyLong_FromLong(self->size); }
PyObject *get_device(CommObject *self, void *) { return PyLong_FromLong(self->dev); }

#define M(name, fn, flags, doc) {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(fn)), flags, doc}
PyMethodDef comm_methods[] = {
    M("close", comm_close, METH_NOARGS, "Destroy the communicator (abort it when broken)."),
    M("all_reduce", comm_all_reduce, METH_VARARGS, "all_reduce(desc, op), in place."),
    M("broadcast", comm_broadcast, METH_VARARGS, "broadcast(desc, root)."),
    M("reduce", comm_reduce, METH_VARARGS, "reduce(desc, root, op)."),
    M("all_gather", comm_all_gather, METH_VARARGS, "all_gather(out, input)."),
    M("reduce_scatter", comm_reduce_scatter, METH_VARARGS, "reduce_scatter(out, input, op)."),
    M("gather", comm_gather, METH_VARARGS, "gather(input, out or None, root)."),
    M("scatter", comm_scatter, METH_VARARGS, "scatter(out, input or None, root)."),
    M("all_to_all", comm_all_to_all, METH_VARARGS, "all_to_all(out, input, send_counts, recv_counts)."),
    M("p2p", comm_p2p, METH_O, "p2p([(is_send, desc, peer, tag), ...])."),
    M("recv_any", comm_recv_any, METH_VARARGS, "Not in NCCL: raises."),
    M("barrier", comm_barrier, METH_NOARGS, "Wait for every rank (under the timeout)."),
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef comm_getset[] = {
    {"rank", reinterpret_cast<getter>(get_rank), nullptr, "This rank.", nullptr},
    {"size", reinterpret_cast<getter>(get_size), nullptr, "The communicator's size.", nullptr},
    {"device", reinterpret_cast<getter>(get_device), nullptr, "The CUDA device it runs on.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject CommType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyMethodDef module_fns[] = {
    {"_nccl_load", nccl_load, METH_O, "_nccl_load(path) -> NCCL's version code."},
    {"_nccl_available", nccl_available, METH_NOARGS, "NCCL is loaded and a CUDA device exists."},
    {"_nccl_why", nccl_why, METH_NOARGS, "Why the nccl backend cannot run here ('' when it can)."},
    {"_nccl_unique_id", nccl_unique_id, METH_NOARGS, "A new ncclUniqueId (bytes)."},
    {nullptr, nullptr, 0, nullptr},
};

} // namespace

/* Adds _NcclComm and the _nccl_* functions to ember._cuda (module.cpp). */
int emc_nccl_init_module(PyObject *m) {
    CommType.tp_name = "ember._cuda._NcclComm";
    CommType.tp_basicsize = sizeof(CommObject);
    CommType.tp_flags = Py_TPFLAGS_DEFAULT;
    CommType.tp_doc = "_NcclComm(rank, size, unique_id, device, timeout=1800): an NCCL communicator.";
    CommType.tp_new = comm_new;
    CommType.tp_init = reinterpret_cast<initproc>(comm_init);
    CommType.tp_dealloc = reinterpret_cast<destructor>(comm_dealloc);
    CommType.tp_methods = comm_methods;
    CommType.tp_getset = comm_getset;
    if (PyType_Ready(&CommType) < 0) return -1;
    Py_INCREF(&CommType);
    if (PyModule_AddObject(m, "_NcclComm", reinterpret_cast<PyObject *>(&CommType)) < 0) {
        Py_DECREF(&CommType);
        return -1;
    }
    return PyModule_AddFunctions(m, module_fns);
}
