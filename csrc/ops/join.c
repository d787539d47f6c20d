/* join.c — ops that join, split and rearrange tensors: cat / stack and the
 * h/v/d/column stacks, tensor_split, repeat / tile / repeat_interleave,
 * flip / roll / rot90, the views movedim, broadcast_to, broadcast_tensors
 * and meshgrid, diff, and one_hot (nn.functional).
 *
 * Copies go through em_copy_ (the elementwise iterator: casts, strides,
 * threads) wherever the result can be described as "this view of the output
 * takes that view of the input": cat copies each input into a narrowed view
 * of the output, flip copies from a negative-stride alias of the input,
 * repeat from a stride-0 alias into a split view of the output. Only
 * repeat_interleave and one_hot have loops of their own.
 *
 * On a GPU the same code runs: em_copy_ launches the strided copy, results
 * are allocated on the inputs' device, and repeat_interleave with per-index
 * counts calls the backend's kernel (Note [CUDA shape kernels]). */
#include "../ember.h"
#include "index_gpu.h"
#include "fused_gpu.h"
#include "device_slot.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------- helpers */

/* torch's error for tensors of one call on two devices. */
static int device_mismatch(const EmTensor *a, const EmTensor *b) {
    char x[32], y[32];
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                 em_device_str(em_device(a), x, sizeof x), em_device_str(em_device(b), y, sizeof y));
    return -1;
}

/* A tuple of the tensors in a list/tuple argument (new reference); TypeError
 * worded as torch's for anything else, RuntimeError for two devices. */
static PyObject *tensor_tuple(PyObject *seq, const char *fname, const char *argname, int pos) {
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' (position %d) must be tuple of Tensors, not %.100s",
                     fname, argname, pos + 1, Py_TYPE(seq)->tp_name);
        return NULL;
    }
    PyObject *tup = PySequence_Tuple(seq); /* holds the tensors while we work */
    if (!tup) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        PyObject *o = PyTuple_GET_ITEM(tup, i);
        if (!em_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "expected Tensor as element %zd in argument %d, but got %.100s", i,
                         pos, Py_TYPE(o)->tp_name);
            Py_DECREF(tup);
            return NULL;
        }
        EmTensor *first = (EmTensor *)PyTuple_GET_ITEM(tup, 0);
        if (!em_device_eq(em_device((EmTensor *)o), em_device(first))) {
            device_mismatch(first, (EmTensor *)o);
            Py_DECREF(tup);
            return NULL;
        }
    }
    return tup;
}
#define TUP_TENSORS(tup) ((EmTensor *const *)&PyTuple_GET_ITEM(tup, 0))

static int arg_dim(EmCall *c, int i, int ndim, int *dim) {
    int64_t d;
    if (em_arg_int(c, i, &d) < 0) return -1;
    return em_wrap_dim(d, ndim, dim);
}

/* A same-dtype alias of t's storage with other geometry: an internal
 * operand for em_copy_ (never returned to Python), so it may have negative
 * or zero strides. */
static EmTensor *alias(EmTensor *t, int ndim, const int64_t *sizes, const int64_t *strides,
                       int64_t offset) {
    return em_tensor_alloc(&EmTensorType, t->storage, offset, ndim, sizes, strides, (EmDType)t->dtype);
}

/* Byte ranges [lo, hi) of two tensors on one storage intersect. */
static bool overlaps(const EmTensor *a, const EmTensor *b) {
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0) return false;
    int64_t alo = a->offset * em_itemsize(a->dtype), blo = b->offset * em_itemsize(b->dtype);
    int64_t ahi = alo, bhi = blo;
    for (int d = 0; d < a->ndim; d++) ahi += (a->sizes[d] - 1) * a->strides[d] * em_itemsize(a->dtype);
    for (int d = 0; d < b->ndim; d++) bhi += (b->sizes[d] - 1) * b->strides[d] * em_itemsize(b->dtype);
    return alo <= bhi + em_itemsize(b->dtype) - 1 && blo <= ahi + em_itemsize(a->dtype) - 1;
}

static int overlap_error(void) {
    PyErr_SetString(PyExc_RuntimeError,
                    "unsupported operation: some elements of the input tensor and the written-to tensor "
                    "refer to a single memory location. Please clone() the tensor before performing the "
                    "operation.");
    return -1;
}

/* out= for ops that compute a fresh result r: check the cast, resize out,
 * copy. Steals r; returns out (new reference) or r when there is no out. */
static PyObject *finish_out(EmCall *c, EmTensor *r) {
    EmTensor *out = c->out;
    if (!r || !out) return (PyObject *)r;
    if (!em_can_cast((EmDType)r->dtype, (EmDType)out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "result type %s can't be cast to the desired output type %s",
                     em_dtype_name((EmDType)r->dtype), em_dtype_name((EmDType)out->dtype));
        goto fail;
    }
    if (!em_device_eq(em_device(out), em_device(r))) {
        device_mismatch(r, out);
        goto fail;
    }
    bool same = out->ndim == r->ndim && !memcmp(out->sizes, r->sizes, r->ndim * sizeof(int64_t));
    if (!same && em_tensor_resize(out, r->ndim, r->sizes, true) < 0) goto fail;
    if (em_copy_(out, (PyObject *)r) < 0) goto fail;
    Py_DECREF(r);
    return Py_NewRef(out);
fail:
    Py_DECREF(r);
    return NULL;
}

/* ------------------------------------------------------------------ cat */

static bool legacy_empty(const EmTensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

/* Note [memory format]: torch lays a cat out as all its inputs' strides
 * suggest (channels-last when every one is), contiguous otherwise. */
static EmMemoryFormat cat_format(int n, EmTensor *const *ts) {
    EmMemoryFormat f = em_suggest_memory_format(ts[0]);
    for (int i = 1; i < n && f != EM_CONTIGUOUS_FORMAT; i++)
        if (em_suggest_memory_format(ts[i]) != f) f = EM_CONTIGUOUS_FORMAT;
    return f;
}

EmTensor *em_cat(int n, EmTensor *const *ts, int64_t dim64, EmTensor *out, const char *name) {
    EM_CHECK(n > 0, PyExc_ValueError, "torch.%s(): expected a non-empty list of Tensors", name);
    EmDType dt = (EmDType)ts[0]->dtype;
    const EmTensor *ref = NULL;
    for (int i = 0; i < n; i++) {
        EM_CHECK(ts[i]->ndim > 0, PyExc_RuntimeError,
                 "zero-dimensional tensor (at position %d) cannot be concatenated", i);
        dt = em_promote_types(dt, (EmDType)ts[i]->dtype);
        if (dt == EM_DTYPE_ERROR) return NULL;
        if (!ref && !legacy_empty(ts[i])) ref = ts[i];
    }
    int64_t shape[EM_MAX_DIMS];
    int ndim = 1, dim = 0;
    shape[0] = 0;
    if (ref) { /* inputs that are not legacy empty tensors decide the shape */
        if (em_wrap_dim(dim64, ref->ndim, &dim) < 0) return NULL;
        ndim = ref->ndim;
        memcpy(shape, ref->sizes, ndim * sizeof(int64_t));
        shape[dim] = 0;
        for (int i = 0; i < n; i++) {
            const EmTensor *t = ts[i];
            if (legacy_empty(t)) continue;
            EM_CHECK(t->ndim == ndim, PyExc_RuntimeError,
                     "Tensors must have same number of dimensions: got %d and %d", ndim, t->ndim);
            for (int d = 0; d < ndim; d++)
                EM_CHECK(d == dim || t->sizes[d] == ref->sizes[d], PyExc_RuntimeError,
                         "Sizes of tensors must match except in dimension %d. Expected size %lld but got "
                         "size %lld for tensor number %d in the list.",
                         dim, (long long)ref->sizes[d], (long long)t->sizes[d], i);
            EM_CHECK(!__builtin_add_overflow(shape[dim], t->sizes[dim], &shape[dim]), PyExc_RuntimeError,
                     "%s: the size of the result along dim %d overflows", name, dim);
        }
    }
    EmTensor *r;
    if (out) {
        EM_CHECK(em_can_cast(dt, (EmDType)out->dtype), PyExc_TypeError,
                 "torch.cat(): input types can't be cast to the desired output type %s",
                 em_dtype_name((EmDType)out->dtype));
        if (!em_device_eq(em_device(out), em_device(ts[0]))) return device_mismatch(ts[0], out), NULL;
        bool same = out->ndim == ndim && !memcmp(out->sizes, shape, ndim * sizeof(int64_t));
        if (!same && em_tensor_resize(out, ndim, shape, true) < 0) return NULL;
        for (int i = 0; i < n; i++)
            if (overlaps(out, ts[i])) {
                overlap_error();
                return NULL;
            }
        r = (EmTensor *)Py_NewRef(out);
    } else {
        r = em_empty_in_format(ndim, shape, dt, em_device(ts[0]), cat_format(n, ts));
        if (!r) return NULL;
    }
    int64_t off = 0;
    for (int i = 0; i < n && r->numel > 0; i++) {
        if (legacy_empty(ts[i]) || ts[i]->sizes[dim] == 0) continue;
        EmTensor *v = em_narrow(r, dim, off, ts[i]->sizes[dim]);
        int rc = v ? em_copy_(v, (PyObject *)ts[i]) : -1;
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(r);
            return NULL;
        }
        off += ts[i]->sizes[dim];
    }
    return r;
fail:
    return NULL;
}

