/* foreach.c — ops over lists of tensors, and the one parallel region they
 * share with the fused optimizers (DESIGN.md §7: fused kernels where training
 * spends its time).
 *
 *   _foreach_norm(tensors, ord=2, *, dtype=None) -> [0-d tensors]
 *   _foreach_mul_(tensors, other)                 other: number, tensor, or a list of either
 *
 * torch's private ops of the same names, which clip_grad_norm_ runs between
 * backward and the optimizer step. A training step has one gradient per
 * parameter, most of them small (biases, norm weights): op by op, each norm
 * and each scaling was a call, and each large one a fork and a barrier of
 * its own. Here contiguous float32/float64 CPU tensors go through one
 * parallel region per list (em_parallel_chunks); anything else (other
 * dtypes, strided or GPU tensors, other orders, tensors autograd must record)
 * takes the tensor's own op, so the results are always the op-by-op ones.
 *
 * The norm of a tensor is the sum of its chunks' sums of squares, each
 * accumulated in double by the same lane kernel as vector_norm, added in
 * chunk order: the result does not depend on the number of threads.
 */
#include "ember.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#include <math.h>

PyObject *em_arg_tensor_list(EmCall *c, int i, Py_ssize_t *n) {
    const char *name = PyUnicode_AsUTF8(c->def->sig.params[i].name);
    PyObject *seq = PySequence_Fast(c->args[i], "expected a list of tensors");
    if (!seq) return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (*n >= 0 && len != *n) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): Tensor list '%s' must have the same length as 'self' (%zd), but got %zd",
                     c->def->name, name, *n, len);
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < len; k++) {
        if (!em_is_tensor(PySequence_Fast_GET_ITEM(seq, k))) {
            PyErr_Format(PyExc_TypeError, "%s(): expected Tensor as element %zd in '%s', but got %.100s",
                         c->def->name, k, name, Py_TYPE(PySequence_Fast_GET_ITEM(seq, k))->tp_name);
            Py_DECREF(seq);
            return NULL;
        }
    }
    *n = len;
    return seq;
}

/* Chunks are numbered across the arrays in order; a thread gets one
 * contiguous run of them, so each array is split at the same places whatever
 * the thread count. */
void em_parallel_chunks(Py_ssize_t n, const int64_t *sizes, EmChunkFn fn, void *ctx) {
    int64_t total = 0, nchunks = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        total += sizes[k];
        nchunks += (sizes[k] + EM_CHUNK - 1) / EM_CHUNK;
    }
    int nt = total >= 2 * EM_GRAIN && em_num_threads > 1 ? em_num_threads : 1;
    if (nt > nchunks) nt = nchunks > 0 ? (int)nchunks : 1;
    PyThreadState *ts = total >= EM_GRAIN ? PyEval_SaveThread() : NULL;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#ifdef _OPENMP
        int tid = omp_get_thread_num(), T = omp_get_num_threads();
#else
        int tid = 0, T = 1;
#endif
        int64_t b0 = nchunks * tid / T, b1 = nchunks * (tid + 1) / T, b = 0;
        for (Py_ssize_t k = 0; k < n && b < b1; k++)
            for (int64_t lo = 0; lo < sizes[k] && b < b1; lo += EM_CHUNK, b++)
                if (b >= b0) fn(ctx, k, b, lo, lo + EM_CHUNK < sizes[k] ? lo + EM_CHUNK : sizes[k]);
    }
    if (ts) PyEval_RestoreThread(ts);
}

/* A tensor the list kernels take: contiguous float32/float64 on the CPU. */
static bool fast_operand(const EmTensor *t) {
    return em_is_cpu(t) && em_is_contiguous(t) && (t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64);
}

/* ------------------------------------------------------------ norms */

typedef struct {
    EmTensor **t;  /* NULL for the tensors the slow path takes */
    double *sumsq; /* one partial sum per chunk */
} NormJob;

