/* collectives.c — the algorithms of ember's CPU transport and the Python type
 * _C._GlooComm that runs them (one per process group; the Python layer calls
 * it from the group's progress thread). Every collective first exchanges a
 * small header with every peer (Note [collective header]) so that ranks
 * whose calls disagree (op, dtype, element count, root) all raise at once
 * instead of mis-reading each other's bytes. Algorithms, by size:
 *   all_reduce   binomial tree (reduce to 0, broadcast) below 256 KB,
 *                else ring reduce-scatter + ring all-gather, each receive
 *                folded into the result while it is still arriving;
 *   broadcast / reduce     binomial trees;
 *   all_gather / reduce_scatter   rings;
 *   gather / scatter / all_to_all / p2p   direct transfers, all at once.
 * The GIL is released for every transfer; buffers are contiguous CPU
 * tensors (the Python layer copies other layouts in and out). */
#include "../ember.h"
#include "transport.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static PyObject *DistError, *DistBackendError;

/* Note [collective header]: int64[5] = {kind, dtype, count, root, op}. A
 * point-to-point message is preceded by the same shape of header with kind
 * P2P and the tag in the root field, checked against what the receiver
 * posted before its payload is read. */
enum { K_ALL_REDUCE = 1, K_BROADCAST, K_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_GATHER,
       K_SCATTER, K_ALL_TO_ALL, K_BARRIER, K_P2P, K_VOTE };
static const char *kind_names[] = {"?", "all_reduce", "broadcast", "reduce", "all_gather",
                                   "reduce_scatter", "gather", "scatter", "all_to_all",
                                   "barrier", "send/recv", "vote"};
#define TREE_BYTES (256 << 10)
#define HDR 5

/* Note [transport ownership]: `busy` says which thread may touch the
 * sockets: IDLE, RUNNING (a collective holds them, GIL released) or
 * CLOSE_PENDING (close() came meanwhile: it only shut the sockets down,
 * which fails the transfer at once, and the running call closes them when it
 * ends). close() never frees what a running transfer still polls. */
enum { IDLE, RUNNING, CLOSE_PENDING };

typedef struct {
    PyObject_HEAD
    EmComm c;
    int busy;
} CommObject;

static inline int mod(int a, int n) { return ((a % n) + n) % n; }

static EmXfer xsend(int peer, void *buf, size_t len) {
    return (EmXfer){.peer = peer, .is_send = true, .buf = buf, .len = len, .op = -1};
}
static EmXfer xrecv(int peer, void *buf, size_t len) {
    return (EmXfer){.peer = peer, .is_send = false, .buf = buf, .len = len, .op = -1};
}
static EmXfer xfold(int peer, void *tmp, size_t len, void *acc, int dtype, int op) {
    return (EmXfer){.peer = peer, .is_send = false, .buf = tmp, .len = len, .op = op,
                    .dtype = dtype, .acc = acc};
}

/* Full-mesh exchange of one header; every rank compares all of them, so a
 * disagreement raises on every rank. count < 0 skips the count check. */
static int agree(EmComm *c, int64_t kind, int64_t dtype, int64_t count, int64_t root, int64_t op) {
    int n = c->size;
    int64_t mine[HDR] = {kind, dtype, count, root, op};
    int64_t *all = calloc((size_t)n * HDR, sizeof(int64_t));
    EmXfer *x = malloc(sizeof(EmXfer) * 2 * n);
    int rc = -1, k = 0;
    if (!all || !x) {
        snprintf(c->err, sizeof c->err, "out of memory");
        goto done;
    }
    memcpy(all + (size_t)c->rank * HDR, mine, sizeof mine);
    for (int j = 0; j < n; j++)
        if (j != c->rank) {
            x[k++] = xsend(j, mine, sizeof mine);
            x[k++] = xrecv(j, all + (size_t)j * HDR, sizeof mine);
        }
    if (em_dist_run(c, x, k, kind_names[kind]) < 0) goto done;
    for (int j = 0; j < n; j++) {
        int64_t *h = all + (size_t)j * HDR;
        if (h[0] != kind) {
            int hk = h[0] > 0 && h[0] <= K_VOTE ? (int)h[0] : 0;
            snprintf(c->err, sizeof c->err,
                     "rank %d called %s while rank %d called %s: every rank of a process group "
                     "must call the same collectives in the same order",
                     c->rank, kind_names[kind], j, kind_names[hk]);
            c->broken = true; /* the other rank's bytes are not ours to read */
            goto done;
        }
        if (h[1] != dtype || (count >= 0 && h[2] != count) || h[3] != root || h[4] != op) {
            int d0 = (int)dtype, d1 = (int)h[1];
            snprintf(c->err, sizeof c->err,
                     "%s: ranks disagree on the arguments: rank %d has %lld elements of %s "
                     "(root %lld, op %lld), rank %d has %lld elements of %s (root %lld, op %lld)",
                     kind_names[kind], c->rank, (long long)count,
                     d0 >= 0 && d0 < EM_NUM_DTYPES ? em_dtype_name((EmDType)d0) : "?",
                     (long long)root, (long long)op, j, (long long)h[2],
                     d1 >= 0 && d1 < EM_NUM_DTYPES ? em_dtype_name((EmDType)d1) : "?",
                     (long long)h[3], (long long)h[4]);
            goto done;
        }
    }
    rc = 0;
done:
    free(all);
    free(x);
    return rc;
}