PyObject *em_impl_cat(EmCall *c) {
    const char *name = c->def->name;
    PyObject *tup = tensor_tuple(c->args[0], name, "tensors", 0);
    if (!tup) return NULL;
    int64_t dim;
    EmTensor *r = NULL;
    if (em_arg_int(c, 1, &dim) == 0)
        r = em_cat((int)PyTuple_GET_SIZE(tup), TUP_TENSORS(tup), dim, c->out, name);
    Py_DECREF(tup);
    return (PyObject *)r;
}

/* Apply f (a view maker) to each tensor, then cat. */
typedef EmTensor *(*ViewFn)(EmTensor *t, int arg);

static EmTensor *cat_views(EmCall *c, PyObject *tup, ViewFn f, int arg, int64_t dim) {
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    EmTensor **vs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(EmTensor *));
    EmTensor *r = NULL;
    if (!vs) return (EmTensor *)PyErr_NoMemory();
    Py_ssize_t i = 0;
    for (; i < n; i++)
        if (!(vs[i] = f((EmTensor *)PyTuple_GET_ITEM(tup, i), arg))) break;
    if (i == n) r = em_cat((int)n, vs, dim, c->out, "cat");
    for (Py_ssize_t j = 0; j < i; j++) Py_DECREF(vs[j]);
    PyMem_Free(vs);
    return r;
}

static EmTensor *unsqueeze_at(EmTensor *t, int dim) { return em_unsqueeze(t, dim); }

/* stack(ts, dim) for dim < ndim: a new tensor laid out as cat(ts, dim) with
 * that dim split into (n, size), each input copied into its slice. */
static EmTensor *stack_new(Py_ssize_t n, EmTensor *const *ts, int dim) {
    EmTensor *t0 = ts[0];
    EmDType dt = (EmDType)t0->dtype;
    for (Py_ssize_t i = 1; i < n; i++) {
        dt = em_promote_types(dt, (EmDType)ts[i]->dtype);
        if (dt == EM_DTYPE_ERROR) return NULL;
    }
    int nd = t0->ndim;
    int64_t cshape[EM_MAX_DIMS], cstrides[EM_MAX_DIMS], shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    memcpy(cshape, t0->sizes, nd * sizeof(int64_t));
    EM_CHECK(!__builtin_mul_overflow(cshape[dim], (int64_t)n, &cshape[dim]), PyExc_RuntimeError,
             "stack: the size of the result along dim %d overflows", dim);
    em_memory_format_strides(cat_format((int)n, ts), nd, cshape, cstrides); /* a suggested format fits the rank */
    for (int d = 0, k = 0; d < nd; d++) {
        if (d == dim) {
            shape[k] = n;
            strides[k++] = t0->sizes[d] * cstrides[d];
        }
        shape[k] = t0->sizes[d];
        strides[k++] = cstrides[d];
    }
    EmTensor *r = em_empty_strided(nd + 1, shape, strides, dt, em_device(t0));
    for (Py_ssize_t i = 0; r && i < n; i++) {
        EmTensor *v = em_select(r, dim, i);
        if (!v || em_copy_(v, (PyObject *)ts[i]) < 0) Py_CLEAR(r);
        Py_XDECREF(v);
    }
    return r;
fail:
    return NULL;
}

PyObject *em_impl_stack(EmCall *c) {
    PyObject *tup = tensor_tuple(c->args[0], "stack", "tensors", 0);
    if (!tup) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    EmTensor *r = NULL, *t0;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int dim;
    EM_CHECK(n > 0, PyExc_RuntimeError, "stack expects a non-empty TensorList");
    t0 = (EmTensor *)PyTuple_GET_ITEM(tup, 0);
    for (Py_ssize_t i = 1; i < n; i++) {
        EmTensor *t = (EmTensor *)PyTuple_GET_ITEM(tup, i);
        EM_CHECK(t->ndim == t0->ndim && !memcmp(t->sizes, t0->sizes, t0->ndim * sizeof(int64_t)),
                 PyExc_RuntimeError, "stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %zd",
                 em_shape_str(t0->ndim, t0->sizes, a, sizeof a), em_shape_str(t->ndim, t->sizes, b, sizeof b), i);
    }
    if (arg_dim(c, 1, t0->ndim + 1, &dim) < 0) goto fail;
    if (c->out || dim == t0->ndim) {
        r = cat_views(c, tup, unsqueeze_at, dim, dim);
    } else { /* torch lays it out as cat(tensors, dim) viewed with dim split in two */
        r = stack_new(n, TUP_TENSORS(tup), dim);
    }
fail:
    Py_DECREF(tup);
    return (PyObject *)r;
}

/* atleast_Nd as torch defines them for hstack / vstack / dstack */
static EmTensor *atleast(EmTensor *t, int nd) {
    int64_t s[3];
    if (t->ndim >= nd) return em_view_of(t, t->ndim, t->sizes, t->strides, t->offset);
    if (t->ndim == 0) {
        s[0] = s[1] = s[2] = 1;
        return em_reshape(t, nd, s);
    }
    if (t->ndim == 1) { /* (n) -> (1, n) or (1, n, 1) */
        s[0] = 1;
        s[1] = t->sizes[0];
        s[2] = 1;
        return em_reshape(t, nd, s);
    }
    return em_unsqueeze(t, 2); /* (m, n) -> (m, n, 1) */
}

static EmTensor *column(EmTensor *t, int unused) {
    (void)unused;
    if (t->ndim > 1) return em_view_of(t, t->ndim, t->sizes, t->strides, t->offset);
    int64_t s[2] = {t->numel, 1};
    return em_reshape(t, 2, s);
}