static void sumsq_chunk(void *ctx, Py_ssize_t k, int64_t chunk, int64_t lo, int64_t hi) {
    NormJob *j = ctx;
    EmTensor *t = j->t[k];
    if (!t) return;
    j->sumsq[chunk] = t->dtype == EM_FLOAT32 ? em_cpu_sumsq_f32((const float *)em_data(t) + lo, hi - lo)
                                             : em_cpu_sumsq_f64((const double *)em_data(t) + lo, hi - lo);
}

/* t.norm(ord[, dtype=dtype]): the op-by-op answer */
static PyObject *norm_slow(EmTensor *t, PyObject *ord, PyObject *dtype) {
    PyObject *meth = PyObject_GetAttrString((PyObject *)t, "norm");
    if (!meth) return NULL;
    PyObject *args = PyTuple_Pack(1, ord), *kw = dtype != Py_None ? Py_BuildValue("{sO}", "dtype", dtype) : NULL;
    PyObject *r = args && (dtype == Py_None || kw) ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    Py_DECREF(meth);
    return r;
}

PyObject *em_impl_foreach_norm(EmCall *c) {
    Py_ssize_t n = -1;
    PyObject *seq = em_arg_tensor_list(c, 0, &n), *result = NULL;
    if (!seq) return NULL;
    double ord;
    NormJob job = {NULL, NULL};
    int64_t *sizes = NULL, *first = NULL;
    EM_TRY(em_arg_float(c, 1, &ord) == 0);
    EmDType want;
    int has_dtype = em_arg_dtype(c, 2, &want);
    EM_TRY(has_dtype >= 0);
    job.t = PyMem_Calloc(n ? n : 1, sizeof(EmTensor *));
    sizes = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    first = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    if (!job.t || !sizes || !first) {
        PyErr_NoMemory();
        goto fail;
    }
    int64_t nchunks = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        EmTensor *t = (EmTensor *)PySequence_Fast_GET_ITEM(seq, k);
        bool fast = ord == 2.0 && fast_operand(t) && (has_dtype == 1 || want == (EmDType)t->dtype) &&
                    !(em_grad_enabled() && em_requires_grad(t));
        job.t[k] = fast ? t : NULL;
        sizes[k] = t->numel;
        first[k] = nchunks;
        nchunks += (t->numel + EM_CHUNK - 1) / EM_CHUNK;
    }
    job.sumsq = PyMem_Calloc(nchunks ? nchunks : 1, sizeof(double));
    if (!job.sumsq) {
        PyErr_NoMemory();
        goto fail;
    }
    em_parallel_chunks(n, sizes, sumsq_chunk, &job);

    result = PyList_New(n);
    EM_TRY(result);
    for (Py_ssize_t k = 0; k < n; k++) {
        EmTensor *t = (EmTensor *)PySequence_Fast_GET_ITEM(seq, k);
        PyObject *r;
        if (job.t[k]) {
            double s = 0;
            for (int64_t b = first[k]; b < first[k] + (sizes[k] + EM_CHUNK - 1) / EM_CHUNK; b++) s += job.sumsq[b];
            EmTensor *o = em_empty(0, NULL, (EmDType)t->dtype, em_cpu());
            if (o) em_scalar_store((EmScalar){'f', {.f = sqrt(s)}}, (EmDType)t->dtype, em_data(o));
            r = (PyObject *)o;
        } else {
            r = norm_slow(t, c->args[1], c->args[2]);
        }
        if (!r) {
            Py_CLEAR(result);
            goto fail;
        }
        PyList_SET_ITEM(result, k, r);
    }
fail:
    Py_DECREF(seq);
    PyMem_Free(job.t);
    PyMem_Free(job.sumsq);
    PyMem_Free(sizes);
    PyMem_Free(first);
    return result;
}

/* ------------------------------------------------------------ scaling */

typedef struct {
    EmTensor **t;
    double scale;
} ScaleJob;