/* Every rank says whether its own checks passed; all fail together. */
static int vote(EmComm *c, int ok, const char *what) {
    char saved[sizeof c->err];
    memcpy(saved, c->err, sizeof saved);
    int bad = -1;
    int n = c->size;
    int64_t mine = ok, *all = calloc((size_t)n, sizeof(int64_t));
    EmXfer *x = malloc(sizeof(EmXfer) * 2 * n);
    int k = 0, rc = -1;
    if (!all || !x) goto done;
    all[c->rank] = mine;
    for (int j = 0; j < n; j++)
        if (j != c->rank) {
            x[k++] = xsend(j, &mine, sizeof mine);
            x[k++] = xrecv(j, all + j, sizeof mine);
        }
    if (em_dist_run(c, x, k, what) < 0) goto done;
    for (int j = 0; j < n && bad < 0; j++)
        if (!all[j]) bad = j;
    if (bad < 0) rc = 0;
    else if (ok) snprintf(c->err, sizeof c->err, "%s: the arguments of rank %d do not match", what, bad);
    else memcpy(c->err, saved, sizeof saved);
done:
    free(all);
    free(x);
    return rc;
}

/* ------------------------------------------------------------ algorithms */

static int tree_reduce(EmComm *c, char *buf, size_t n, int dtype, int op, int root, char *tmp) {
    int vr = mod(c->rank - root, c->size);
    size_t bytes = n * em_itemsize((EmDType)dtype);
    for (int mask = 1; mask < c->size; mask <<= 1) {
        if (vr & mask) {
            EmXfer x = xsend(mod(vr - mask + root, c->size), buf, bytes);
            return em_dist_run(c, &x, 1, "reduce");
        }
        if (vr + mask < c->size) {
            EmXfer x = xfold(mod(vr + mask + root, c->size), tmp, bytes, buf, dtype, op);
            if (em_dist_run(c, &x, 1, "reduce") < 0) return -1;
        }
    }
    return 0;
}

static int tree_broadcast(EmComm *c, char *buf, size_t bytes, int root) {
    int vr = mod(c->rank - root, c->size), mask = 1;
    for (; mask < c->size; mask <<= 1)
        if (vr & mask) {
            EmXfer x = xrecv(mod(vr - mask + root, c->size), buf, bytes);
            if (em_dist_run(c, &x, 1, "broadcast") < 0) return -1;
            break;
        }
    EmXfer x[64];
    int k = 0;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (vr + mask < c->size) x[k++] = xsend(mod(vr + mask + root, c->size), buf, bytes);
    return k ? em_dist_run(c, x, k, "broadcast") : 0;
}

/* Block b of n elements split in `size` nearly equal parts. */
static void block(size_t n, int size, int b, size_t *off, size_t *cnt) {
    size_t q = n / size, r = n % size;
    *off = (size_t)b * q + ((size_t)b < r ? (size_t)b : r);
    *cnt = q + (b < (int)r);
}

/* After it, rank r's block r of buf holds the reduction over all ranks.
 * The incoming block lands in tmp in pieces of FOLD_PIECE bytes, each folded
 * into buf while the next one arrives: tmp (FOLD_PIECE bytes are enough) stays
 * in cache however large the block, where a whole-block tmp made the
 * reduction memory-bound from tens of MB. */
#define FOLD_PIECE ((size_t)256 << 10)
static int ring_reduce_scatter(EmComm *c, char *buf, size_t n, int dtype, int op, char *tmp,
                               const size_t *offs, const size_t *cnts) {
    int isz = em_itemsize((EmDType)dtype), next = mod(c->rank + 1, c->size),
        prev = mod(c->rank - 1, c->size);
    size_t piece = FOLD_PIECE / (size_t)isz * (size_t)isz;
    EmXfer stack[33], *x = stack;
    for (int s = 0; s < c->size - 1; s++) {
        int sb = mod(c->rank - s - 1, c->size), rb = mod(c->rank - s - 2, c->size);
        size_t len = cnts[rb] * isz, pieces = len ? (len + piece - 1) / piece : 1;
        if (pieces + 1 > sizeof stack / sizeof *stack) {
            if (x != stack) free(x);
            if (!(x = malloc((pieces + 1) * sizeof *x))) {
                snprintf(c->err, sizeof c->err, "reduce_scatter: out of memory");
                return -1;
            }
        }
        x[0] = xsend(next, buf + offs[sb] * isz, cnts[sb] * isz);
        for (size_t k = 0; k < pieces; k++) { /* one peer's receives run in list order */
            size_t at = k * piece;
            x[1 + k] = xfold(prev, tmp, len - at < piece ? len - at : piece, buf + offs[rb] * isz + at, dtype, op);
        }
        int rc = em_dist_run(c, x, (int)pieces + 1, "reduce_scatter");
        if (rc < 0) {
            if (x != stack) free(x);
            return -1;
        }
    }
    if (x != stack) free(x);
    (void)n;
    return 0;
}

