/* mpi.c — the "mpi" backend: the Python type _C._MpiComm, one MPI
 * communicator with the method set of _C._GlooComm (all_reduce, broadcast,
 * reduce, all_gather, reduce_scatter, gather, scatter, all_to_all, p2p,
 * recv_any, barrier), so the Python front runs either unchanged.
 *
 * Note [MPI ABI]: libmpi is loaded at run time (dlopen; ember links no MPI),
 * so the handles and constants below are those of one binary interface:
 * MPICH's (libmpi.so.12: MPICH >= 3.1, Intel MPI, MVAPICH, Cray MPICH; the
 * `mpich` PyPI wheel), where every handle is an int with a fixed value.
 * Open MPI's interface (pointers to its global objects) is refused by name
 * when loaded (the library exports ompi_mpi_comm_world). The values are
 * facts of that ABI, listed once here.
 *
 * Threads: MPI_Init_thread asks for MPI_THREAD_MULTIPLE (each process group
 * runs its operations on its own progress thread); a library that gives only
 * SERIALIZED gets every MPI call under one process-wide mutex. Each operation
 * is a nonblocking MPI call polled with MPI_Testall under the group's timeout
 * with the GIL released, so a lost peer raises DistBackendError instead of
 * hanging; a timed-out request cannot be cancelled, so its tensors are kept
 * alive (leaked) and the group is marked unusable.
 *
 * Types: MPI's own types for integers, float32/64 and complex; float16 and
 * bfloat16 travel as MPI_UINT16_T and reduce with user ops that call the
 * gloo backend's combine kernels (reduce_kernels.c), so they round as gloo
 * does; bool is MPI_C_BOOL with the logical ops (SUM/MAX/BOR: or,
 * PRODUCT/MIN/BAND: and, BXOR: xor). AVG is SUM, then a divide (integers
 * truncate, as the gloo backend's). Complex reduces SUM/AVG only. MIN/MAX of
 * float NaNs follow the MPI library (gloo propagates them). Counts are C ints
 * in MPI: a call moving more than 2**31-1 elements per rank raises.
 *
 * As in the gloo transport, a small header reduction precedes each
 * collective (Note [MPI header]): ranks whose calls disagree all raise. */
#include "../ember.h"
#include "transport.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------ the MPICH ABI */
typedef int MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Group, MPI_Errhandler;
typedef struct { int count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR; } MPI_Status;
typedef void MPI_User_function(void *in, void *inout, int *len, MPI_Datatype *type);
#define MPI_SUCCESS 0
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)
#define MPI_COMM_NULL ((MPI_Comm)0x04000000)
#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x54000001)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_STATUS_IGNORE ((MPI_Status *)1)
#define MPI_TAG_UB 0x64400001
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3
#define MPI_MAX_ERROR_STRING 512
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_PENDING 18
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
enum {
    T_C_BOOL = 0x4c00013f, T_INT8 = 0x4c000137, T_INT16 = 0x4c000238, T_INT32 = 0x4c000439,
    T_INT64 = 0x4c00083a, T_UINT8 = 0x4c00013b, T_UINT16 = 0x4c00023c, T_FLOAT = 0x4c00040a,
    T_DOUBLE = 0x4c00080b, T_CFLOAT = 0x4c000840, T_CDOUBLE = 0x4c001041, T_INT = 0x4c000405,
};
enum {
    O_MAX = 0x58000001, O_MIN, O_SUM, O_PROD, O_LAND, O_BAND, O_LOR, O_BOR, O_LXOR, O_BXOR,
};

/* The functions ember calls, resolved by name from the loaded library. */
#define MPI_FUNCS(X)                                                                           \
    X(MPI_Init_thread, int, (int *, char ***, int, int *))                                     \
    X(MPI_Initialized, int, (int *))                                                           \
    X(MPI_Query_thread, int, (int *))                                                          \
    X(MPI_Finalized, int, (int *))                                                             \
    X(MPI_Finalize, int, (void))                                                               \
    X(MPI_Get_library_version, int, (char *, int *))                                           \
    X(MPI_Error_string, int, (int, char *, int *))                                             \
    X(MPI_Error_class, int, (int, int *))                                                      \
    X(MPI_Comm_set_errhandler, int, (MPI_Comm, MPI_Errhandler))                                \
    X(MPI_Comm_dup, int, (MPI_Comm, MPI_Comm *))                                               \
    X(MPI_Comm_free, int, (MPI_Comm *))                                                        \
    X(MPI_Comm_rank, int, (MPI_Comm, int *))                                                   \
    X(MPI_Comm_size, int, (MPI_Comm, int *))                                                   \
    X(MPI_Comm_group, int, (MPI_Comm, MPI_Group *))                                            \
    X(MPI_Group_incl, int, (MPI_Group, int, const int *, MPI_Group *))                         \
    X(MPI_Group_free, int, (MPI_Group *))                                                      \
    X(MPI_Comm_create_group, int, (MPI_Comm, MPI_Group, int, MPI_Comm *))                      \
    X(MPI_Comm_get_attr, int, (MPI_Comm, int, void *, int *))                                  \
    X(MPI_Op_create, int, (MPI_User_function *, int, MPI_Op *))                                \
    X(MPI_Testall, int, (int, MPI_Request *, int *, MPI_Status *))                             \
    X(MPI_Get_count, int, (const MPI_Status *, MPI_Datatype, int *))                           \
    X(MPI_Isend, int, (const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))    \
    X(MPI_Irecv, int, (void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))          \
    X(MPI_Ibarrier, int, (MPI_Comm, MPI_Request *))                                            \
    X(MPI_Ibcast, int, (void *, int, MPI_Datatype, int, MPI_Comm, MPI_Request *))              \
    X(MPI_Iallreduce, int,                                                                     \
      (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *))              \
    X(MPI_Ireduce, int,                                                                        \
      (const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm, MPI_Request *))         \
    X(MPI_Iallgather, int,                                                                     \
      (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *))   \
    X(MPI_Ireduce_scatter_block, int,                                                          \
      (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request *))              \
    X(MPI_Igather, int,                                                                        \
      (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,              \
       MPI_Request *))                                                                         \
    X(MPI_Iscatter, int,                                                                       \
      (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm,              \
       MPI_Request *))                                                                         \
    X(MPI_Ialltoall, int,                                                                      \
      (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm, MPI_Request *))   \
    X(MPI_Ialltoallv, int,                                                                     \
      (const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *, \
       MPI_Datatype, MPI_Comm, MPI_Request *))

#define DECLARE(name, ret, args) static ret(*p_##name) args;
MPI_FUNCS(DECLARE)
#undef DECLARE