static PyObject *stack_family(EmCall *c, int nd, int64_t dim) {
    const char *name = c->def->name;
    PyObject *tup = tensor_tuple(c->args[0], name, "tensors", 0);
    if (!tup) return NULL;
    EmTensor *r = NULL;
    EM_CHECK(PyTuple_GET_SIZE(tup) > 0, PyExc_RuntimeError, "%s expects a non-empty TensorList", name);
    if (nd == 1) { /* hstack: along dim 0 for 1-D inputs, else dim 1 */
        EmTensor *t0 = (EmTensor *)PyTuple_GET_ITEM(tup, 0);
        dim = t0->ndim <= 1 ? 0 : 1;
    }
    r = nd == 0 ? cat_views(c, tup, column, 0, 1) : cat_views(c, tup, atleast, nd, dim);
fail:
    Py_DECREF(tup);
    return (PyObject *)r;
}
PyObject *em_impl_hstack(EmCall *c) { return stack_family(c, 1, 0); }
PyObject *em_impl_vstack(EmCall *c) { return stack_family(c, 2, 0); }
PyObject *em_impl_dstack(EmCall *c) { return stack_family(c, 3, 2); }
PyObject *em_impl_column_stack(EmCall *c) { return stack_family(c, 0, 1); }

/* --------------------------------------------------------- tensor_split */

PyObject *em_impl_tensor_split(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    PyObject *arg = c->args[1], *tup = NULL;
    int64_t *idx = NULL, sections = -1;
    Py_ssize_t nidx = 0;
    int dim;
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError,
             "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims");
    if (arg_dim(c, 2, t->ndim, &dim) < 0) return NULL;
    if (em_is_tensor(arg)) {
        EmTensor *it = (EmTensor *)arg;
        char where[32];
        EM_CHECK(em_is_cpu(it), PyExc_RuntimeError, /* not dispatch: its values are read on the host */
                 "tensor_split expected tensor_indices_or_sections to be on cpu, but it's on %s",
                 em_device_str(em_device(it), where, sizeof where));
        EM_CHECK(it->dtype == EM_INT64, PyExc_RuntimeError,
                 "tensor_split expected tensor_indices_or_sections to have dtype of long, but got %s",
                 em_dtype_name((EmDType)it->dtype));
        EM_CHECK(it->ndim <= 1, PyExc_RuntimeError,
                 "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                 "one-dimensional tensor, but got a tensor with %d dims", it->ndim);
        if (it->ndim == 0) {
            memcpy(&sections, em_data(it), 8);
        } else {
            nidx = it->sizes[0];
            idx = PyMem_Malloc((size_t)(nidx ? nidx : 1) * sizeof(int64_t));
            if (!idx) return PyErr_NoMemory();
            for (Py_ssize_t i = 0; i < nidx; i++) memcpy(&idx[i], em_data(it) + i * it->strides[0] * 8, 8);
        }
    } else if (PyLong_Check(arg) && !PyBool_Check(arg)) {
        sections = PyLong_AsLongLong(arg);
        if (sections == -1 && PyErr_Occurred()) return NULL;
    } else if (PyList_Check(arg) || PyTuple_Check(arg)) {
        nidx = PySequence_Fast_GET_SIZE(arg);
        idx = PyMem_Malloc((size_t)(nidx ? nidx : 1) * sizeof(int64_t));
        if (!idx) return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < nidx; i++) {
            PyObject *o = PySequence_Fast_ITEMS(arg)[i];
            EM_CHECK(PyLong_Check(o) && !PyBool_Check(o), PyExc_TypeError,
                     "tensor_split(): argument 'indices' must be tuple of ints, but found element of type "
                     "%.100s at pos %zd", Py_TYPE(o)->tp_name, i);
            idx[i] = PyLong_AsLongLong(o);
            if (idx[i] == -1 && PyErr_Occurred()) goto fail;
        }
    } else {
        EM_CHECK(0, PyExc_TypeError,
                 "tensor_split(): argument 'indices_or_sections' must be int, tuple of ints or Tensor, not %.100s",
                 Py_TYPE(arg)->tp_name);
    }
    int64_t size = t->sizes[dim];
    if (!idx) { /* sections: the first size % n pieces get one extra */
        EM_CHECK(sections > 0, PyExc_RuntimeError, "number of sections must be larger than 0, got %lld",
                 (long long)sections);
        EM_CHECK(sections <= PY_SSIZE_T_MAX / 2, PyExc_RuntimeError, "too many sections: %lld",
                 (long long)sections);
        tup = PyTuple_New((Py_ssize_t)sections);
        if (!tup) goto fail;
        int64_t q = size / sections, rem = size % sections, start = 0;
        for (int64_t i = 0; i < sections; i++) {
            int64_t len = q + (i < rem);
            EmTensor *p = em_narrow(t, dim, start, len);
            if (!p) goto fail;
            PyTuple_SET_ITEM(tup, i, (PyObject *)p);
            start += len;
        }
    } else { /* indices: [0, i0), [i0, i1), ..., [ik, size), wrapped and clamped */
        tup = PyTuple_New(nidx + 1);
        if (!tup) goto fail;
        int64_t start = 0;
        for (Py_ssize_t i = 0; i <= nidx; i++) {
            int64_t end = size;
            if (i < nidx) {
                end = idx[i];
                if (end < 0) end = end < -size ? 0 : end + size;
                if (end > size) end = size;
            }
            int64_t len = end > start ? end - start : 0;
            EmTensor *p = em_narrow(t, dim, start, len);
            if (!p) goto fail;
            PyTuple_SET_ITEM(tup, i, (PyObject *)p);
            start = end; /* the next piece starts at this index even if it is smaller */
        }
    }
    PyMem_Free(idx);
    return tup;
fail:
    Py_XDECREF(tup);
    PyMem_Free(idx);
    return NULL;
}

/* ------------------------------------------------------ repeat / tile */

/* out = input repeated reps[d] times along each dim (reps may have more dims
 * than the input: it gains leading dims). The output, viewed as
 * (r0, s0, r1, s1, ...), takes a stride-0 alias of the input. */
static EmTensor *repeat_impl(EmTensor *t, int nr, const int64_t *reps) {
    int64_t shape[EM_MAX_DIMS];
    EM_CHECK(nr >= t->ndim, PyExc_RuntimeError,
             "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
    int lead = nr - t->ndim;
    for (int d = 0; d < nr; d++) {
        int64_t s = d < lead ? 1 : t->sizes[d - lead];
        EM_CHECK(!__builtin_mul_overflow(reps[d], s, &shape[d]), PyExc_RuntimeError,
                 "repeat: the size of dim %d (%lld * %lld) overflows", d, (long long)reps[d], (long long)s);
    }
    EmTensor *r = em_empty(nr, shape, (EmDType)t->dtype, em_device(t));
    if (!r || r->numel == 0) return r;
    /* split each dim with both a repeat and a size > 1 into (repeat, size) */
    int64_t osz[EM_MAX_DIMS], ost[EM_MAX_DIMS], isz[EM_MAX_DIMS], ist[EM_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < nr; d++) {
        int64_t s = d < lead ? 1 : t->sizes[d - lead], st = d < lead ? 0 : t->strides[d - lead];
        if (reps[d] != 1) {
            EM_CHECK(k < EM_MAX_DIMS, PyExc_RuntimeError, "repeat: too many dimensions");
            osz[k] = reps[d];
            ost[k] = r->strides[d] * s;
            isz[k] = reps[d];
            ist[k++] = 0;
        }
        if (s != 1) {
            EM_CHECK(k < EM_MAX_DIMS, PyExc_RuntimeError, "repeat: too many dimensions");
            osz[k] = s;
            ost[k] = r->strides[d];
            isz[k] = s;
            ist[k++] = st;
        }
    }
    EmTensor *dst = alias(r, k, osz, ost, 0), *src = dst ? alias(t, k, isz, ist, t->offset) : NULL;
    int rc = src ? em_copy_(dst, (PyObject *)src) : -1;
    Py_XDECREF(dst);
    Py_XDECREF(src);
    if (rc < 0) Py_CLEAR(r);
    return r;
fail:
    return NULL;
}

PyObject *em_impl_repeat(EmCall *c) {
    int n;
    int64_t reps[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, reps) < 0) return NULL;
    return (PyObject *)repeat_impl(em_arg_tensor(c, 0), n, reps);
}