/* Rank r's block r is sent round the ring until every rank has every block. */
static int ring_all_gather(EmComm *c, char *buf, int isz, const size_t *offs, const size_t *cnts) {
    int next = mod(c->rank + 1, c->size), prev = mod(c->rank - 1, c->size);
    for (int s = 0; s < c->size - 1; s++) {
        int sb = mod(c->rank - s, c->size), rb = mod(c->rank - s - 1, c->size);
        EmXfer x[2] = {xsend(next, buf + offs[sb] * isz, cnts[sb] * isz),
                       xrecv(prev, buf + offs[rb] * isz, cnts[rb] * isz)};
        if (em_dist_run(c, x, 2, "all_gather") < 0) return -1;
    }
    return 0;
}

static int all_reduce(EmComm *c, char *buf, size_t n, int dtype, int op) {
    int isz = em_itemsize((EmDType)dtype), rc = -1;
    size_t bytes = n * isz;
    size_t *offs = malloc(sizeof(size_t) * 2 * c->size), *cnts = offs + c->size;
    char *tmp = malloc(FOLD_PIECE + 1); /* ring_reduce_scatter's pieces */
    if (!offs || !tmp) goto oom;
    if (bytes < TREE_BYTES || n < (size_t)c->size) {
        free(tmp);
        tmp = malloc(bytes + 1);
        if (!tmp) goto oom;
        if (tree_reduce(c, buf, n, dtype, op, 0, tmp) < 0 || tree_broadcast(c, buf, bytes, 0) < 0)
            goto done;
    } else {
        for (int b = 0; b < c->size; b++) block(n, c->size, b, &offs[b], &cnts[b]);
        if (ring_reduce_scatter(c, buf, n, dtype, op, tmp, offs, cnts) < 0 ||
            ring_all_gather(c, buf, isz, offs, cnts) < 0)
            goto done;
    }
    if (op == EM_DIST_AVG) em_dist_divide(buf, n, dtype, c->size);
    rc = 0;
    goto done;
oom:
    snprintf(c->err, sizeof c->err, "all_reduce: out of memory for %zu bytes", bytes);
done:
    free(offs);
    free(tmp);
    return rc;
}

/* ------------------------------------------------------------ Python glue */

typedef struct {
    char *data;
    size_t n;
    int dtype;
} Buf;