static void scale_chunk(void *ctx, Py_ssize_t k, int64_t chunk, int64_t lo, int64_t hi) {
    (void)chunk;
    ScaleJob *j = ctx;
    EmTensor *t = j->t[k];
    if (!t) return;
    if (t->dtype == EM_FLOAT32) {
        /* in the tensor's dtype, as t.mul_(scalar) computes */
        float s = (float)j->scale, *x = (float *)em_data(t) + lo;
        for (int64_t i = 0; i < hi - lo; i++) x[i] *= s;
    } else {
        double s = j->scale, *x = (double *)em_data(t) + lo;
        for (int64_t i = 0; i < hi - lo; i++) x[i] *= s;
    }
}

/* The one scale factor `other` gives every tensor, when it is a Python
 * float/int or a one-element floating CPU tensor: 1 and *scale set; 0 when
 * the per-tensor path must take it. */
static int single_scale(PyObject *other, double *scale) {
    if (PyFloat_Check(other) || PyLong_Check(other)) { /* bools too, as 1 and 0 */
        *scale = PyFloat_AsDouble(other);
        return !PyErr_Occurred();
    }
    if (em_is_tensor(other)) {
        EmTensor *s = (EmTensor *)other;
        if (!em_is_cpu(s) || s->ndim != 0 || !em_is_float((EmDType)s->dtype) ||
            (em_grad_enabled() && em_requires_grad(s)))
            return 0;
        *scale = em_scalar_to_double(em_scalar_load(em_data(s), (EmDType)s->dtype));
        return 1;
    }
    return 0;
}

PyObject *em_impl_foreach_mul_(EmCall *c) {
    Py_ssize_t n = -1;
    PyObject *seq = em_arg_tensor_list(c, 0, &n), *other = c->args[1], *others = NULL, *result = NULL;
    if (!seq) return NULL;
    ScaleJob job = {NULL, 0};
    int64_t *sizes = NULL;
    int single = single_scale(other, &job.scale);
    EM_TRY(!PyErr_Occurred());
    if (!single && !em_is_tensor(other)) { /* a list: one factor per tensor */
        others = PySequence_Fast(other, "_foreach_mul_(): expected a number, a Tensor or a list of them");
        EM_TRY(others);
        EM_CHECK(PySequence_Fast_GET_SIZE(others) == n, PyExc_RuntimeError,
                 "_foreach_mul_(): Tensor list 'self' has %zd tensors but 'other' has %zd", n,
                 PySequence_Fast_GET_SIZE(others));
    }
    job.t = PyMem_Calloc(n ? n : 1, sizeof(EmTensor *));
    sizes = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    if (!job.t || !sizes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        EmTensor *t = (EmTensor *)PySequence_Fast_GET_ITEM(seq, k);
        sizes[k] = t->numel;
        /* what an in-place op checks first (inference tensors, leaves that
         * require grad, recorded writes) is the op's own business */
        if (single && fast_operand(t) && !em_requires_grad(t) && !t->is_inference) job.t[k] = t;
        /* a storage twice in the list (the same tensor, or views of one
         * buffer): the later ones after the region, one at a time, so that no
         * two threads scale the same elements at once */
        for (Py_ssize_t j = 0; j < k && job.t[k]; j++)
            if (job.t[j] && job.t[j]->storage == t->storage) job.t[k] = NULL;
    }
    em_parallel_chunks(n, sizes, scale_chunk, &job);
    for (Py_ssize_t k = 0; k < n; k++) {
        EmTensor *t = (EmTensor *)PySequence_Fast_GET_ITEM(seq, k);
        if (job.t[k]) {
            em_bump_version(t); /* Note [when versions change] */
            continue;
        }
        PyObject *f = others ? PySequence_Fast_GET_ITEM(others, k) : other;
        PyObject *r = PyObject_CallMethod((PyObject *)t, "mul_", "O", f);
        EM_TRY(r);
        Py_DECREF(r);
    }
    result = Py_NewRef(Py_None);
fail:
    Py_DECREF(seq);
    Py_XDECREF(others);
    PyMem_Free(job.t);
    PyMem_Free(sizes);
    return result;
}