PyObject *em_impl_tile(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int n;
    int64_t dims[EM_MAX_DIMS], reps[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, dims) < 0) return NULL;
    int lead = t->ndim > n ? t->ndim - n : 0; /* fewer reps than dims: leading 1s */
    for (int i = 0; i < lead; i++) reps[i] = 1;
    memcpy(reps + lead, dims, n * sizeof(int64_t));
    return (PyObject *)repeat_impl(t, n + lead, reps);
}

/* ---------------------------------------------------- repeat_interleave */

/* out[.., cum[i] + j, ..] = in[.., i, ..] for j < rep[i]; `in` contiguous
 * (outer, n, inner) of itemsize isz, out (outer, total, inner). */
static void interleave_copy(const char *in, char *out, int64_t outer, int64_t n, int64_t inner_bytes,
                            const int64_t *rep, const int64_t *cum, int64_t r, int64_t total) {
#ifdef _OPENMP
#pragma omp parallel for collapse(2) schedule(static) if (outer * n > 1 && outer * total * inner_bytes >= 4 * EM_GRAIN && em_num_threads > 1) num_threads(em_num_threads)
#endif
    for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < n; i++) {
        const char *s = in + (o * n + i) * inner_bytes;
        int64_t cnt = rep ? rep[i] : r; /* rep NULL: r for every index */
        char *d = out + (o * total + (rep ? cum[i] : i * r)) * inner_bytes;
#define FILL(T)                                                                \
    {                                                                          \
        T v;                                                                   \
        memcpy(&v, s, sizeof v);                                               \
        for (int64_t j = 0; j < cnt; j++) memcpy(d + j * sizeof v, &v, sizeof v);  \
        continue;                                                              \
    }
        switch (inner_bytes) { /* one element per index: typed stores */
        case 1: FILL(uint8_t)
        case 2: FILL(uint16_t)
        case 4: FILL(uint32_t)
        case 8: FILL(uint64_t)
        default: break;
        }
#undef FILL
        for (int64_t j = 0; j < cnt; j++) memcpy(d + j * inner_bytes, s, (size_t)inner_bytes);
    }
}

/* One repeat count r for every index along dim: the output, viewed with dim
 * split into (n, r), takes an alias of t with a stride-0 r dim. */
static EmTensor *interleave_uniform(EmTensor *t, int dim, int64_t r, int64_t total) {
    int64_t shape[EM_MAX_DIMS], dsz[EM_MAX_DIMS], dst[EM_MAX_DIMS], ssz[EM_MAX_DIMS], sst[EM_MAX_DIMS];
    memcpy(shape, t->sizes, t->ndim * sizeof(int64_t));
    shape[dim] = total;
    EmTensor *out = em_empty(t->ndim, shape, (EmDType)t->dtype, em_device(t));
    if (!out || out->numel == 0) return out;
    if (t->ndim >= EM_MAX_DIMS) {
        PyErr_SetString(PyExc_RuntimeError, "repeat_interleave: too many dimensions");
        Py_DECREF(out);
        return NULL;
    }
    for (int d = 0, k = 0; d < t->ndim; d++, k++) {
        dsz[k] = ssz[k] = t->sizes[d];
        dst[k] = out->strides[d] * (d == dim ? r : 1);
        sst[k] = t->strides[d];
        if (d == dim) { /* the repeat dim after it */
            k++;
            dsz[k] = ssz[k] = r;
            dst[k] = out->strides[d];
            sst[k] = 0;
        }
    }
    EmTensor *dv = alias(out, t->ndim + 1, dsz, dst, 0), *sv = dv ? alias(t, t->ndim + 1, ssz, sst, t->offset) : NULL;
    int rc = sv ? em_copy_(dv, (PyObject *)sv) : -1;
    Py_XDECREF(dv);
    Py_XDECREF(sv);
    if (rc < 0) Py_CLEAR(out);
    return out;
}

/* repeats as int64 values of a 0-d or 1-D integer tensor (PyMem array).
 * GPU repeats are read on the host: the output's size depends on them. */
static int64_t *read_repeats(EmTensor *r, int64_t *n) {
    EM_CHECK(em_is_int((EmDType)r->dtype), PyExc_NotImplementedError,
             "\"repeat_interleave_cpu\" not implemented for '%s'", em_dtype_name((EmDType)r->dtype));
    EmTensor *h = em_is_cpu(r) ? (EmTensor *)Py_NewRef(r) : em_to_device(r, em_cpu(), false);
    if (!h) return NULL;
    *n = h->ndim ? h->sizes[0] : 1;
    int64_t *v = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof(int64_t));
    if (!v) {
        Py_DECREF(h);
        return (int64_t *)PyErr_NoMemory();
    }
    int isz = em_itemsize(h->dtype);
    for (int64_t i = 0; i < *n; i++) {
        EmScalar s = em_scalar_load(em_data(h) + (h->ndim ? i * h->strides[0] : 0) * isz, (EmDType)h->dtype);
        v[i] = s.v.i;
    }
    Py_DECREF(h);
    return v;
fail:
    return NULL;
}

/* The GPU form of interleave_copy: out, with dim of size total, from src
 * (contiguous, on a GPU) whose index i along dim is repeated
 * cum[i + 1] - cum[i] times (n + 1 running totals, made on the host). */
static EmTensor *interleave_gpu(EmTensor *src, int dim, const int64_t *cum, int64_t n, int64_t total) {
    int64_t shape[EM_MAX_DIMS], outer = 1, inner = 1, nc = n + 1;
    EmDevice dev = em_device(src);
    memcpy(shape, src->sizes, src->ndim * sizeof(int64_t));
    shape[dim] = total;
    for (int d = 0; d < dim; d++) outer *= src->sizes[d];
    for (int d = dim + 1; d < src->ndim; d++) inner *= src->sizes[d];
    EmTensor *out = em_empty(src->ndim, shape, (EmDType)src->dtype, dev);
    if (!out || out->numel == 0) return out;
    EmTensor *host = em_empty(1, &nc, EM_INT64, em_cpu()), *dcum = NULL;
    if (host) {
        memcpy(em_data(host), cum, (size_t)nc * sizeof(int64_t));
        dcum = em_to_device(host, dev, false);
    }
    if (!dcum || em_cuda->repeat_interleave(dev.index, src->dtype, em_data(out), em_data(src), outer, n, inner,
                                            (const int64_t *)em_data(dcum), total) < 0) {
        if (dcum) em_cuda_error("repeat_interleave");
        Py_CLEAR(out);
    }
    Py_XDECREF(host);
    Py_XDECREF(dcum);
    return out;
}

/* Note [meta device]: meta repeats have no values, so the result's size is
 * output_size, which torch then requires. -1 with its RuntimeError. */
static int meta_repeats_size(EmCall *c, int64_t *total) {
    if (!em_arg_is_none(c, 3)) return em_arg_int(c, 3, total);
    PyErr_SetString(PyExc_RuntimeError, "cannot repeat_interleave a meta tensor without output_size");
    return -1;
}