static int get_buf(PyObject *o, Buf *b, const char *what) {
    if (!em_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Tensor, got %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    EmTensor *t = (EmTensor *)o;
    if (!em_is_cpu(t)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: the gloo backend (ember's CPU transport) takes CPU tensors; this one is "
                     "on a CUDA device (use the nccl backend)", what);
        return -1;
    }
    if (!em_is_contiguous(t)) {
        PyErr_Format(PyExc_RuntimeError, "%s: the transport takes contiguous tensors", what);
        return -1;
    }
    b->data = em_data(t);
    b->n = (size_t)t->numel;
    b->dtype = t->dtype;
    return 0;
}

static int begin(CommObject *self) {
    if (self->c.fds == NULL) {
        PyErr_SetString(DistBackendError, "the process group's transport is not connected (or was destroyed)");
        return -1;
    }
    if (self->c.broken) {
        PyErr_Format(DistBackendError,
                     "the process group is unusable after an earlier communication failure: %s",
                     self->c.err);
        return -1;
    }
    int idle = IDLE;
    if (!__atomic_compare_exchange_n(&self->busy, &idle, RUNNING, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        PyErr_SetString(PyExc_RuntimeError, idle == CLOSE_PENDING ? "the process group was destroyed"
                        : "the transport is already running a collective on another thread");
        return -1;
    }
    return 0;
}

static void close_now(CommObject *self) {
    em_dist_close(&self->c);
    free(self->c.fds);
    self->c.fds = NULL;
}

static PyObject *finish(CommObject *self, int rc) {
    int running = RUNNING;
    if (!__atomic_compare_exchange_n(&self->busy, &running, IDLE, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        close_now(self); /* close() came while this call ran (Note [transport ownership]) */
        __atomic_store_n(&self->busy, IDLE, __ATOMIC_RELEASE);
        if (rc < 0) /* its sockets were shut under it: say so rather than blame a peer */
            snprintf(self->c.err, sizeof self->c.err, "the process group was destroyed while this "
                     "operation was running");
    }
    if (rc < 0) {
        PyErr_SetString(DistBackendError, self->c.err);
        return NULL;
    }
    Py_RETURN_NONE;
}

static int check_root(CommObject *self, int root) {
    if (root < 0 || root >= self->c.size) {
        PyErr_Format(PyExc_ValueError, "invalid root rank %d for a group of %d", root, self->c.size);
        return -1;
    }
    return 0;
}

static void comm_dealloc(CommObject *self) {
    em_dist_close(&self->c);
    free(self->c.fds);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *comm_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    CommObject *self = (CommObject *)type->tp_alloc(type, 0);
    if (self) self->c.listen_fd = -1; /* 0 would be stdin, closed by em_dist_close */
    return (PyObject *)self;
}

static int comm_init(CommObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"rank", "size", "timeout", "host", NULL};
    int rank, size;
    double timeout;
    const char *host = "0.0.0.0";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iid|s", kwlist, &rank, &size, &timeout, &host))
        return -1;
    if (size < 1 || rank < 0 || rank >= size) {
        PyErr_Format(PyExc_ValueError, "invalid rank %d for world size %d", rank, size);
        return -1;
    }
    em_dist_close(&self->c);
    free(self->c.fds);
    memset(&self->c, 0, sizeof self->c);
    self->c.rank = rank;
    self->c.size = size;
    self->c.timeout = timeout > 0 ? timeout : 1800.0;
    self->c.listen_fd = -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = em_dist_listen(&self->c, host);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(DistError, self->c.err);
        return -1;
    }
    return 0;
}

static PyObject *comm_connect(CommObject *self, PyObject *args) {
    PyObject *hosts_o, *ports_o;
    if (!PyArg_ParseTuple(args, "OO:connect", &hosts_o, &ports_o)) return NULL;
    int n = self->c.size;
    if (!PyList_Check(hosts_o) || !PyList_Check(ports_o) || PyList_GET_SIZE(hosts_o) != n ||
        PyList_GET_SIZE(ports_o) != n) {
        PyErr_Format(PyExc_ValueError, "connect: expected two lists of %d hosts and ports", n);
        return NULL;
    }
    if (self->c.fds) {
        PyErr_SetString(PyExc_RuntimeError, "connect: already connected");
        return NULL;
    }
    const char **hosts = calloc(n, sizeof(char *));
    int *ports = calloc(n, sizeof(int));
    int *fds = malloc(sizeof(int) * n);
    PyObject *res = NULL;
    if (!hosts || !ports || !fds) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        hosts[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(hosts_o, i));
        ports[i] = (int)PyLong_AsLong(PyList_GET_ITEM(ports_o, i));
        if (!hosts[i] || PyErr_Occurred()) goto fail;
        fds[i] = -1;
    }
    self->c.fds = fds;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = em_dist_connect(&self->c, hosts, ports);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0) close(fds[i]);
        self->c.fds = NULL;
        PyErr_SetString(DistError, self->c.err);
        goto fail;
    }
    fds = NULL;
    res = Py_NewRef(Py_None);
fail:
    free(hosts);
    free(ports);
    free(fds);
    return res;
}

static PyObject *comm_close(CommObject *self, PyObject *u) {
    for (;;) {
        int state = IDLE;
        if (__atomic_compare_exchange_n(&self->busy, &state, RUNNING, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            close_now(self);
            __atomic_store_n(&self->busy, IDLE, __ATOMIC_RELEASE);
            break;
        }
        if (state == CLOSE_PENDING) break;
        if (__atomic_compare_exchange_n(&self->busy, &state, CLOSE_PENDING, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            /* a collective runs on another thread: wake it with a failure, it closes */
            for (int i = 0; self->c.fds && i < self->c.size; i++)
                if (self->c.fds[i] >= 0) shutdown(self->c.fds[i], SHUT_RDWR);
            break;
        }
    }
    Py_RETURN_NONE;
}

#define RUN(expr)                                                                              \
    do {                                                                                       \
        Py_BEGIN_ALLOW_THREADS rc = (expr);                                                    \
        Py_END_ALLOW_THREADS                                                                   \
    } while (0)

static PyObject *comm_all_reduce(CommObject *self, PyObject *args) {
    PyObject *t;
    int op;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oi", &t, &op) || get_buf(t, &b, "all_reduce") < 0 ||
        em_dist_check_op(b.dtype, op, "all_reduce") < 0 || begin(self) < 0)
        return NULL;
    int rc;
    EmComm *c = &self->c;
    RUN(agree(c, K_ALL_REDUCE, b.dtype, b.n, 0, op) < 0 ? -1
        : c->size == 1 || b.n == 0                   ? 0
                                                     : all_reduce(c, b.data, b.n, b.dtype, op));
    return finish(self, rc);
}

static PyObject *comm_broadcast(CommObject *self, PyObject *args) {
    PyObject *t;
    int root;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oi", &t, &root) || get_buf(t, &b, "broadcast") < 0 ||
        check_root(self, root) < 0 || begin(self) < 0)
        return NULL;
    int rc;
    EmComm *c = &self->c;
    RUN(agree(c, K_BROADCAST, b.dtype, b.n, root, 0) < 0 ? -1
        : tree_broadcast(c, b.data, b.n * em_itemsize((EmDType)b.dtype), root));
    return finish(self, rc);
}