static void *lib;
static char lib_version[256];
static int thread_level = -1;  /* what MPI_Init_thread gave; -1 before it */
static bool we_initialized;    /* ember called MPI_Init_thread (so it finalizes) */
/* Requests left posted by a timeout (MPI cannot cancel a collective): they
 * may still finish once the late rank arrives; MPI_Finalize waits for them. */
static MPI_Request *abandoned;
static int n_abandoned;
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Op half_ops[2][EM_DIST_NUM_OPS]; /* [bf16?][op]; 0 where not made */
static PyObject *DistError, *DistBackendError;

/* Every MPI call goes through MPI(...): under the mutex when the library is
 * only SERIALIZED. */
#define MPI(call)                                                                              \
    ({                                                                                         \
        bool lk_ = thread_level < MPI_THREAD_MULTIPLE;                                         \
        if (lk_) pthread_mutex_lock(&serial_lock);                                             \
        int r_ = (call);                                                                       \
        if (lk_) pthread_mutex_unlock(&serial_lock);                                           \
        r_;                                                                                    \
    })

/* _mpi_load(path) -> the library's version string. Loads and resolves once. */
static PyObject *mpi_load(PyObject *m, PyObject *arg) {
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path) return NULL;
    if (lib) return PyUnicode_FromString(lib_version);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL); /* GLOBAL: MPICH's plugins resolve against it */
    if (!h) {
        PyErr_Format(PyExc_OSError, "cannot load the MPI library %s: %s", path, dlerror());
        return NULL;
    }
    if (dlsym(h, "ompi_mpi_comm_world")) {
        dlclose(h);
        PyErr_Format(PyExc_OSError,
                     "%s is Open MPI, whose binary interface ember's mpi backend does not speak "
                     "(it uses MPICH's: MPICH, Intel MPI, MVAPICH; e.g. `pip install mpich`)", path);
        return NULL;
    }
#define RESOLVE(name, ret, args)                                                               \
    if (!(p_##name = (ret(*) args)dlsym(h, #name))) {                                          \
        dlclose(h);                                                                            \
        PyErr_Format(PyExc_OSError, "the MPI library %s has no %s (MPI 3.0 or newer needed)", \
                     path, #name);                                                             \
        return NULL;                                                                           \
    }
    MPI_FUNCS(RESOLVE)
#undef RESOLVE
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (p_MPI_Get_library_version(v, &len) != MPI_SUCCESS) len = 0;
    v[len < (int)sizeof v ? len : (int)sizeof v - 1] = 0;
    char *nl = strchr(v, '\n');
    if (nl) *nl = 0;
    snprintf(lib_version, sizeof lib_version, "%.255s", v);
    lib = h;
    return PyUnicode_FromString(lib_version);
}

/* ---------------------------------------------------- half-type reductions */
#define HALF_OP(BF, DT, OP)                                                                    \
    static void half_##BF##_##OP(void *in, void *io, int *len, MPI_Datatype *t) {              \
        (void)t;                                                                               \
        em_dist_combine(io, in, (size_t)*len, DT, OP);                                         \
    }
HALF_OP(0, EM_FLOAT16, EM_DIST_SUM)
HALF_OP(0, EM_FLOAT16, EM_DIST_PRODUCT)
HALF_OP(0, EM_FLOAT16, EM_DIST_MIN)
HALF_OP(0, EM_FLOAT16, EM_DIST_MAX)
HALF_OP(1, EM_BFLOAT16, EM_DIST_SUM)
HALF_OP(1, EM_BFLOAT16, EM_DIST_PRODUCT)
HALF_OP(1, EM_BFLOAT16, EM_DIST_MIN)
HALF_OP(1, EM_BFLOAT16, EM_DIST_MAX)

static int make_half_ops(void) {
    MPI_User_function *fns[2][4] = {
        {half_0_EM_DIST_SUM, half_0_EM_DIST_PRODUCT, half_0_EM_DIST_MIN, half_0_EM_DIST_MAX},
        {half_1_EM_DIST_SUM, half_1_EM_DIST_PRODUCT, half_1_EM_DIST_MIN, half_1_EM_DIST_MAX}};
    int ops[4] = {EM_DIST_SUM, EM_DIST_PRODUCT, EM_DIST_MIN, EM_DIST_MAX};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++)
            if (p_MPI_Op_create(fns[b][k], 1, &half_ops[b][ops[k]]) != MPI_SUCCESS) return -1;
    for (int b = 0; b < 2; b++) half_ops[b][EM_DIST_AVG] = half_ops[b][EM_DIST_SUM];
    return 0;
}

/* ------------------------------------------------------------ the type */
typedef struct {
    PyObject_HEAD
    MPI_Comm comm;
    int rank, size;
    int tag_ub;
    double timeout;
    bool broken;
    int busy;
    char err[512];
} MpiComm;

static PyTypeObject MpiCommType;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail_mpi(MpiComm *c, int code, const char *what) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (p_MPI_Error_string(code, s, &len) != MPI_SUCCESS) len = 0;
    s[len < (int)sizeof s ? len : (int)sizeof s - 1] = 0;
    snprintf(c->err, sizeof c->err, "rank %d: %s failed in MPI: %s", c->rank, what, len ? s : "?");
    return -1;
}

/* Poll n requests until all are done: 0; -1 on an MPI error; -2 on the
 * timeout (the requests stay posted: the caller keeps their buffers). */
static int wait_all(MpiComm *c, int n, MPI_Request *req, MPI_Status *st, const char *what) {
    double start = now(), deadline = start + c->timeout;
    long sleep_ns = 20000;
    for (;;) {
        int flag = 0, rc = MPI(p_MPI_Testall(n, req, &flag, st));
        if (rc != MPI_SUCCESS) {
            for (int i = 0; i < n && st != MPI_STATUS_IGNORE; i++)
                if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
                    rc = st[i].MPI_ERROR;
                    break;
                }
            c->broken = true;
            return fail_mpi(c, rc, what);
        }
        if (flag) return 0;
        if (now() > deadline) {
            snprintf(c->err, sizeof c->err, "rank %d: %s timed out after %.1f s (a peer is gone, "
                     "or the ranks called different collectives)", c->rank, what, c->timeout);
            c->broken = true;
            pthread_mutex_lock(&serial_lock);
            MPI_Request *a = realloc(abandoned, sizeof(MPI_Request) * (n_abandoned + n));
            if (a) {
                memcpy(a + n_abandoned, req, sizeof(MPI_Request) * n);
                abandoned = a, n_abandoned += n;
            }
            pthread_mutex_unlock(&serial_lock);
            return -2;
        }
        /* MPI progresses only inside its calls: poll, yielding the core, for
         * the first 2 ms (peers' threads are still waking up to join), then
         * sleep, backing off to 1 ms */
        if (now() - start < 2e-3) {
            sched_yield();
            continue;
        }
        nanosleep(&(struct timespec){0, sleep_ns}, NULL);
        sleep_ns = sleep_ns * 2 > 1000000 ? 1000000 : sleep_ns * 2;
    }
}