/* torch.repeat_interleave(repeats): indices i repeated repeats[i] times */
static PyObject *interleave_indices(EmTensor *rt, EmCall *c, bool gpu) {
    int64_t n, *rep = NULL, total = 0, osize;
    EmTensor *r = NULL;
    EM_CHECK(rt->ndim == 1, PyExc_RuntimeError, "repeat_interleave only accept 1D vector as repeat");
    if (em_is_meta(rt))
        return meta_repeats_size(c, &total) < 0 ? NULL : (PyObject *)em_empty(1, &total, (EmDType)rt->dtype, em_meta());
    if (gpu && (!em_cuda->repeat_interleave || !em_cuda->arange_fill))
        return em_fused_no_kernel("repeat_interleave");
    if (!(rep = read_repeats(rt, &n))) return NULL;
    for (int64_t i = 0; i < n; i++) {
        EM_CHECK(rep[i] >= 0, PyExc_RuntimeError, "repeats can not be negative");
        EM_CHECK(!__builtin_add_overflow(total, rep[i], &total), PyExc_RuntimeError,
                 "repeat_interleave: the total of the repeats overflows");
    }
    if (!em_arg_is_none(c, 3)) {
        if (em_arg_int(c, 3, &osize) < 0) goto fail;
        EM_CHECK(osize == total, PyExc_RuntimeError, "allocated size does not match required size");
    }
    if (gpu) { /* gather from 0..n-1 made on the device */
        int64_t *cum = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
        if (!cum) {
            PyErr_NoMemory();
            goto fail;
        }
        cum[0] = 0;
        for (int64_t i = 0; i < n; i++) cum[i + 1] = cum[i] + rep[i];
        EmTensor *idx = em_empty(1, &n, (EmDType)rt->dtype, em_device(rt));
        if (idx && em_cuda->arange_fill(em_device(rt).index, idx->dtype, em_data(idx), n, 1, true, 0, 1, 0, 0) < 0) {
            em_cuda_error("repeat_interleave");
            Py_CLEAR(idx);
        }
        if (idx) r = interleave_gpu(idx, 0, cum, n, total);
        Py_XDECREF(idx);
        PyMem_Free(cum);
        goto fail;
    }
    r = em_empty(1, &total, (EmDType)rt->dtype, em_cpu());
    if (!r) goto fail;
    int isz = em_itemsize(r->dtype);
    for (int64_t i = 0, k = 0; i < n; i++)
        for (int64_t j = 0; j < rep[i]; j++, k++) {
            EmScalar s = {'i', {i}};
            em_scalar_store(s, (EmDType)r->dtype, em_data(r) + k * isz);
        }
fail:
    PyMem_Free(rep);
    return (PyObject *)r;
}

static PyObject *repeat_interleave_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *src = NULL, *r = NULL, *rt = NULL;
    PyObject *reps = c->args[1];
    int64_t nrep = 1, one, *rep = &one, *cum = NULL, total = 0, osize;
    int dim = 0;
    if (reps == Py_None || !t) { /* repeat_interleave(repeats): the indices form */
        EM_CHECK(t || em_is_tensor(reps), PyExc_TypeError,
                 "repeat_interleave(): argument 'repeats' must be Tensor, not %.100s", Py_TYPE(reps)->tp_name);
        return interleave_indices(t ? t : (EmTensor *)reps, c, gpu);
    }
    if (gpu && em_is_tensor(reps) && ((EmTensor *)reps)->numel != 1 && !em_cuda->repeat_interleave)
        return em_fused_no_kernel("repeat_interleave");
    if (em_is_tensor(reps)) {
        rt = (EmTensor *)reps;
        EM_CHECK(rt->ndim <= 1, PyExc_RuntimeError, "repeats must be 0-dim or 1-dim tensor");
        if (em_is_meta(rt)) { /* the size along dim is output_size (Note [meta device]) */
            int64_t shape[EM_MAX_DIMS], at = 0;
            int md = 0;
            if (meta_repeats_size(c, &total) < 0) return NULL;
            if (em_arg_is_none(c, 2)) {
                shape[0] = total;
            } else {
                if (em_arg_int(c, 2, &at) < 0) return NULL;
                EM_CHECK(t->ndim > 0, PyExc_IndexError,
                         "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
                if (em_wrap_dim(at, t->ndim, &md) < 0) return NULL;
                memcpy(shape, t->sizes, t->ndim * sizeof(int64_t));
                shape[md] = total;
            }
            return (PyObject *)em_empty(em_arg_is_none(c, 2) ? 1 : t->ndim, shape, (EmDType)t->dtype, em_meta());
        }
        if (!(rep = read_repeats(rt, &nrep))) return NULL;
    } else {
        EM_CHECK(PyLong_Check(reps) && !PyBool_Check(reps), PyExc_TypeError,
                 "repeat_interleave(): argument 'repeats' must be int or Tensor, not %.100s",
                 Py_TYPE(reps)->tp_name);
        one = PyLong_AsLongLong(reps);
        if (one == -1 && PyErr_Occurred()) return NULL;
        EM_CHECK(one >= 0, PyExc_RuntimeError, "Repeats must be non-negative");
    }
    if (em_arg_is_none(c, 2)) { /* dim=None: flatten */
        int64_t m1 = -1;
        src = em_reshape(t, 1, &m1);
    } else {
        int64_t d;
        if (em_arg_int(c, 2, &d) < 0) goto fail;
        /* torch treats a 0-d input as having no dim to repeat along */
        EM_CHECK(t->ndim > 0, PyExc_IndexError,
                 "Dimension out of range (expected to be in range of [-1, 0], but got 1)");
        if (em_wrap_dim(d, t->ndim, &dim) < 0) goto fail;
        src = (EmTensor *)Py_NewRef(t);
    }
    if (!src) goto fail;
    int64_t n = src->sizes[dim];
    if (rt && nrep != 1) {
        EM_CHECK(nrep == n, PyExc_RuntimeError,
                 "repeats must have the same size as input along dim, but got repeats.size(0) = %lld "
                 "and input.size(%d) = %lld", (long long)nrep, dim, (long long)n);
    }
    /* one repeat count per index along dim, or a single count for all */
    int64_t *per = NULL;
    if (nrep == 1) {
        EM_CHECK(rep[0] >= 0, PyExc_RuntimeError, "repeats can not be negative");
        EM_CHECK(!__builtin_mul_overflow(rep[0], n, &total), PyExc_RuntimeError,
                 "repeat_interleave: the size of the result along dim %d overflows", dim);
    } else {
        cum = PyMem_Malloc((size_t)(n + 1) * sizeof(int64_t));
        if (!cum) {
            PyErr_NoMemory();
            goto fail;
        }
        per = rep;
        for (int64_t i = 0; i < n; i++) {
            EM_CHECK(per[i] >= 0, PyExc_RuntimeError, "repeats can not be negative");
            cum[i] = total;
            EM_CHECK(!__builtin_add_overflow(total, per[i], &total), PyExc_RuntimeError,
                     "repeat_interleave: the size of the result along dim %d overflows", dim);
        }
    }
    if (!em_arg_is_none(c, 3)) {
        if (em_arg_int(c, 3, &osize) < 0) goto fail;
        if (rt)
            EM_CHECK(osize == total, PyExc_RuntimeError, "allocated size does not match required size");
        else
            EM_CHECK(osize == total, PyExc_RuntimeError,
                     "repeat_interleave: Invalid output_size, expected %lld but got %lld", (long long)total,
                     (long long)osize);
    }
    int64_t inner_bytes = em_itemsize(src->dtype);
    for (int d = dim + 1; d < src->ndim; d++) inner_bytes *= src->sizes[d];
    if (nrep == 1 && (inner_bytes >= 256 || gpu)) { /* one count, long rows: a strided copy by the iterator */
        r = interleave_uniform(src, dim, rep[0], total);
        goto fail;
    }
    if (!em_is_contiguous(src)) {
        Py_SETREF(src, em_contiguous(src));
        if (!src) goto fail;
    }
    if (gpu) {
        cum[n] = total;
        r = interleave_gpu(src, dim, cum, n, total);
        goto fail;
    }
    int64_t shape[EM_MAX_DIMS], outer = 1, inner = 1;
    memcpy(shape, src->sizes, src->ndim * sizeof(int64_t));
    shape[dim] = total;
    for (int d = 0; d < dim; d++) outer *= src->sizes[d];
    for (int d = dim + 1; d < src->ndim; d++) inner *= src->sizes[d];
    r = em_empty(src->ndim, shape, (EmDType)src->dtype, em_device(src)); /* the CPU, or meta: no copy */
    if (r && r->numel > 0 && !em_is_meta(src)) {
        PyThreadState *ts = r->numel >= 65536 ? PyEval_SaveThread() : NULL;
        interleave_copy(em_data(src), em_data(r), outer, n, inner * em_itemsize(src->dtype), per, cum, rep[0], total);
        if (ts) PyEval_RestoreThread(ts);
    }
fail: /* also the common exit */
    if (rep != &one) PyMem_Free(rep);
    PyMem_Free(cum);
    Py_XDECREF(src);
    return (PyObject *)r;
}
EM_DEVICE_SLOTS(repeat_interleave, repeat_interleave_op)