static int reduce_run(EmComm *c, Buf *b, int root, int op) {
    if (agree(c, K_REDUCE, b->dtype, b->n, root, op) < 0) return -1;
    if (c->size == 1 || b->n == 0) return 0;
    size_t bytes = b->n * em_itemsize((EmDType)b->dtype);
    /* non-root ranks reduce in a scratch copy: their input stays as it was */
    char *tmp = malloc(2 * bytes), *work = c->rank == root ? b->data : tmp + bytes;
    if (!tmp) {
        snprintf(c->err, sizeof c->err, "reduce: out of memory for %zu bytes", 2 * bytes);
        return -1;
    }
    if (work != b->data) memcpy(work, b->data, bytes);
    int rc = tree_reduce(c, work, b->n, b->dtype, op, root, tmp);
    if (rc == 0 && op == EM_DIST_AVG && c->rank == root) em_dist_divide(work, b->n, b->dtype, c->size);
    free(tmp);
    return rc;
}

static PyObject *comm_reduce(CommObject *self, PyObject *args) {
    PyObject *t;
    int root, op;
    Buf b;
    if (!PyArg_ParseTuple(args, "Oii", &t, &root, &op) || get_buf(t, &b, "reduce") < 0 ||
        check_root(self, root) < 0 || em_dist_check_op(b.dtype, op, "reduce") < 0 || begin(self) < 0)
        return NULL;
    int rc;
    RUN(reduce_run(&self->c, &b, root, op));
    return finish(self, rc);
}

static int check_sizes(Buf *out, Buf *in, size_t factor, const char *what) {
    if (out->dtype != in->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: output and input dtypes differ (%s and %s)", what,
                     em_dtype_name((EmDType)out->dtype), em_dtype_name((EmDType)in->dtype));
        return -1;
    }
    if (out->n != in->n * factor) {
        PyErr_Format(PyExc_RuntimeError, "%s: output has %zu elements, expected %zu (%zu per rank)",
                     what, out->n, in->n * factor, in->n);
        return -1;
    }
    return 0;
}

static int all_gather_run(EmComm *c, Buf *out, Buf *in) {
    if (agree(c, K_ALL_GATHER, in->dtype, in->n, 0, 0) < 0) return -1;
    int isz = em_itemsize((EmDType)in->dtype);
    memmove(out->data + (size_t)c->rank * in->n * isz, in->data, in->n * isz);
    if (c->size == 1 || in->n == 0) return 0;
    size_t *offs = malloc(sizeof(size_t) * 2 * c->size), *cnts = offs + c->size;
    if (!offs) return -1;
    for (int b = 0; b < c->size; b++) offs[b] = b * in->n, cnts[b] = in->n;
    int rc = ring_all_gather(c, out->data, isz, offs, cnts);
    free(offs);
    return rc;
}

static PyObject *comm_all_gather(CommObject *self, PyObject *args) {
    PyObject *o, *i;
    Buf out, in;
    if (!PyArg_ParseTuple(args, "OO", &o, &i) || get_buf(o, &out, "all_gather") < 0 ||
        get_buf(i, &in, "all_gather") < 0 || check_sizes(&out, &in, self->c.size, "all_gather") < 0 ||
        begin(self) < 0)
        return NULL;
    int rc;
    RUN(all_gather_run(&self->c, &out, &in));
    return finish(self, rc);
}

static int reduce_scatter_run(EmComm *c, Buf *out, Buf *in, int op) {
    if (agree(c, K_REDUCE_SCATTER, out->dtype, out->n, 0, op) < 0) return -1;
    int isz = em_itemsize((EmDType)out->dtype);
    size_t bytes = in->n * isz, per = out->n * isz;
    if (c->size == 1 || out->n == 0) {
        memmove(out->data, in->data, per);
        return 0;
    }
    char *work = malloc(bytes + per);
    size_t *offs = malloc(sizeof(size_t) * 2 * c->size), *cnts = offs ? offs + c->size : NULL;
    int rc = -1;
    if (!work || !offs) {
        snprintf(c->err, sizeof c->err, "reduce_scatter: out of memory for %zu bytes", bytes + per);
        goto done;
    }
    memcpy(work, in->data, bytes);
    for (int b = 0; b < c->size; b++) offs[b] = b * out->n, cnts[b] = out->n;
    if (ring_reduce_scatter(c, work, in->n, out->dtype, op, work + bytes, offs, cnts) < 0) goto done;
    memcpy(out->data, work + (size_t)c->rank * per, per);
    if (op == EM_DIST_AVG) em_dist_divide(out->data, out->n, out->dtype, c->size);
    rc = 0;
done:
    free(work);
    free(offs);
    return rc;
}

static PyObject *comm_reduce_scatter(CommObject *self, PyObject *args) {
    PyObject *o, *i;
    int op;
    Buf out, in;
    if (!PyArg_ParseTuple(args, "OOi", &o, &i, &op) || get_buf(o, &out, "reduce_scatter") < 0 ||
        get_buf(i, &in, "reduce_scatter") < 0 || check_sizes(&in, &out, self->c.size, "reduce_scatter") < 0 ||
        em_dist_check_op(out.dtype, op, "reduce_scatter") < 0 || begin(self) < 0)
        return NULL;
    int rc;
    RUN(reduce_scatter_run(&self->c, &out, &in, op));
    return finish(self, rc);
}