/* Start one nonblocking call and wait for it. */
static int run1(MpiComm *c, int start_rc, MPI_Request *r, const char *what) {
    if (start_rc != MPI_SUCCESS) return fail_mpi(c, start_rc, what);
    return wait_all(c, 1, r, MPI_STATUS_IGNORE, what);
}

typedef struct {
    char *data;
    size_t n;
    int dtype;
    PyObject *obj;
} Buf;

/* The MPI type and the element count in it of n elements of dtype. */
static MPI_Datatype mpi_type(int dtype) {
    switch ((EmDType)dtype) {
    case EM_BOOL: return T_C_BOOL;
    case EM_UINT8: return T_UINT8;
    case EM_INT8: return T_INT8;
    case EM_INT16: return T_INT16;
    case EM_INT32: return T_INT32;
    case EM_INT64: return T_INT64;
    case EM_FLOAT16: case EM_BFLOAT16: return T_UINT16;
    case EM_FLOAT32: return T_FLOAT;
    case EM_FLOAT64: return T_DOUBLE;
    case EM_COMPLEX64: return T_CFLOAT;
    case EM_COMPLEX128: return T_CDOUBLE;
    default: return 0;
    }
}

/* The MPI op for (dtype, ReduceOp), or 0 with a Python error set. */
static MPI_Op mpi_op(int dtype, int op, const char *what) {
    if (em_dist_check_op(dtype, op, what) < 0) return 0;
    if (em_is_complex((EmDType)dtype)) return O_SUM; /* SUM and AVG's sum, part by part */
    if (dtype == EM_BOOL) {
        if (op == EM_DIST_SUM || op == EM_DIST_MAX || op == EM_DIST_BOR) return O_LOR;
        if (op == EM_DIST_BXOR) return O_LXOR;
        return O_LAND;
    }
    if (dtype == EM_FLOAT16 || dtype == EM_BFLOAT16) return half_ops[dtype == EM_BFLOAT16][op];
    static const MPI_Op ops[] = {O_SUM, O_SUM, O_PROD, O_MIN, O_MAX, O_BAND, O_BOR, O_BXOR};
    return ops[op];
}

static int get_buf(PyObject *o, Buf *b, const char *what) {
    if (!em_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    EmTensor *t = (EmTensor *)o;
    if (!em_is_cpu(t)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the mpi backend takes CPU tensors; this one is on a CUDA device (use the "
                     "nccl backend)", what);
        return -1;
    }
    if (!em_is_contiguous(t)) {
        PyErr_Format(PyExc_RuntimeError, "%s: the transport takes contiguous tensors", what);
        return -1;
    }
    if (!mpi_type(t->dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: the mpi backend has no MPI type for %s", what,
                     em_dtype_name((EmDType)t->dtype));
        return -1;
    }
    if ((size_t)t->numel > INT_MAX) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: %lld elements exceed MPI's count limit of %d elements per call", what,
                     (long long)t->numel, INT_MAX);
        return -1;
    }
    b->data = em_data(t);
    b->n = (size_t)t->numel;
    b->dtype = t->dtype;
    b->obj = o;
    return 0;
}

static int begin(MpiComm *self) {
    if (self->comm == MPI_COMM_NULL) {
        PyErr_SetString(DistBackendError, "the process group's MPI communicator was freed (the "
                        "group was destroyed)");
        return -1;
    }
    if (self->broken) {
        PyErr_Format(DistBackendError,
                     "the process group is unusable after an earlier communication failure: %s",
                     self->err);
        return -1;
    }
    if (__atomic_exchange_n(&self->busy, 1, __ATOMIC_ACQ_REL)) {
        PyErr_SetString(PyExc_RuntimeError, "the communicator is already running a collective on "
                        "another thread");
        return -1;
    }
    return 0;
}

/* rc: 0, -1 (error), -2 (timed out: the buffers of bufs[0..n) stay referenced
 * for good, since MPI may still write them). */