/* ---------------------------------------------------- flip / roll / rot90 */

/* dims given as flip's IntList, wrapped; duplicates are an error. */
static EmTensor *flip_impl(EmTensor *t, int n, const int64_t *dims) {
    bool flip[EM_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int d;
        if (em_wrap_dim(dims[i], t->ndim, &d) < 0) return NULL;
        if (flip[d]) {
            PyErr_Format(PyExc_RuntimeError, "dim %d appears multiple times in the list of dims", d);
            return NULL;
        }
        flip[d] = true;
    }
    int64_t strides[EM_MAX_DIMS], offset = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        strides[d] = t->strides[d];
        if (flip[d] && t->sizes[d] > 1) { /* read the dim backwards */
            offset += (t->sizes[d] - 1) * t->strides[d];
            strides[d] = -t->strides[d];
        }
    }
    EmTensor *r = em_empty_like(t, (EmDType)t->dtype);
    if (!r || r->numel == 0) return r;
    EmTensor *src = alias(t, t->ndim, t->sizes, strides, offset);
    if (!src || em_copy_(r, (PyObject *)src) < 0) Py_CLEAR(r);
    Py_XDECREF(src);
    return r;
}

PyObject *em_impl_flip(EmCall *c) {
    int n;
    int64_t dims[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, dims) < 0) return NULL;
    return (PyObject *)flip_impl(em_arg_tensor(c, 0), n, dims);
}

PyObject *em_impl_fliplr(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int64_t d = 1;
    if (t->ndim < 2) {
        PyErr_SetString(PyExc_RuntimeError, "Input must be >= 2-d.");
        return NULL;
    }
    return (PyObject *)flip_impl(t, 1, &d);
}

PyObject *em_impl_flipud(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int64_t d = 0;
    if (t->ndim < 1) {
        PyErr_SetString(PyExc_RuntimeError, "Input must be >= 1-d.");
        return NULL;
    }
    return (PyObject *)flip_impl(t, 1, &d);
}

/* An int or a sequence of ints, of any length (PyMem array, *n its length). */
static int64_t *int_list(PyObject *o, const char *fname, const char *argname, int pos, Py_ssize_t *n) {
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        int64_t *v = PyMem_Malloc(sizeof(int64_t));
        if (!v) return (int64_t *)PyErr_NoMemory();
        *n = 1;
        v[0] = PyLong_AsLongLong(o);
        if (v[0] == -1 && PyErr_Occurred()) {
            PyMem_Free(v);
            return NULL;
        }
        return v;
    }
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' (position %d) must be tuple of ints, not %.100s", fname,
                     argname, pos + 1, Py_TYPE(o)->tp_name);
        return NULL;
    }
    *n = PySequence_Fast_GET_SIZE(o);
    int64_t *v = PyMem_Malloc((size_t)(*n ? *n : 1) * sizeof(int64_t));
    if (!v) return (int64_t *)PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < *n; i++) {
        PyObject *x = PySequence_Fast_ITEMS(o)[i];
        if (!PyLong_Check(x) || PyBool_Check(x)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument '%s' (position %d) must be tuple of ints, but found element of type "
                         "%.100s at pos %zd", fname, argname, pos + 1, Py_TYPE(x)->tp_name, i);
            PyMem_Free(v);
            return NULL;
        }
        v[i] = PyLong_AsLongLong(x);
        if (v[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(v);
            return NULL;
        }
    }
    return v;
}