/* gather (to_root) and scatter: `big` is root's size * n buffer. */
static int root_exchange(EmComm *c, int kind, Buf *small, char *big, int root) {
    if (agree(c, kind, small->dtype, small->n, root, 0) < 0) return -1;
    size_t per = small->n * em_itemsize((EmDType)small->dtype);
    bool to_root = kind == K_GATHER;
    if (c->rank != root) {
        EmXfer x = to_root ? xsend(root, small->data, per) : xrecv(root, small->data, per);
        return per ? em_dist_run(c, &x, 1, kind_names[kind]) : 0;
    }
    if (to_root) memmove(big + (size_t)root * per, small->data, per);
    else memmove(small->data, big + (size_t)root * per, per);
    if (!per || c->size == 1) return 0;
    EmXfer *x = malloc(sizeof(EmXfer) * c->size);
    if (!x) return -1;
    int k = 0;
    for (int j = 0; j < c->size; j++)
        if (j != root)
            x[k++] = to_root ? xrecv(j, big + (size_t)j * per, per) : xsend(j, big + (size_t)j * per, per);
    int rc = em_dist_run(c, x, k, kind_names[kind]);
    free(x);
    return rc;
}

static PyObject *root_call(CommObject *self, PyObject *args, int kind) {
    PyObject *s, *bo;
    int root;
    Buf small, big = {0};
    const char *what = kind_names[kind];
    if (!PyArg_ParseTuple(args, "OOi", &s, &bo, &root) || get_buf(s, &small, what) < 0 ||
        check_root(self, root) < 0)
        return NULL;
    if (self->c.rank == root) {
        if (bo == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: the root rank needs its list of tensors", what);
            return NULL;
        }
        if (get_buf(bo, &big, what) < 0 || check_sizes(&big, &small, self->c.size, what) < 0) return NULL;
    }
    if (begin(self) < 0) return NULL;
    int rc;
    RUN(root_exchange(&self->c, kind, &small, big.data, root));
    return finish(self, rc);
}

static PyObject *comm_gather(CommObject *self, PyObject *args) { return root_call(self, args, K_GATHER); }
static PyObject *comm_scatter(CommObject *self, PyObject *args) { return root_call(self, args, K_SCATTER); }

static int all_to_all_run(EmComm *c, Buf *out, Buf *in, const int64_t *sc, const int64_t *rc_) {
    int n = c->size, isz = em_itemsize((EmDType)in->dtype), rc = -1, k = 0;
    if (agree(c, K_ALL_TO_ALL, in->dtype, -1, 0, 0) < 0) return -1;
    int64_t *theirs = malloc(sizeof(int64_t) * n);
    EmXfer *x = malloc(sizeof(EmXfer) * 2 * n);
    if (!theirs || !x) goto done;
    /* each sender says how much it sends; each receiver checks it expected that */
    for (int j = 0; j < n; j++)
        if (j != c->rank) {
            x[k++] = xsend(j, (void *)&sc[j], sizeof(int64_t));
            x[k++] = xrecv(j, &theirs[j], sizeof(int64_t));
        }
    if (em_dist_run(c, x, k, "all_to_all") < 0) goto done;
    int ok = 1;
    for (int j = 0; j < n && ok; j++)
        if (j != c->rank && theirs[j] != rc_[j]) {
            snprintf(c->err, sizeof c->err,
                     "all_to_all: rank %d expects %lld elements from rank %d, which sends %lld",
                     c->rank, (long long)rc_[j], j, (long long)theirs[j]);
            ok = 0;
        }
    if (vote(c, ok, "all_to_all") < 0) goto done;
    size_t so = 0, ro = 0;
    k = 0;
    for (int j = 0; j < n; j++) {
        if (j == c->rank) memmove(out->data + ro * isz, in->data + so * isz, sc[j] * isz);
        else {
            if (sc[j]) x[k++] = xsend(j, in->data + so * isz, sc[j] * isz);
            if (rc_[j]) x[k++] = xrecv(j, out->data + ro * isz, rc_[j] * isz);
        }
        so += sc[j];
        ro += rc_[j];
    }
    rc = em_dist_run(c, x, k, "all_to_all");
done:
    free(theirs);
    free(x);
    return rc;
}