static PyObject *finish(MpiComm *self, int rc, Buf *bufs, int n) {
    __atomic_store_n(&self->busy, 0, __ATOMIC_RELEASE);
    if (rc == -2)
        for (int i = 0; i < n; i++) Py_XINCREF(bufs[i].obj);
    if (rc < 0) {
        PyErr_SetString(DistBackendError, self->err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int check_root(MpiComm *self, int root) {
    if (root < 0 || root >= self->size) {
        PyErr_Format(PyExc_ValueError, "invalid root rank %d for a group of %d", root, self->size);
        return -1;
    }
    return 0;
}

#define RUN(expr)                                                                              \
    do {                                                                                       \
        Py_BEGIN_ALLOW_THREADS rc = (expr);                                                    \
        Py_END_ALLOW_THREADS                                                                   \
    } while (0)

/* ------------------------------------------------------------ collectives */

/* Note [MPI header]: before its data, every collective reduces a header
 * {kind, dtype, count, root, op} with MIN over the group, with each field
 * also negated (so one MPI_MIN gives each field's minimum and maximum). Ranks
 * whose calls disagree then all raise, naming the field's range, instead of
 * MPI matching mismatched buffers; the group stays in step (every rank made
 * the same one call). The header's buffer is on the heap: a timed-out MPI
 * call may still write it. */
enum { K_ALL_REDUCE = 1, K_BROADCAST, K_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_GATHER,
       K_SCATTER, K_ALL_TO_ALL, K_BARRIER };
static const char *kind_names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather",
                                   "reduce_scatter", "gather", "scatter", "all_to_all", "barrier"};

static const char *dname(long long d) {
    return d >= 0 && d < EM_NUM_DTYPES ? em_dtype_name((EmDType)d) : "?";
}

static int agree(MpiComm *c, int kind, int dtype, long long count, int root, int op) {
    int64_t *h = malloc(sizeof(int64_t) * 20);
    if (!h) return snprintf(c->err, sizeof c->err, "out of memory"), -1;
    int64_t mine[5] = {kind, dtype, count, root, op}, *lo = h + 10;
    for (int i = 0; i < 5; i++) h[i] = mine[i], h[5 + i] = -mine[i];
    MPI_Request r;
    int rc = run1(c, MPI(p_MPI_Iallreduce(h, lo, 10, T_INT64, O_MIN, c->comm, &r)), &r, kind_names[kind]);
    if (rc == -2) return rc; /* h stays MPI's */
    if (rc == 0) {
        long long mn[5], mx[5];
        for (int i = 0; i < 5; i++) mn[i] = lo[i], mx[i] = -lo[5 + i];
        if (mn[0] != mx[0]) {
            long long other = mn[0] != kind ? mn[0] : mx[0];
            snprintf(c->err, sizeof c->err,
                     "rank %d called %s while another rank called %s: every rank of a process group "
                     "must call the same collectives in the same order", c->rank, kind_names[kind],
                     kind_names[other >= 1 && other <= K_BARRIER ? other : 0]);
            rc = -1;
        } else if (mn[1] != mx[1] || mn[2] != mx[2] || mn[3] != mx[3] || mn[4] != mx[4]) {
            snprintf(c->err, sizeof c->err,
                     "%s: ranks disagree on the arguments: this rank (%d) has %lld elements of %s "
                     "(root %d, op %d); across the group the dtypes run %s..%s, the element counts "
                     "%lld..%lld, the roots %lld..%lld, the ops %lld..%lld", kind_names[kind], c->rank,
                     count, dname(dtype), root, op, dname(mn[1]), dname(mx[1]), mn[2], mx[2], mn[3],
                     mx[3], mn[4], mx[4]);
            rc = -1;
        }
    }
    free(h);
    return rc;
}

static int all_reduce_run(MpiComm *c, Buf *b, MPI_Op op, bool avg) {
    MPI_Request r;
    int rc = run1(c, MPI(p_MPI_Iallreduce(MPI_IN_PLACE, b->data, (int)b->n, mpi_type(b->dtype), op,
                                          c->comm, &r)), &r, "all_reduce");
    if (rc == 0 && avg) em_dist_divide(b->data, b->n, b->dtype, c->size);
    return rc;
}

static PyObject *comm_all_reduce(MpiComm *self, PyObject *args) {
    PyObject *t;
    int op, rc;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oi", &t, &op) || get_buf(t, &b, "all_reduce") < 0) return NULL;
    MPI_Op mop = mpi_op(b.dtype, op, "all_reduce");
    if (!mop || begin(self) < 0) return NULL;
    RUN((rc = agree(self, K_ALL_REDUCE, b.dtype, b.n, 0, op)) < 0 || b.n == 0
            ? rc : all_reduce_run(self, &b, mop, op == EM_DIST_AVG));
    return finish(self, rc, &b, 1);
}

static PyObject *comm_broadcast(MpiComm *self, PyObject *args) {
    PyObject *t;
    int root, rc;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oi", &t, &root) || get_buf(t, &b, "broadcast") < 0 ||
        check_root(self, root) < 0 || begin(self) < 0)
        return NULL;
    MPI_Request r;
    RUN((rc = agree(self, K_BROADCAST, b.dtype, b.n, root, 0)) < 0 || b.n == 0
            ? rc : run1(self, MPI(p_MPI_Ibcast(b.data, (int)b.n, mpi_type(b.dtype), root,
                                                   self->comm, &r)), &r, "broadcast"));
    return finish(self, rc, &b, 1);
}

static int reduce_run(MpiComm *c, Buf *b, int root, MPI_Op op, bool avg) {
    MPI_Request r;
    bool me = c->rank == root; /* the others' input stays as it was: MPI only reads it */
    int rc = run1(c, MPI(p_MPI_Ireduce(me ? MPI_IN_PLACE : b->data, me ? b->data : NULL, (int)b->n,
                                       mpi_type(b->dtype), op, root, c->comm, &r)), &r, "reduce");
    if (rc == 0 && avg && me) em_dist_divide(b->data, b->n, b->dtype, c->size);
    return rc;
}

static PyObject *comm_reduce(MpiComm *self, PyObject *args) {
    PyObject *t;
    int root, op, rc;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oii", &t, &root, &op) || get_buf(t, &b, "reduce") < 0 ||
        check_root(self, root) < 0)
        return NULL;
    MPI_Op mop = mpi_op(b.dtype, op, "reduce");
    if (!mop || begin(self) < 0) return NULL;
    RUN((rc = agree(self, K_REDUCE, b.dtype, b.n, root, op)) < 0 || b.n == 0
            ? rc : reduce_run(self, &b, root, mop, op == EM_DIST_AVG));
    return finish(self, rc, &b, 1);
}

static int check_sizes(Buf *big, Buf *small, size_t factor, const char *what) {
    if (big->dtype != small->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: output and input dtypes differ (%s and %s)", what,
                     em_dtype_name((EmDType)big->dtype), em_dtype_name((EmDType)small->dtype));
        return -1;
    }
    if (big->n != small->n * factor) {
        PyErr_Format(PyExc_RuntimeError, "%s: output has %zu elements, expected %zu (%zu per rank)",
                     what, big->n, small->n * factor, small->n);
        return -1;
    }
    return 0;
}

static bool overlaps(const Buf *a, const Buf *b) {
    size_t isz = em_itemsize((EmDType)a->dtype);
    return a->data < b->data + b->n * isz && b->data < a->data + a->n * isz;
}

/* MPI forbids send and receive buffers that overlap: the input goes through a
 * copy when it is not exactly this rank's block (then MPI_IN_PLACE). */
static int all_gather_run(MpiComm *c, Buf *out, Buf *in) {
    size_t per = in->n * em_itemsize((EmDType)in->dtype);
    const void *src = in->data;
    char *copy = NULL;
    if (in->data == out->data + (size_t)c->rank * per) src = MPI_IN_PLACE;
    else if (overlaps(in, out)) {
        if (!(copy = malloc(per))) return snprintf(c->err, sizeof c->err, "out of memory"), -1;
        memcpy(copy, in->data, per);
        src = copy;
    }
    MPI_Datatype t = mpi_type(in->dtype);
    MPI_Request r;
    int rc = run1(c, MPI(p_MPI_Iallgather(src, (int)in->n, t, out->data, (int)in->n, t, c->comm, &r)),
                  &r, "all_gather");
    if (rc != -2) free(copy);
    return rc;
}

static PyObject *comm_all_gather(MpiComm *self, PyObject *args) {
    PyObject *o, *i;
    Buf b[2];
    int rc;
    if (!PyArg_ParseTuple(args, "OO", &o, &i) || get_buf(o, &b[0], "all_gather") < 0 ||
        get_buf(i, &b[1], "all_gather") < 0 || check_sizes(&b[0], &b[1], self->size, "all_gather") < 0 ||
        begin(self) < 0)
        return NULL;
    RUN((rc = agree(self, K_ALL_GATHER, b[1].dtype, b[1].n, 0, 0)) < 0 || b[1].n == 0
            ? rc : all_gather_run(self, &b[0], &b[1]));
    return finish(self, rc, b, 2);
}