/* Roll one dim by s (0 < s < size): two narrowed copies. */
static EmTensor *roll_dim(EmTensor *t, int d, int64_t s) {
    int64_t n = t->sizes[d];
    EmTensor *r = em_empty_in_format(t->ndim, t->sizes, (EmDType)t->dtype, em_device(t), em_suggest_memory_format(t));
    if (!r) return NULL;
    EmTensor *a = em_narrow(r, d, 0, s), *b = a ? em_narrow(t, d, n - s, s) : NULL;
    int rc = b ? em_copy_(a, (PyObject *)b) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    a = b = NULL;
    if (rc == 0) {
        a = em_narrow(r, d, s, n - s);
        b = a ? em_narrow(t, d, 0, n - s) : NULL;
        rc = b ? em_copy_(a, (PyObject *)b) : -1;
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (rc < 0) Py_CLEAR(r);
    return r;
}

static inline int64_t mod_size(int64_t s, int64_t n) { /* s mod n in [0, n), n > 0 */
    int64_t m = s % n;
    return m < 0 ? m + n : m;
}

PyObject *em_impl_roll(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *r = NULL;
    Py_ssize_t ns = 0, nd = 0;
    int64_t *shifts = int_list(c->args[1], "roll", "shifts", 1, &ns), *dims = NULL;
    if (!shifts) return NULL;
    if (!em_arg_is_none(c, 2) && !(dims = int_list(c->args[2], "roll", "dims", 2, &nd))) goto fail;
    EM_CHECK(ns > 0, PyExc_RuntimeError, "`shifts` required");
    if (!dims) {
        EM_CHECK(ns == 1, PyExc_RuntimeError, "shifts and dimensions must align. shifts: %zd, dims:%zd", ns, nd);
        int64_t m1 = -1;
        EmTensor *flat = em_reshape(t, 1, &m1);
        if (!flat) goto fail;
        EmTensor *rolled = flat->numel > 0 && mod_size(shifts[0], flat->numel) != 0
                               ? roll_dim(flat, 0, mod_size(shifts[0], flat->numel))
                               : em_clone(flat);
        Py_DECREF(flat);
        if (!rolled) goto fail;
        r = alias(rolled, t->ndim, t->sizes, NULL, rolled->offset); /* contiguous, not a view */
        Py_DECREF(rolled);
        goto fail; /* done: the common exit */
    }
    EM_CHECK(ns == nd, PyExc_RuntimeError, "shifts and dimensions must align. shifts: %zd, dims:%zd", ns, nd);
    EM_CHECK(t->ndim > 0, PyExc_IndexError, "Dimension specified as %lld but tensor has no dimensions",
             (long long)dims[0]);
    r = (EmTensor *)Py_NewRef(t);
    for (Py_ssize_t i = 0; i < nd; i++) {
        int d;
        if (em_wrap_dim(dims[i], t->ndim, &d) < 0) {
            Py_CLEAR(r);
            goto fail;
        }
        int64_t n = t->sizes[d];
        if (n == 0 || mod_size(shifts[i], n) == 0) continue;
        EmTensor *next = roll_dim(r, d, mod_size(shifts[i], n));
        Py_SETREF(r, next);
        if (!r) goto fail;
    }
    if (r == t) Py_SETREF(r, em_clone(t)); /* always a new tensor */
fail:
    PyMem_Free(shifts);
    PyMem_Free(dims);
    return (PyObject *)r;
}

PyObject *em_impl_rot90(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *f = NULL, *r = NULL;
    int64_t k, dv[2] = {0, 1}, *dims = dv;
    Py_ssize_t nd = 2;
    if (em_arg_int(c, 1, &k) < 0) return NULL;
    if (!em_arg_is_none(c, 2) && !(dims = int_list(c->args[2], "rot90", "dims", 2, &nd))) return NULL;
    int d0, d1;
    EM_CHECK(nd == 2, PyExc_RuntimeError, "expected total rotation dims == 2, but got dims = %zd", nd);
    EM_CHECK(t->ndim >= 2, PyExc_RuntimeError, "expected total dims >= 2, but got total dims = %d", t->ndim);
    if (em_wrap_dim(dims[0], t->ndim, &d0) < 0 || em_wrap_dim(dims[1], t->ndim, &d1) < 0) goto fail;
    EM_CHECK(d0 != d1, PyExc_RuntimeError, "expected rotation dims to be different, but got dim0 = %lld and dim1 = %lld",
             (long long)dims[0], (long long)dims[1]);
    int64_t fd[2] = {d0, d1};
    switch (mod_size(k, 4)) {
    case 1: /* flip dims[1], then swap */
        if ((f = flip_impl(t, 1, &fd[1]))) r = em_transpose(f, d0, d1);
        break;
    case 2: r = flip_impl(t, 2, fd); break;
    case 3:
        if ((f = flip_impl(t, 1, &fd[0]))) r = em_transpose(f, d0, d1);
        break;
    default: r = em_clone(t);
    }
fail:
    Py_XDECREF(f);
    if (dims != dv) PyMem_Free(dims);
    return (PyObject *)r;
}

/* ------------------------------------------------------------- views */

static const char *list_str(Py_ssize_t n, const int64_t *v, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (Py_ssize_t i = 0; i < n && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ", %lld" : "%lld", (long long)v[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

PyObject *em_impl_movedim(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *r = NULL;
    const char *fname = c->def->name;
    Py_ssize_t ns = 0, nd = 0;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int64_t *src = int_list(c->args[1], fname, "source", 1, &ns), *dst = NULL;
    if (!src || !(dst = int_list(c->args[2], fname, "destination", 2, &nd))) goto fail;
    EM_CHECK(ns == nd, PyExc_RuntimeError,
             "movedim: Invalid source or destination dims: source (%s dims) should contain the same number "
             "of dims as destination (%s dims)", list_str(ns, src, a, sizeof a), list_str(nd, dst, b, sizeof b));
    int order[EM_MAX_DIMS], s[EM_MAX_DIMS], dd[EM_MAX_DIMS];
    bool used_s[EM_MAX_DIMS] = {false}, used_d[EM_MAX_DIMS] = {false};
    for (Py_ssize_t i = 0; i < ns; i++) {
        if (em_wrap_dim(src[i], t->ndim, &s[i]) < 0 || em_wrap_dim(dst[i], t->ndim, &dd[i]) < 0) goto fail;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        EM_CHECK(!used_s[s[i]], PyExc_RuntimeError, "movedim: repeated dim in `source` (%s)",
                 list_str(ns, src, a, sizeof a));
        used_s[s[i]] = true;
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        EM_CHECK(!used_d[dd[i]], PyExc_RuntimeError, "movedim: repeated dim in `destination` (%s)",
                 list_str(nd, dst, a, sizeof a));
        used_d[dd[i]] = true;
    }
    if (t->ndim == 0) {
        r = em_view_of(t, 0, t->sizes, t->strides, t->offset);
        goto fail;
    }
    for (int d = 0; d < t->ndim; d++) order[d] = -1;
    for (Py_ssize_t i = 0; i < ns; i++) order[dd[i]] = s[i];
    for (int d = 0, next = 0; d < t->ndim; d++) { /* the rest keep their relative order */
        if (order[d] >= 0) continue;
        while (used_s[next]) next++;
        order[d] = next++;
    }
    int64_t perm[EM_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) perm[d] = order[d];
    r = em_permute(t, t->ndim, perm);
fail:
    PyMem_Free(src);
    PyMem_Free(dst);
    return (PyObject *)r;
}

PyObject *em_impl_broadcast_to(EmCall *c) {
    int n;
    int64_t sizes[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, sizes) < 0) return NULL;
    return (PyObject *)em_expand(em_arg_tensor(c, 0), n, sizes);
}

PyObject *em_impl_broadcast_tensors(EmCall *c) {
    PyObject *tup = tensor_tuple(c->args[0], "broadcast_tensors", "tensors", 0), *res = NULL;
    if (!tup) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    int nd = 0;
    int64_t shape[EM_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        EmTensor *t = (EmTensor *)PyTuple_GET_ITEM(tup, i);
        if (em_broadcast_shapes(nd, shape, t->ndim, t->sizes, &nd, shape) < 0) goto fail;
    }
    res = PyTuple_New(n);
    for (Py_ssize_t i = 0; res && i < n; i++) {
        EmTensor *t = (EmTensor *)PyTuple_GET_ITEM(tup, i);
        if (t->ndim == nd && !memcmp(t->sizes, shape, nd * sizeof(int64_t))) { /* torch: the tensor itself */
            PyTuple_SET_ITEM(res, i, Py_NewRef((PyObject *)t));
            continue;
        }
        EmTensor *v = em_expand(t, nd, shape);
        if (!v) {
            Py_CLEAR(res);
            break;
        }
        PyTuple_SET_ITEM(res, i, (PyObject *)v);
    }
fail:
    Py_DECREF(tup);
    return res;
}

PyObject *em_impl_meshgrid(EmCall *c) {
    PyObject *tup = tensor_tuple(c->args[0], "meshgrid", "tensors", 0), *res = NULL;
    if (!tup) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    bool xy = false;
    EM_CHECK(n > 0, PyExc_RuntimeError, "meshgrid expects a non-empty TensorList");
    if (em_arg_is_none(c, 1)) {
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
                         "argument.", 2) < 0)
            goto fail;
    } else {
        const char *ix = PyUnicode_AsUTF8(c->args[1]);
        if (!ix) goto fail;
        EM_CHECK(!strcmp(ix, "ij") || !strcmp(ix, "xy"), PyExc_RuntimeError,
                 "torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: %s", ix);
        xy = !strcmp(ix, "xy");
    }
    EM_CHECK(n <= EM_MAX_DIMS, PyExc_RuntimeError, "meshgrid: at most %d tensors", EM_MAX_DIMS);
    EmTensor *ts[EM_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) {
        ts[i] = (EmTensor *)PyTuple_GET_ITEM(tup, i);
        EM_CHECK(ts[i]->ndim <= 1, PyExc_RuntimeError,
                 "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: %d-D tensor", ts[i]->ndim);
        EM_CHECK(ts[i]->dtype == ts[0]->dtype, PyExc_RuntimeError, "meshgrid expects all tensors to have the same dtype");
    }
    bool swap = xy && n >= 2; /* 'xy': swap the first two inputs, and their grids back */
    if (swap) {
        EmTensor *tmp = ts[0];
        ts[0] = ts[1];
        ts[1] = tmp;
    }
    int64_t shape[EM_MAX_DIMS];
    for (Py_ssize_t i = 0; i < n; i++) shape[i] = ts[i]->numel;
    res = PyTuple_New(n);
    for (Py_ssize_t i = 0; res && i < n; i++) {
        int64_t vs[EM_MAX_DIMS], st[EM_MAX_DIMS];
        for (Py_ssize_t d = 0; d < n; d++) {
            vs[d] = d == i ? shape[i] : 1;
            st[d] = d == i && ts[i]->ndim ? ts[i]->strides[0] : 0;
        }
        EmTensor *v = em_view_of(ts[i], (int)n, vs, st, ts[i]->offset);
        EmTensor *e = v ? em_expand(v, (int)n, shape) : NULL;
        Py_XDECREF(v);
        if (!e) {
            Py_CLEAR(res);
            break;
        }
        PyTuple_SET_ITEM(res, swap && i < 2 ? 1 - i : i, (PyObject *)e);
    }
fail:
    Py_DECREF(tup);
    return res;
}

/* ----------------------------------------------------------------- diff */

PyObject *em_impl_diff(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *pre = em_arg_tensor(c, 3), *app = em_arg_tensor(c, 4), *x = NULL;
    int64_t n;
    int dim;
    if (em_arg_int(c, 1, &n) < 0) return NULL;
    EM_CHECK(t->ndim >= 1, PyExc_RuntimeError, "diff expects input to be at least one-dimensional");
    EM_CHECK(n >= 0, PyExc_RuntimeError, "order must be non-negative but got %lld", (long long)n);
    if (n == 0) return finish_out(c, em_clone(t));
    if (arg_dim(c, 2, t->ndim, &dim) < 0) return NULL;
    EmTensor *parts[3];
    int np = 0;
    for (int i = 0; i < 2; i++) {
        EmTensor *p = i ? app : pre;
        if (!p) continue;
        EM_CHECK(p->ndim == t->ndim, PyExc_RuntimeError,
                 "diff expects prepend or append to be the same dimension as input");
        for (int d = 0; d < t->ndim; d++)
            EM_CHECK(d == dim || p->sizes[d] == t->sizes[d], PyExc_RuntimeError,
                     "diff expects the shape of tensor to prepend or append to match that of input except "
                     "along the differencing dimension; input.size(%d) = %lld, but got tensor.size(%d) = %lld",
                     d, (long long)t->sizes[d], d, (long long)p->sizes[d]);
    }
    if (pre) parts[np++] = pre;
    parts[np++] = t;
    if (app) parts[np++] = app;
    x = np > 1 ? em_cat(np, parts, dim, NULL, "cat") : (EmTensor *)Py_NewRef(t);
    for (int64_t i = 0; x && i < n && x->sizes[dim] > 0; i++) {
        int64_t len = x->sizes[dim] - 1;
        EmTensor *hi = em_narrow(x, dim, 1, len), *lo = hi ? em_narrow(x, dim, 0, len) : NULL;
        /* bool: adjacent elements differ (torch's logical_xor) */
        EmOpId op = x->dtype == EM_BOOL ? EM_OP_logical_xor : EM_OP_sub;
        PyObject *d = lo ? em_binary_op(op, (PyObject *)hi, (PyObject *)lo, NULL) : NULL;
        Py_XDECREF(hi);
        Py_XDECREF(lo);
        Py_SETREF(x, (EmTensor *)d);
    }
    return finish_out(c, x);
fail:
    return NULL;
}

/* -------------------------------------------------------------- one_hot */

/* one_hot of a GPU tensor: the checks through the backend's index check
 * (negatives first, as the CPU's min/max test), amax for an inferred
 * count, then a scatter of ones (Note [scatter loops]) into zeros. */
static PyObject *one_hot_gpu(EmTensor *t, int64_t ncls) {
    EmTensor *src = NULL, *r = NULL, *one = NULL, *hi = NULL;
    EmDevice dev = em_device(t);
    int64_t bad;
    if (t->numel == 0) {
        EM_CHECK(ncls > 0, PyExc_RuntimeError, "Can not infer total number of classes from empty tensor.");
    } else {
        src = em_contiguous(t);
        EM_TRY(src);
        int64_t at = em_index_offsets(dev, NULL, false, src, src->ndim, src->sizes, INT64_MAX, 0, EM_WRAP_NONE, &bad);
        EM_TRY(at != -2);
        EM_CHECK(at < 0, PyExc_RuntimeError, "Class values must be non-negative.");
        if (ncls == -1) {
            PyObject *a = (PyObject *)src;
            hi = em_op_t(EM_OP_amax, 1, &a);
            EmTensor *h = hi ? em_to_device(hi, em_cpu(), false) : NULL;
            EM_TRY(h);
            ncls = *(const int64_t *)em_data(h) + 1;
            Py_DECREF(h);
        } else {
            at = em_index_offsets(dev, NULL, false, src, src->ndim, src->sizes, ncls, 0, EM_WRAP_NONE, &bad);
            EM_TRY(at != -2);
            EM_CHECK(at < 0, PyExc_RuntimeError, "Class values must be smaller than num_classes.");
        }
    }
    EM_CHECK(t->ndim < EM_MAX_DIMS, PyExc_RuntimeError, "one_hot: too many dimensions");
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, t->sizes, t->ndim * sizeof(int64_t));
    shape[t->ndim] = ncls;
    r = em_zeros(t->ndim + 1, shape, EM_INT64, dev);
    EM_TRY(r);
    if (src && ncls > 0) {
        EmScalar s1 = {'i', {1}};
        one = em_scalar_tensor(s1, EM_INT64, dev);
        EM_TRY(one);
        EmScatterLoop g;
        memset(&g, 0, sizeof g);
        g.x = em_data(r);
        g.y = em_data(one);
        g.idx = em_data(src);
        g.nrow = 1; /* rows of r, one index each, at column idx */
        g.rsize[0] = src->numel;
        g.rs_x[0] = ncls * 8;
        g.rs_i[0] = 8;
        g.n = 1;
        g.is = 8;
        g.x_dim_stride = 8;
        g.group = 1;
        EM_TRY(em_scatter_on(dev, &g, EM_RED_ASSIGN, EM_INT64) == 0);
    }
    Py_XDECREF(src);
    Py_XDECREF(one);
    Py_XDECREF(hi);
    return (PyObject *)r;
fail:
    Py_XDECREF(src);
    Py_XDECREF(one);
    Py_XDECREF(hi);
    Py_XDECREF(r);
    return NULL;
}