static int int64_list(PyObject *o, int n, int64_t *out, const char *what) {
    PyObject *f = PySequence_Fast(o, what);
    if (!f) return -1;
    if (PySequence_Fast_GET_SIZE(f) != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d counts", what, n);
        Py_DECREF(f);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (out[i] < 0 && !PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: negative count %lld", what, (long long)out[i]);
        if (PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
    }
    Py_DECREF(f);
    return 0;
}

static PyObject *comm_all_to_all(CommObject *self, PyObject *args) {
    PyObject *o, *i, *so, *ro;
    Buf out, in;
    int n = self->c.size;
    if (!PyArg_ParseTuple(args, "OOOO", &o, &i, &so, &ro) || get_buf(o, &out, "all_to_all") < 0 ||
        get_buf(i, &in, "all_to_all") < 0)
        return NULL;
    int64_t *counts = malloc(sizeof(int64_t) * 2 * n);
    if (!counts) return PyErr_NoMemory();
    PyObject *res = NULL;
    if (int64_list(so, n, counts, "all_to_all send counts") < 0 ||
        int64_list(ro, n, counts + n, "all_to_all receive counts") < 0)
        goto fail;
    int64_t ts = 0, tr = 0;
    for (int j = 0; j < n; j++) ts += counts[j], tr += counts[n + j];
    if (out.dtype != in.dtype) {
        PyErr_Format(PyExc_RuntimeError, "all_to_all: output and input dtypes differ (%s and %s)",
                     em_dtype_name((EmDType)out.dtype), em_dtype_name((EmDType)in.dtype));
        goto fail;
    }
    if ((size_t)ts != in.n || (size_t)tr != out.n) {
        PyErr_Format(PyExc_RuntimeError,
                     "all_to_all: the split sizes add up to %lld sent and %lld received elements, "
                     "but the tensors have %zu and %zu", (long long)ts, (long long)tr, in.n, out.n);
        goto fail;
    }
    if (begin(self) < 0) goto fail;
    int rc;
    RUN(all_to_all_run(&self->c, &out, &in, counts, counts + n));
    res = finish(self, rc);
fail:
    free(counts);
    return res;
}

/* p2p([(is_send, tensor, peer, tag), ...]): every message at once, each
 * preceded by its header; messages to one peer keep their order. */
static int p2p_run(EmComm *c, int m, int *is_send, int *peer, int64_t *tag, Buf *b, int64_t *hdr,
                   int64_t *got) {
    EmXfer *x = malloc(sizeof(EmXfer) * 2 * (m ? m : 1));
    if (!x) return -1;
    int k = 0;
    for (int i = 0; i < m; i++) {
        int64_t *h = hdr + (size_t)i * HDR;
        h[0] = K_P2P, h[1] = b[i].dtype, h[2] = (int64_t)b[i].n, h[3] = tag[i], h[4] = 0;
        size_t bytes = b[i].n * em_itemsize((EmDType)b[i].dtype);
        if (is_send[i]) {
            x[k++] = xsend(peer[i], h, HDR * sizeof(int64_t));
            if (bytes) x[k++] = xsend(peer[i], b[i].data, bytes);
        } else {
            EmXfer r = xrecv(peer[i], got + (size_t)i * HDR, HDR * sizeof(int64_t));
            r.expect = h;
            x[k++] = r;
            if (bytes) x[k++] = xrecv(peer[i], b[i].data, bytes);
        }
    }
    int rc = em_dist_run(c, x, k, "send/recv");
    free(x);
    return rc;
}

static PyObject *comm_p2p(CommObject *self, PyObject *list) {
    PyObject *f = PySequence_Fast(list, "p2p: expected a list of operations");
    if (!f) return NULL;
    int m = (int)PySequence_Fast_GET_SIZE(f);
    int *is_send = malloc(sizeof(int) * 2 * (m + 1)), *peer = is_send ? is_send + m + 1 : NULL;
    int64_t *tag = malloc(sizeof(int64_t) * (m + 1) * (1 + 2 * HDR));
    Buf *b = malloc(sizeof(Buf) * (m + 1));
    PyObject *res = NULL;
    if (!is_send || !tag || !b) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < m; i++) {
        PyObject *t;
        long long tg;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(f, i), "pOiL", &is_send[i], &t, &peer[i], &tg) ||
            get_buf(t, &b[i], is_send[i] ? "send" : "recv") < 0)
            goto fail;
        if (peer[i] < 0 || peer[i] >= self->c.size || peer[i] == self->c.rank) {
            PyErr_Format(PyExc_ValueError, "%s: invalid peer rank %d (this is rank %d of %d)",
                         is_send[i] ? "send" : "recv", peer[i], self->c.rank, self->c.size);
            goto fail;
        }
        tag[i] = tg;
    }
    if (begin(self) < 0) goto fail;
    int rc;
    int64_t *hdr = tag + m + 1, *got = hdr + (size_t)(m + 1) * HDR;
    RUN(p2p_run(&self->c, m, is_send, peer, tag, b, hdr, got));
    res = finish(self, rc);
fail:
    Py_DECREF(f);
    free(is_send);
    free(tag);
    free(b);
    return res;
}

/* recv_any(tensor, tag) -> the sender's rank: the first peer whose next
 * message is a point-to-point one with this tag (peeked, not consumed; a
 * peer whose next bytes belong to a collective is passed over). */