static int reduce_scatter_run(MpiComm *c, Buf *out, Buf *in, MPI_Op op, bool avg) {
    const void *src = in->data;
    char *copy = NULL;
    if (overlaps(in, out)) {
        size_t bytes = in->n * em_itemsize((EmDType)in->dtype);
        if (!(copy = malloc(bytes))) return snprintf(c->err, sizeof c->err, "out of memory"), -1;
        memcpy(copy, in->data, bytes);
        src = copy;
    }
    MPI_Request r;
    int rc = run1(c, MPI(p_MPI_Ireduce_scatter_block(src, out->data, (int)out->n, mpi_type(out->dtype),
                                                     op, c->comm, &r)), &r, "reduce_scatter");
    if (rc == 0 && avg) em_dist_divide(out->data, out->n, out->dtype, c->size);
    if (rc != -2) free(copy);
    return rc;
}

static PyObject *comm_reduce_scatter(MpiComm *self, PyObject *args) {
    PyObject *o, *i;
    int op, rc;
    Buf b[2];
    if (!PyArg_ParseTuple(args, "OOi", &o, &i, &op) || get_buf(o, &b[0], "reduce_scatter") < 0 ||
        get_buf(i, &b[1], "reduce_scatter") < 0 ||
        check_sizes(&b[1], &b[0], self->size, "reduce_scatter") < 0)
        return NULL;
    MPI_Op mop = mpi_op(b[0].dtype, op, "reduce_scatter");
    if (!mop || begin(self) < 0) return NULL;
    RUN((rc = agree(self, K_REDUCE_SCATTER, b[0].dtype, b[0].n, 0, op)) < 0 || b[0].n == 0
            ? rc : reduce_scatter_run(self, &b[0], &b[1], mop, op == EM_DIST_AVG));
    return finish(self, rc, b, 2);
}

/* gather (to the root) and scatter (from it); big is the root's size * n buffer. */
static int root_run(MpiComm *c, bool gather, Buf *small, Buf *big, int root) {
    MPI_Datatype t = mpi_type(small->dtype);
    int n = (int)small->n;
    MPI_Request r;
    bool me = c->rank == root;
    if (me && overlaps(small, big)) {
        snprintf(c->err, sizeof c->err, "%s: the root's tensor overlaps its list's memory",
                 gather ? "gather" : "scatter");
        return -1;
    }
    if (gather)
        return run1(c, MPI(p_MPI_Igather(small->data, n, t, me ? big->data : NULL, n, t, root,
                                         c->comm, &r)), &r, "gather");
    return run1(c, MPI(p_MPI_Iscatter(me ? big->data : NULL, n, t, small->data, n, t, root, c->comm,
                                      &r)), &r, "scatter");
}

static PyObject *root_call(MpiComm *self, PyObject *args, bool gather) {
    PyObject *s, *bo;
    int root, rc;
    Buf b[2] = {{0}, {0}};
    const char *what = gather ? "gather" : "scatter";
    if (!PyArg_ParseTuple(args, "OOi", &s, &bo, &root) || get_buf(s, &b[0], what) < 0 ||
        check_root(self, root) < 0)
        return NULL;
    if (self->rank == root) {
        if (bo == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: the root rank needs its list of tensors", what);
            return NULL;
        }
        if (get_buf(bo, &b[1], what) < 0 || check_sizes(&b[1], &b[0], self->size, what) < 0) return NULL;
    }
    if (begin(self) < 0) return NULL;
    RUN((rc = agree(self, gather ? K_GATHER : K_SCATTER, b[0].dtype, b[0].n, root, 0)) < 0 || b[0].n == 0
            ? rc : root_run(self, gather, &b[0], &b[1], root));
    return finish(self, rc, b, 2);
}

static PyObject *comm_gather(MpiComm *self, PyObject *args) { return root_call(self, args, true); }
static PyObject *comm_scatter(MpiComm *self, PyObject *args) { return root_call(self, args, false); }

/* Ranks first swap their send counts (so a receiver that expects other
 * sizes raises on every rank instead of MPI truncating), then the data. */
static int all_to_all_run(MpiComm *c, Buf *out, Buf *in, const int *cnt, int *theirs) {
    int n = c->size;
    const int *sc = cnt, *rcv = cnt + n;
    int *sd = theirs + n, *rd = theirs + 2 * n, *ok = theirs + 3 * n, *all_ok = ok + 1;
    *ok = 1, *all_ok = 0;
    MPI_Request r;
    int rc = run1(c, MPI(p_MPI_Ialltoall(sc, 1, T_INT, theirs, 1, T_INT, c->comm, &r)), &r, "all_to_all");
    if (rc < 0) return rc;
    for (int j = 0; j < n && *ok; j++)
        if (theirs[j] != rcv[j]) {
            snprintf(c->err, sizeof c->err,
                     "all_to_all: rank %d expects %d elements from rank %d, which sends %d", c->rank,
                     rcv[j], j, theirs[j]);
            *ok = 0;
        }
    char saved[sizeof c->err];
    memcpy(saved, c->err, sizeof saved);
    rc = run1(c, MPI(p_MPI_Iallreduce(ok, all_ok, 1, T_INT, O_MIN, c->comm, &r)), &r, "all_to_all");
    if (rc < 0) return rc;
    if (!*all_ok) {
        if (*ok) snprintf(c->err, sizeof c->err, "all_to_all: the split sizes of another rank do not match");
        else memcpy(c->err, saved, sizeof saved);
        return -1;
    }
    int so = 0, ro = 0;
    for (int j = 0; j < n; j++) sd[j] = so, rd[j] = ro, so += sc[j], ro += rcv[j];
    MPI_Datatype t = mpi_type(in->dtype);
    return run1(c, MPI(p_MPI_Ialltoallv(in->data, sc, sd, t, out->data, rcv, rd, t, c->comm, &r)), &r,
                "all_to_all");
}

static int int_counts(PyObject *o, int n, int *out, const char *what) {
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
        else if (v < 0 || v > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: count %lld is negative or past MPI's int range", what, v);
            rc = -1;
        } else out[i] = (int)v;
    }
    Py_DECREF(f);
    return rc;
}