static PyObject *one_hot_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *src = NULL, *r = NULL;
    int64_t ncls;
    if (em_arg_int(c, 1, &ncls) < 0) return NULL;
    EM_CHECK(t->dtype == EM_INT64, PyExc_RuntimeError,
             "one_hot is only applicable to index tensor of type LongTensor.");
    if (em_index_device_ok(t, "one_hot") < 0) return NULL;
    if (gpu) return one_hot_gpu(t, ncls);
    if (em_is_meta(t) && t->numel) { /* Note [meta device]: no values to check or to count classes by */
        EM_CHECK(ncls != -1, PyExc_RuntimeError, "Tensor.item() cannot be called on meta tensors");
        EM_CHECK(t->ndim < EM_MAX_DIMS, PyExc_RuntimeError, "one_hot: too many dimensions");
        int64_t mshape[EM_MAX_DIMS];
        memcpy(mshape, t->sizes, t->ndim * sizeof(int64_t));
        mshape[t->ndim] = ncls;
        return (PyObject *)em_empty(t->ndim + 1, mshape, EM_INT64, em_meta());
    }
    if (t->numel == 0) {
        EM_CHECK(ncls > 0, PyExc_RuntimeError, "Can not infer total number of classes from empty tensor.");
    } else {
        if (!(src = em_contiguous(t))) return NULL;
        const int64_t *v = (const int64_t *)em_data(src);
        int64_t lo = v[0], hi = v[0];
        for (int64_t i = 1; i < src->numel; i++) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
        EM_CHECK(lo >= 0, PyExc_RuntimeError, "Class values must be non-negative.");
        if (ncls == -1)
            ncls = hi + 1;
        else
            EM_CHECK(hi < ncls, PyExc_RuntimeError, "Class values must be smaller than num_classes.");
    }
    EM_CHECK(t->ndim < EM_MAX_DIMS, PyExc_RuntimeError, "one_hot: too many dimensions");
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, t->sizes, t->ndim * sizeof(int64_t));
    shape[t->ndim] = ncls;
    r = em_zeros(t->ndim + 1, shape, EM_INT64, em_device(t)); /* the CPU, or an empty meta input */
    if (r && src) {
        int64_t *o = (int64_t *)em_data(r);
        const int64_t *v = (const int64_t *)em_data(src);
        for (int64_t i = 0; i < src->numel; i++) o[i * ncls + v[i]] = 1;
    }
fail:
    Py_XDECREF(src);
    return (PyObject *)r;
}
EM_DEVICE_SLOTS(one_hot, one_hot_op)