static int recv_any_run(EmComm *c, Buf *b, int64_t tag, int *src) {
    struct pollfd *p = malloc(sizeof(struct pollfd) * c->size);
    char *skip = calloc(c->size, 1);
    if (!p || !skip) {
        free(p);
        free(skip);
        snprintf(c->err, sizeof c->err, "recv: out of memory");
        return -1;
    }
    double deadline = em_dist_now() + c->timeout;
    int found = -1;
    while (found < 0) {
        int np = 0;
        for (int j = 0; j < c->size; j++)
            if (j != c->rank && !skip[j]) p[np].fd = c->fds[j], p[np].events = POLLIN, p[np++].revents = 0;
        double left = deadline - em_dist_now();
        if (left <= 0 || np == 0) {
            snprintf(c->err, sizeof c->err,
                     "rank %d: recv from any source (tag %lld) timed out after %.1f s", c->rank,
                     (long long)tag, c->timeout);
            break;
        }
        int r = poll(p, np, (int)(left * 1000) + 1), partial = 0;
        for (int k = 0; r > 0 && k < np && found < 0; k++) {
            if (!p[k].revents) continue;
            int j = 0;
            while (c->fds[j] != p[k].fd) j++;
            int64_t h[HDR];
            ssize_t got = recv(p[k].fd, h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
                found = j; /* p2p_run reports the closed connection */
            } else if (got == (ssize_t)sizeof h) {
                if (h[0] == K_P2P && h[3] == tag) found = j;
                else skip[j] = 1;
            } else {
                partial = 1;
            }
        }
        if (found < 0 && partial) usleep(200); /* a header still arriving */
    }
    free(p);
    free(skip);
    if (found < 0) return -1;
    *src = found;
    int is_send = 0;
    int64_t hdr[HDR], got[HDR];
    return p2p_run(c, 1, &is_send, &found, &tag, b, hdr, got);
}

static PyObject *comm_recv_any(CommObject *self, PyObject *args) {
    PyObject *t;
    long long tag;
    Buf b;
    if (!PyArg_ParseTuple(args, "OL", &t, &tag) || get_buf(t, &b, "recv") < 0 || begin(self) < 0)
        return NULL;
    int rc, src = -1;
    int64_t tg = tag;
    RUN(self->c.size == 1 ? (snprintf(self->c.err, sizeof self->c.err, "recv: no other rank"), -1)
                          : recv_any_run(&self->c, &b, tg, &src));
    PyObject *r = finish(self, rc);
    if (!r) return NULL;
    Py_DECREF(r);
    return PyLong_FromLong(src);
}

static PyObject *comm_barrier(CommObject *self, PyObject *u) {
    if (begin(self) < 0) return NULL;
    int rc;
    RUN(agree(&self->c, K_BARRIER, 0, 0, 0, 0));
    return finish(self, rc);
}

static PyObject *comm_get_port(CommObject *self, void *u) { return PyLong_FromLong(self->c.port); }
static PyObject *comm_get_timeout(CommObject *self, void *u) { return PyFloat_FromDouble(self->c.timeout); }
static int comm_set_timeout(CommObject *self, PyObject *v, void *u) {
    double t = v ? PyFloat_AsDouble(v) : -1;
    if (t == -1 && PyErr_Occurred()) return -1;
    if (t <= 0) {
        PyErr_SetString(PyExc_ValueError, "timeout must be positive");
        return -1;
    }
    self->c.timeout = t;
    return 0;
}

static PyMethodDef comm_methods[] = {
    {"connect", (PyCFunction)comm_connect, METH_VARARGS, "connect(hosts, ports): build the mesh."},
    {"close", (PyCFunction)comm_close, METH_NOARGS, "Close every connection."},
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
    {"port", (getter)comm_get_port, NULL, "The listener's port.", NULL},
    {"timeout", (getter)comm_get_timeout, (setter)comm_set_timeout, "Seconds without progress before failing.", NULL},
    {NULL},
};

static PyTypeObject CommType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ember._C._GlooComm",
    .tp_basicsize = sizeof(CommObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_GlooComm(rank, size, timeout, host='0.0.0.0'): ember's CPU transport endpoint.",
    .tp_new = comm_new,
    .tp_init = (initproc)comm_init,
    .tp_dealloc = (destructor)comm_dealloc,
    .tp_methods = comm_methods,
    .tp_getset = comm_getset,
};

int em_init_distributed(PyObject *m) {
    DistError = PyErr_NewExceptionWithDoc("ember._C.DistError", "A distributed-communication error.",
                                          PyExc_RuntimeError, NULL);
    if (!DistError) return -1;
    DistBackendError = PyErr_NewExceptionWithDoc(
        "ember._C.DistBackendError", "A failure inside a process group's backend.", DistError, NULL);
    if (!DistBackendError || PyType_Ready(&CommType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "DistError", DistError) < 0 ||
        PyModule_AddObjectRef(m, "DistBackendError", DistBackendError) < 0 ||
        PyModule_AddObjectRef(m, "_GlooComm", (PyObject *)&CommType) < 0)
        return -1;
    return 0;
}