static PyObject *comm_all_to_all(MpiComm *self, PyObject *args) {
    PyObject *o, *i, *so, *ro, *res = NULL;
    Buf b[2];
    int n = self->size, rc;
    if (!PyArg_ParseTuple(args, "OOOO", &o, &i, &so, &ro) || get_buf(o, &b[0], "all_to_all") < 0 ||
        get_buf(i, &b[1], "all_to_all") < 0)
        return NULL;
    int *counts = malloc(sizeof(int) * (5 * n + 2)); /* Note [MPI header]: MPI may write it late */
    if (!counts) return PyErr_NoMemory();
    if (int_counts(so, n, counts, "all_to_all send counts") < 0 ||
        int_counts(ro, n, counts + n, "all_to_all receive counts") < 0)
        goto fail;
    long long ts = 0, tr = 0;
    for (int j = 0; j < n; j++) ts += counts[j], tr += counts[n + j];
    if (b[0].dtype != b[1].dtype) {
        PyErr_Format(PyExc_RuntimeError, "all_to_all: output and input dtypes differ (%s and %s)",
                     em_dtype_name((EmDType)b[0].dtype), em_dtype_name((EmDType)b[1].dtype));
        goto fail;
    }
    if ((size_t)ts != b[1].n || (size_t)tr != b[0].n) {
        PyErr_Format(PyExc_RuntimeError,
                     "all_to_all: the split sizes add up to %lld sent and %lld received elements, "
                     "but the tensors have %zu and %zu", ts, tr, b[1].n, b[0].n);
        goto fail;
    }
    if (overlaps(&b[0], &b[1]) && b[0].n && b[1].n) {
        PyErr_SetString(PyExc_RuntimeError, "all_to_all: output and input overlap in memory");
        goto fail;
    }
    if (begin(self) < 0) goto fail;
    RUN((rc = agree(self, K_ALL_TO_ALL, b[1].dtype, -1, 0, 0)) < 0 ? rc
        : all_to_all_run(self, &b[0], &b[1], counts, counts + 2 * n));
    res = finish(self, rc, b, 2);
    if (rc == -2) counts = NULL; /* MPI may still read the counts */
fail:
    free(counts);
    return res;
}

/* p2p([(is_send, tensor, peer, tag), ...]): every message posted at once;
 * MPI keeps the order of messages between two ranks with one tag. */
static int p2p_run(MpiComm *c, int m, const int *is_send, const int *peer, const int *tag, Buf *b,
                   MPI_Request *req, MPI_Status *st, int any_source) {
    for (int i = 0; i < m; i++) {
        MPI_Datatype t = mpi_type(b[i].dtype);
        int rc = is_send[i] ? MPI(p_MPI_Isend(b[i].data, (int)b[i].n, t, peer[i], tag[i], c->comm, &req[i]))
                            : MPI(p_MPI_Irecv(b[i].data, (int)b[i].n, t, any_source ? MPI_ANY_SOURCE : peer[i],
                                              tag[i], c->comm, &req[i]));
        if (rc != MPI_SUCCESS) {
            c->broken = true; /* the messages posted so far cannot be taken back */
            return fail_mpi(c, rc, is_send[i] ? "send" : "recv");
        }
    }
    int rc = wait_all(c, m, req, st, "send/recv"), cls = 0;
    if (rc == -1) {
        for (int i = 0; i < m; i++)
            if (!is_send[i] && st[i].MPI_ERROR != MPI_SUCCESS &&
                MPI(p_MPI_Error_class(st[i].MPI_ERROR, &cls)) == MPI_SUCCESS && cls == MPI_ERR_TRUNCATE) {
                snprintf(c->err, sizeof c->err,
                         "rank %d: recv of %zu elements of %s (tag %d): the message from rank %d is "
                         "larger", c->rank, b[i].n, em_dtype_name((EmDType)b[i].dtype), tag[i],
                         st[i].MPI_SOURCE);
                break;
            }
    }
    if (rc < 0) return rc;
    for (int i = 0; i < m; i++) {
        int got = 0;
        if (is_send[i]) continue;
        MPI(p_MPI_Get_count(&st[i], mpi_type(b[i].dtype), &got));
        if ((size_t)got != b[i].n) {
            snprintf(c->err, sizeof c->err,
                     "rank %d: recv expected %zu elements of %s from rank %d (tag %d), but it sent %d",
                     c->rank, b[i].n, em_dtype_name((EmDType)b[i].dtype), st[i].MPI_SOURCE, tag[i], got);
            return -1;
        }
    }
    return 0;
}

static int check_tag(MpiComm *self, long long tg, int *out) {
    if (tg < 0 || tg > self->tag_ub) {
        PyErr_Format(PyExc_ValueError, "tag %lld is outside the MPI library's range 0..%d", tg,
                     self->tag_ub);
        return -1;
    }
    *out = (int)tg;
    return 0;
}

static PyObject *comm_p2p(MpiComm *self, PyObject *list) {
    PyObject *f = PySequence_Fast(list, "p2p: expected a list of operations");
    if (!f) return NULL;
    int m = (int)PySequence_Fast_GET_SIZE(f), rc;
    int *ints = malloc(sizeof(int) * 3 * (m + 1));
    Buf *b = malloc(sizeof(Buf) * (m + 1));
    MPI_Request *req = malloc(sizeof(MPI_Request) * (m + 1));
    MPI_Status *st = malloc(sizeof(MPI_Status) * (m + 1));
    PyObject *res = NULL;
    if (!ints || !b || !req || !st) {
        PyErr_NoMemory();
        goto fail;
    }
    int *is_send = ints, *peer = ints + m + 1, *tag = ints + 2 * (m + 1);
    for (int i = 0; i < m; i++) {
        PyObject *t;
        long long tg;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(f, i), "pOiL", &is_send[i], &t, &peer[i], &tg) ||
            get_buf(t, &b[i], is_send[i] ? "send" : "recv") < 0 || check_tag(self, tg, &tag[i]) < 0)
            goto fail;
        if (peer[i] < 0 || peer[i] >= self->size || peer[i] == self->rank) {
            PyErr_Format(PyExc_ValueError, "%s: invalid peer rank %d (this is rank %d of %d)",
                         is_send[i] ? "send" : "recv", peer[i], self->rank, self->size);
            goto fail;
        }
    }
    if (begin(self) < 0) goto fail;
    RUN(m ? p2p_run(self, m, is_send, peer, tag, b, req, st, 0) : 0);
    res = finish(self, rc, b, m);
    if (rc == -2) req = NULL, st = NULL; /* still posted: MPI owns them now */
fail:
    Py_DECREF(f);
    free(ints);
    free(b);
    free(req);
    free(st);
    return res;
}

/* recv_any(tensor, tag) -> the sender's rank. */
static PyObject *comm_recv_any(MpiComm *self, PyObject *args) {
    PyObject *t;
    long long tg;
    Buf b;
    int tag, rc;
    if (!PyArg_ParseTuple(args, "OL", &t, &tg) || get_buf(t, &b, "recv") < 0 ||
        check_tag(self, tg, &tag) < 0 || begin(self) < 0)
        return NULL;
    static const int is_send = 0, peer = MPI_ANY_SOURCE;
    MPI_Request *req = malloc(sizeof(MPI_Request));
    MPI_Status *st = malloc(sizeof(MPI_Status));
    if (!req || !st) {
        free(req), free(st);
        __atomic_store_n(&self->busy, 0, __ATOMIC_RELEASE);
        return PyErr_NoMemory();
    }
    RUN(self->size == 1 ? (snprintf(self->err, sizeof self->err, "recv: no other rank"), -1)
                        : p2p_run(self, 1, &is_send, &peer, &tag, &b, req, st, 1));
    int src = st->MPI_SOURCE;
    if (rc != -2) free(req), free(st);
    PyObject *r = finish(self, rc, &b, 1);
    if (!r) return NULL;
    Py_DECREF(r);
    return PyLong_FromLong(src);
}

static PyObject *comm_barrier(MpiComm *self, PyObject *u) {
    if (begin(self) < 0) return NULL;
    int rc; /* the header's reduction is the barrier */
    RUN(agree(self, K_BARRIER, 0, 0, 0, 0));
    return finish(self, rc, NULL, 0);
}

/* ------------------------------------------------------------ lifecycle */

static int setup_comm(MpiComm *self, MPI_Comm comm) {
    self->comm = comm;
    int flag = 0, *ub = NULL;
    if (MPI(p_MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS ||
        MPI(p_MPI_Comm_rank(comm, &self->rank)) != MPI_SUCCESS ||
        MPI(p_MPI_Comm_size(comm, &self->size)) != MPI_SUCCESS)
        return -1;
    if (MPI(p_MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag)) != MPI_SUCCESS || !flag || !ub)
        self->tag_ub = 32767; /* the least MPI promises */
    else self->tag_ub = *ub;
    return 0;
}

static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    MpiComm *self = (MpiComm *)type->tp_alloc(type, 0);
    if (self) self->comm = MPI_COMM_NULL, self->timeout = 1800.0;
    return (PyObject *)self;
}

/* _MpiComm(timeout): a duplicate of MPI_COMM_WORLD (ember's traffic never
 * meets the program's own MPI messages); initializes MPI the first time. */
static int comm_init(MpiComm *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"timeout", NULL};
    double timeout = 1800.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|d", kwlist, &timeout)) return -1;
    if (!lib) {
        PyErr_SetString(PyExc_RuntimeError, "the MPI library is not loaded (_mpi_load first)");
        return -1;
    }
    if (self->comm != MPI_COMM_NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_MpiComm is already initialized");
        return -1;
    }
    self->timeout = timeout > 0 ? timeout : 1800.0;
    int rc = MPI_SUCCESS, done = 0, fin = 0;
    char msg[128] = "";
    Py_BEGIN_ALLOW_THREADS
    p_MPI_Finalized(&fin);
    if (!fin) p_MPI_Initialized(&done);
    if (fin) snprintf(msg, sizeof msg, "MPI was already finalized in this process");
    else if (!done) {
        int provided = 0;
        rc = p_MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc == MPI_SUCCESS) {
            thread_level = provided;
            we_initialized = true;
            if (provided < MPI_THREAD_SERIALIZED)
                snprintf(msg, sizeof msg, "the MPI library gives thread level %d; ember needs "
                         "MPI_THREAD_SERIALIZED or MULTIPLE", provided);
            else if (make_half_ops() < 0) snprintf(msg, sizeof msg, "MPI_Op_create failed");
        } else snprintf(msg, sizeof msg, "MPI_Init_thread failed (error %d)", rc);
    } else if (thread_level < 0) {
        /* the program initialized MPI itself (mpi4py, say): its level stands */
        int provided = 0;
        p_MPI_Query_thread(&provided);
        thread_level = provided;
        if (provided < MPI_THREAD_SERIALIZED)
            snprintf(msg, sizeof msg, "MPI was initialized with thread level %d; ember needs "
                     "MPI_THREAD_SERIALIZED or MULTIPLE", provided);
        else if (make_half_ops() < 0) snprintf(msg, sizeof msg, "MPI_Op_create failed");
    }
    /* errors that MPI raises on no communicator of ours (MPI_Testall's) go to
     * WORLD's or SELF's handler: all return codes, never an abort */
    if (!msg[0]) {
        MPI(p_MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        MPI(p_MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    }
    MPI_Comm dup = MPI_COMM_NULL;
    if (!msg[0] && (rc = MPI(p_MPI_Comm_dup(MPI_COMM_WORLD, &dup))) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI_Comm_dup(MPI_COMM_WORLD) failed (error %d)", rc);
    if (!msg[0] && setup_comm(self, dup) < 0) snprintf(msg, sizeof msg, "the MPI communicator's setup failed");
    Py_END_ALLOW_THREADS
    if (msg[0]) {
        PyErr_SetString(DistError, msg);
        return -1;
    }
    return 0;
}

/* split(ranks, timeout) -> a new _MpiComm over those ranks of this one. Only
 * the members call it (MPI_Comm_create_group), in the same order. */
static PyObject *comm_split(MpiComm *self, PyObject *args) {
    PyObject *ranks_o;
    double timeout;
    int tag = 0;
    if (!PyArg_ParseTuple(args, "Od|i", &ranks_o, &timeout, &tag)) return NULL;
    PyObject *f = PySequence_Fast(ranks_o, "split: expected a list of ranks");
    if (!f) return NULL;
    int n = (int)PySequence_Fast_GET_SIZE(f), member = 0;
    int *ranks = malloc(sizeof(int) * (n ? n : 1));
    if (!ranks) {
        Py_DECREF(f);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < n; i++) {
        ranks[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(f, i));
        if (PyErr_Occurred() || ranks[i] < 0 || ranks[i] >= self->size) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "split: rank %d is out of range", ranks[i]);
            Py_DECREF(f);
            free(ranks);
            return NULL;
        }
        member |= ranks[i] == self->rank;
    }
    Py_DECREF(f);
    if (!member || begin(self) < 0) {
        if (!member) PyErr_SetString(PyExc_ValueError, "split: this rank is not in the new group");
        free(ranks);
        return NULL;
    }
    MpiComm *sub = (MpiComm *)comm_new(&MpiCommType, NULL, NULL);
    if (!sub) {
        free(ranks);
        __atomic_store_n(&self->busy, 0, __ATOMIC_RELEASE);
        return NULL;
    }
    sub->timeout = timeout > 0 ? timeout : self->timeout;
    int rc;
    MPI_Group world_g, g;
    MPI_Comm nc = MPI_COMM_NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = MPI(p_MPI_Comm_group(self->comm, &world_g));
    if (rc == MPI_SUCCESS) {
        rc = MPI(p_MPI_Group_incl(world_g, n, ranks, &g));
        if (rc == MPI_SUCCESS) {
            rc = MPI(p_MPI_Comm_create_group(self->comm, g, tag, &nc));
            MPI(p_MPI_Group_free(&g));
        }
        MPI(p_MPI_Group_free(&world_g));
    }
    if (rc == MPI_SUCCESS && setup_comm(sub, nc) < 0) rc = -1;
    Py_END_ALLOW_THREADS
    free(ranks);
    __atomic_store_n(&self->busy, 0, __ATOMIC_RELEASE);
    if (rc != MPI_SUCCESS) {
        fail_mpi(self, rc, "new_group (MPI_Comm_create_group)");
        Py_DECREF(sub);
        PyErr_SetString(DistBackendError, self->err);
        return NULL;
    }
    return (PyObject *)sub;
}

static void free_comm(MpiComm *self) {
    int fin = 1;
    if (self->comm != MPI_COMM_NULL && lib && p_MPI_Finalized(&fin) == MPI_SUCCESS && !fin)
        MPI(p_MPI_Comm_free(&self->comm));
    self->comm = MPI_COMM_NULL;
}

static PyObject *comm_close(MpiComm *self, PyObject *u) {
    if (__atomic_load_n(&self->busy, __ATOMIC_ACQUIRE)) {
        PyErr_SetString(PyExc_RuntimeError, "close: a collective is still running");
        return NULL;
    }
    if (!self->broken) free_comm(self); /* a broken one may have requests that name it */
    self->comm = MPI_COMM_NULL;
    Py_RETURN_NONE;
}

static void comm_dealloc(MpiComm *self) {
    if (!self->broken) free_comm(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _mpi_finalize(grace) -> whether MPI was finalized: MPI_Finalize, once,
 * when ember initialized MPI, unless a timed-out operation is still posted
 * after `grace` seconds (MPI_Finalize would wait for it forever). */
static PyObject *mpi_finalize(PyObject *m, PyObject *arg) {
    double grace = PyFloat_AsDouble(arg);
    if (grace == -1 && PyErr_Occurred()) return NULL;
    int fin = 1, done = 0;
    if (lib && we_initialized && p_MPI_Finalized(&fin) == MPI_SUCCESS && !fin) {
        Py_BEGIN_ALLOW_THREADS
        double deadline = now() + grace;
        int flag = !n_abandoned;
        while (!flag) {
            if (MPI(p_MPI_Testall(n_abandoned, abandoned, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS) break;
            if (!flag && now() > deadline) break;
            if (!flag) nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        if (flag) done = p_MPI_Finalize() == MPI_SUCCESS;
        Py_END_ALLOW_THREADS
    }
    return PyBool_FromLong(done);
}

static PyObject *comm_get_rank(MpiComm *self, void *u) { return PyLong_FromLong(self->rank); }
static PyObject *comm_get_size(MpiComm *self, void *u) { return PyLong_FromLong(self->size); }
static PyObject *comm_get_thread_level(MpiComm *self, void *u) { return PyLong_FromLong(thread_level); }
static PyObject *comm_get_timeout(MpiComm *self, void *u) { return PyFloat_FromDouble(self->timeout); }
static int comm_set_timeout(MpiComm *self, PyObject *v, void *u) {
    double t = v ? PyFloat_AsDouble(v) : -1;
    if (t == -1 && PyErr_Occurred()) return -1;
    if (t <= 0) {
        PyErr_SetString(PyExc_ValueError, "timeout must be positive");
        return -1;
    }
    self->timeout = t;
    return 0;
}

static PyMethodDef comm_methods[] = {
    {"split", (PyCFunction)comm_split, METH_VARARGS, "split(ranks, timeout): a communicator of those ranks (members call it)."},
    {"close", (PyCFunction)comm_close, METH_NOARGS, "Free the communicator."},
    {"all_reduce", (PyCFunction)comm_all_reduce, METH_VARARGS, "all_reduce(tensor, op), in place."},
    {"broadcast", (PyCFunction)comm_broadcast, METH_VARARGS, "broadcast(tensor, root)."},
    {"reduce", (PyCFunction)comm_reduce, METH_VARARGS, "reduce(tensor, root, op)."},
    {"all_gather", (PyCFunction)comm_all_gather, METH_VARARGS, "all_gather(out, input)."},
    {"reduce_scatter", (PyCFunction)comm_reduce_scatter, METH_VARARGS, "reduce_scatter(out, input, op)."},
    {"gather", (PyCFunction)comm_gather, METH_VARARGS, "gather(input, out or None, root)."},
    {"scatter", (PyCFunction)comm_scatter, METH_VARARGS, "scatter(out, input or None, root)."},
    {"all_to_all", (PyCFunction)comm_all_to_all, METH_VARARGS, "all_to_all(out, input, send_counts, recv_counts)."},
    {"p2p", (PyCFunction)comm_p2p, METH_O, "p2p([(is_send, tensor, peer, tag), ...])."},
    {"recv_any", (PyCFunction)comm_recv_any, METH_VARARGS, "recv_any(tensor, tag) -> source rank."},
    {"barrier", (PyCFunction)comm_barrier, METH_NOARGS, "Wait for every rank."},
    {NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank, NULL, "This process's rank in the communicator.", NULL},
    {"size", (getter)comm_get_size, NULL, "The communicator's size.", NULL},
    {"thread_level", (getter)comm_get_thread_level, NULL, "The MPI thread level in force.", NULL},
    {"timeout", (getter)comm_get_timeout, (setter)comm_set_timeout, "Seconds before an operation fails.", NULL},
    {NULL},
};

static PyTypeObject MpiCommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C._MpiComm",
    .tp_basicsize = sizeof(MpiComm),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_MpiComm(timeout): the mpi backend's communicator (a duplicate of MPI_COMM_WORLD).",
    .tp_new = comm_new,
    .tp_init = (initproc)comm_init,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_getset = comm_getset,
};

static PyMethodDef module_fns[] = {
    {"_mpi_load", mpi_load, METH_O, "_mpi_load(path) -> version: load libmpi (MPICH's ABI)."},
    {"_mpi_finalize", mpi_finalize, METH_O, "_mpi_finalize(grace): MPI_Finalize, when ember initialized MPI."},
    {NULL},
};

int em_init_mpi(PyObject *m) {
    DistError = PyObject_GetAttrString(m, "DistError");
    DistBackendError = PyObject_GetAttrString(m, "DistBackendError");
    if (!DistError || !DistBackendError || PyType_Ready(&MpiCommType) < 0 ||
        PyModule_AddObjectRef(m, "_MpiComm", (PyObject *)&MpiCommType) < 0 ||
        PyModule_AddFunctions(m, module_fns) < 0)
        return -1;
    return 0;
}
