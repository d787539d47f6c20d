/* scatter_gather.c — ops that index along one dim: index_select,
 * index_copy, index_add, index_fill (one index per slice: Note [indirect
 * loops]) and gather, scatter, scatter_add, scatter_reduce, take_along_dim
 * (one index per element: Note [scatter loops]). Each validates like torch
 * (dtypes, shapes, every index value) before the loops run: cpu/index.c's,
 * or the backend's on a GPU (index_gpu.h). */
#include "../ember.h"
#include "index_gpu.h"
#include <math.h>

extern const EmKernels em_kernels_div, em_kernels_floor_divide;

static int64_t size_or_one(const EmTensor *t, int d) { return t->ndim ? t->sizes[d] : 1; }
static int ndim_or_one(const EmTensor *t) { return t->ndim ? t->ndim : 1; }

static bool is_index_dtype(const EmTensor *t, bool allow_int32) {
    return t->dtype == EM_INT64 || (allow_int32 && t->dtype == EM_INT32);
}

/* input itself, or a clone when it may share elements with `written` */
static EmTensor *readable(EmTensor *written, EmTensor *input) {
    int r = em_index_check_overlap(written, input);
    if (r < 0) return NULL;
    return r ? em_clone(input) : (EmTensor *)Py_NewRef(input);
}

/* The tensor an op writes: self (in place; refusing stride-0 self like
 * torch, except index_fill), or a copy of self (out-of-place and out=):
 * contiguous, as torch clones it, except index_fill's, which keeps self's
 * layout. */
static EmTensor *write_target(EmCall *c, EmTensor *self, bool is_index_fill) {
    if (c->inplace) {
        if (!is_index_fill && em_index_check_internal_overlap(self) < 0) return NULL;
        return (EmTensor *)Py_NewRef(self);
    }
    return em_clone_as(self, is_index_fill ? EM_PRESERVE_FORMAT : EM_CONTIGUOUS_FORMAT);
}

static PyObject *finish(EmCall *c, EmTensor *target) {
    if (!target) return NULL;
    return c->out && !c->inplace ? em_index_into_out(c->out, target, true) : (PyObject *)target;
}

/* ------------------------------------------------ one index per slice */

/* Byte offsets of a 0-d/1-d index along a dim of size `size` (stride in
 * bytes); -1 when a value is out of range (*bad holds it). */
static int64_t *slice_offsets(EmDevice dev, EmTensor *index, int64_t size, int64_t stride, int wrap, int64_t *bad,
                              int *failed, EmTensor **hold) {
    int64_t n = index->numel;
    int64_t *off = em_index_offsets_alloc(dev, n, hold);
    *failed = 0;
    if (!off) return NULL;
    int64_t shape = n, at = em_index_offsets(dev, off, false, index, 1, &shape, size, stride, wrap, bad);
    if (at == -2) {
        em_index_offsets_free(off, *hold);
        return NULL;
    }
    if (at >= 0) *failed = 1;
    return off;
}

/* Note [indirect loops] for x indexed along `dim`, d laid out like x with
 * byte strides ds[] (ds[dim]: the step per index). */
static void along_dim(EmIndirect *g, EmTensor *x, int dim, char *d, const int64_t *ds, const int64_t *off,
                      int64_t nj) {
    int isz = em_itemsize(x->dtype), m;
    memset(g, 0, sizeof *g);
    g->x = em_data(x);
    g->d = d;
    for (int i = 0; i < x->ndim; i++) {
        if (i < dim) {
            g->psize[g->np] = x->sizes[i];
            g->ps_x[g->np] = x->strides[i] * isz;
            g->ps_d[g->np++] = ds[i];
        } else if (i > dim) {
            g->asize[g->na] = x->sizes[i];
            g->as_x[g->na] = x->strides[i] * isz;
            g->as_d[g->na++] = ds[i];
        }
    }
    /* merge contiguous neighbours */
    int64_t *sets[2][3] = {{g->psize, g->ps_x, g->ps_d}, {g->asize, g->as_x, g->as_d}};
    int *ns[2] = {&g->np, &g->na};
    for (int s = 0; s < 2; s++) {
        int64_t *sz = sets[s][0], *s1 = sets[s][1], *s2 = sets[s][2];
        m = 0;
        for (int i = 0; i < *ns[s]; i++) {
            if (sz[i] == 1) continue;
            if (m > 0 && s1[m - 1] == s1[i] * sz[i] && s2[m - 1] == s2[i] * sz[i]) {
                sz[m - 1] *= sz[i];
                s1[m - 1] = s1[i];
                s2[m - 1] = s2[i];
                continue;
            }
            sz[m] = sz[i];
            s1[m] = s1[i];
            s2[m++] = s2[i];
        }
        *ns[s] = m;
    }
    g->nj = nj;
    g->off = off;
    g->dense_jstride = x->ndim ? ds[dim] : 0;
}

static void byte_strides(const EmTensor *t, int64_t *s) {
    for (int i = 0; i < t->ndim; i++) s[i] = t->strides[i] * em_itemsize(t->dtype);
}

PyObject *em_impl_index_select(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *out = NULL, *hold = NULL;
    int64_t dim64, *off = NULL, bad;
    int dim, failed;
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    EM_CHECK(is_index_dtype(index, true), PyExc_RuntimeError,
             "index_select(): Expected dtype int32 or int64 for index");
    EM_CHECK(index->ndim <= 1, PyExc_IndexError, "index_select(): Index is supposed to be a vector");
    EM_CHECK(!c->out || c->out->dtype == self->dtype, PyExc_RuntimeError,
             "index_select(): self and result must have the same scalar type");
    EM_TRY(em_index_device_ok(self, "index_select") == 0);
    EM_TRY(!c->out || (em_index_check_overlap(c->out, self) >= 0 && em_index_check_overlap(c->out, index) >= 0));
    if (self->ndim == 0)
        EM_CHECK(index->numel == 1, PyExc_RuntimeError,
                 "index_select(): Index to scalar can have only 1 value, got %lld value(s)", (long long)index->numel);
    else if (self->ndim > 1)
        EM_CHECK(self->sizes[dim] > 0 || index->numel == 0, PyExc_RuntimeError,
                 "index_select(): self indexing axis dim should be positive");
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, self->sizes, self->ndim * sizeof(int64_t));
    if (self->ndim) shape[dim] = index->numel;
    out = em_empty(self->ndim, shape, (EmDType)self->dtype, em_device(self));
    EM_TRY(out);
    if (em_is_meta(self)) /* Note [meta device]: the result's shape; no index is read */
        return c->out ? em_index_into_out(c->out, out, true) : (PyObject *)out;
    int isz = em_itemsize(self->dtype);
    off = slice_offsets(em_device(self), index, size_or_one(self, dim), self->ndim ? self->strides[dim] * isz : 0,
                        EM_WRAP_NONE, &bad, &failed, &hold);
    EM_TRY(off);
    if (failed) { /* torch's two kernels raise differently */
        int64_t slice = self->ndim ? self->numel / (self->sizes[dim] ? self->sizes[dim] : 1) : 1;
        if (self->ndim > 1 && (dim == 1 || slice == 0 || self->sizes[dim] == 0))
            PyErr_Format(PyExc_RuntimeError, "INDICES element is out of DATA bounds, id=%lld axis_dim=%lld",
                         (long long)bad, (long long)self->sizes[dim]);
        else
            PyErr_SetString(PyExc_IndexError, "index out of range in self");
        goto fail;
    }
    if (out->numel > 0) {
        int64_t ds[EM_MAX_DIMS];
        byte_strides(out, ds);
        EmIndirect g;
        along_dim(&g, self, dim, em_data(out), ds, off, index->numel);
        EM_TRY(em_index_gather_on(em_device(self), &g, isz) == 0);
    }
    em_index_offsets_free(off, hold);
    return c->out ? em_index_into_out(c->out, out, true) : (PyObject *)out;
fail:
    if (off) em_index_offsets_free(off, hold);
    Py_XDECREF(out);
    return NULL;
}

/* Writes source (laid out like target with `index->numel` slices along dim),
 * or a scalar, into the target's slices. A bad index raises `exc` with
 * range_fmt (index, dim, size), or torch's "index out of range in self".
 * Like torch, an empty target of 2+ dims is neither checked nor written. */
static int put_slices(EmTensor *target, int dim, EmTensor *index, EmTensor *source, const EmScalar *value,
                      EmReduceOp op, int wrap, PyObject *exc, const char *range_fmt) {
    int isz = em_itemsize(target->dtype), failed, rc = -1;
    if ((target->numel == 0 && target->ndim > 1) || em_is_meta(target)) return 0; /* meta: Note [meta device] */
    if (em_index_device_ok(target, "index_put") < 0) return -1;
    EmDevice dev = em_device(target);
    EmTensor *hold = NULL, *scalar = NULL;
    int64_t bad, size = size_or_one(target, dim);
    int64_t *off = slice_offsets(dev, index, size, target->ndim ? target->strides[dim] * isz : 0, wrap, &bad, &failed,
                                 &hold);
    if (!off) return -1;
    if (failed) {
        if (range_fmt)
            PyErr_Format(exc, range_fmt, (long long)bad, dim, (long long)size);
        else
            PyErr_SetString(exc, "index out of range in self");
        goto done;
    }
    int64_t ds[EM_MAX_DIMS] = {0};
    _Alignas(8) char buf[8];
    char *d = buf;
    if (source) {
        for (int i = 0; i < source->ndim; i++) ds[i] = source->strides[i] * isz;
        d = em_data(source);
    } else if (dev.type != EM_CPU) { /* the value where the kernel reads it */
        scalar = em_scalar_tensor(*value, (EmDType)target->dtype, dev);
        if (!scalar) goto done;
        d = em_data(scalar);
    } else {
        em_scalar_store(*value, (EmDType)target->dtype, buf);
    }
    EmIndirect g;
    along_dim(&g, target, dim, d, ds, off, index->numel);
    if (!source || source->ndim == 0) g.dense_jstride = 0;
    rc = em_index_put_on(dev, &g, op, (EmDType)target->dtype, em_is_non_overlapping_and_dense(target));
done:
    Py_XDECREF(scalar);
    em_index_offsets_free(off, hold);
    return rc;
}

PyObject *em_impl_index_copy(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *source = em_arg_tensor(c, 3);
    EmTensor *target = NULL, *src = NULL;
    int64_t dim64;
    int dim;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    EM_CHECK(index->dtype == EM_INT64, PyExc_RuntimeError,
             "index_copy_(): Expected a long tensor for index, but got %s", em_dtype_name((EmDType)index->dtype));
    EM_CHECK(index->ndim <= 1, PyExc_IndexError, "index_copy_(): Index should have dimension 1 or 0 (got %d)",
             index->ndim);
    EM_CHECK(source->dtype == self->dtype, PyExc_RuntimeError,
             "index_copy_(): self and source expected to have the same dtype, but got (self) %s and (source) %s",
             em_dtype_name((EmDType)self->dtype), em_dtype_name((EmDType)source->dtype));
    EM_CHECK(source->ndim == self->ndim || source->ndim == 0 || self->ndim == 0, PyExc_IndexError,
             "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
             "Source dimensionality (%d), destination dimensionality (%d)", source->ndim, self->ndim);
    int64_t want = size_or_one(source, source->ndim ? dim : 0);
    EM_CHECK(index->numel == want, PyExc_IndexError,
             "index_copy_(): Number of indices (%lld) should be equal to source.size(dim) (%lld)",
             (long long)index->numel, (long long)want);
    /* slice shapes: self and source without `dim` */
    if (source->ndim == self->ndim) {
        for (int d = 0; d < self->ndim; d++) {
            if (d == dim) continue;
            int sd = d < dim ? d : d - 1;
            EM_CHECK(self->sizes[d] == source->sizes[d], PyExc_RuntimeError,
                     "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                     "shape: %lld at dimension %d and source slice shape: %lld at dimension %d.",
                     (long long)self->sizes[d], sd, (long long)source->sizes[d], sd);
        }
    } else {
        EM_CHECK(self->numel == 1 || source->numel == 1 || index->numel == 0, PyExc_RuntimeError,
                 "index_copy_(): Source/destination tensor must have same slice shapes: %s and %s",
                 em_shape_str(self->ndim, self->sizes, a, sizeof a),
                 em_shape_str(source->ndim, source->sizes, b, sizeof b));
    }
    target = write_target(c, self, false);
    EM_TRY(target);
    src = readable(target, source);
    EM_TRY(src);
    EM_TRY(put_slices(target, dim, index, src, NULL, EM_RED_ASSIGN, EM_WRAP_NONE, PyExc_IndexError,
                      "index_copy_(): index %lld is out of bounds for dimension %d with size %lld") == 0);
    Py_DECREF(src);
    return finish(c, target);
fail:
    Py_XDECREF(src);
    Py_XDECREF(target);
    return NULL;
}

PyObject *em_impl_index_add(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *source = em_arg_tensor(c, 3);
    EmTensor *target = NULL, *src = NULL;
    int64_t dim64;
    int dim;
    EmScalar alpha;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0 || em_arg_scalar(c, 4, &alpha) < 0)
        return NULL;
    EM_CHECK(is_index_dtype(index, true), PyExc_RuntimeError,
             "index_add_(): Expected dtype int32/int64 for index but got: %s", em_dtype_name((EmDType)index->dtype));
    EM_CHECK(index->ndim <= 1, PyExc_IndexError,
             "index_add_(): Index is supposed to be a vector, but got dim: %d with type: %s and size: %s", index->ndim,
             em_dtype_name((EmDType)index->dtype), em_shape_str(index->ndim, index->sizes, a, sizeof a));
    EM_CHECK(source->dtype == self->dtype, PyExc_RuntimeError,
             "index_add_(): self (%s) and source (%s) must have the same scalar type",
             em_dtype_name((EmDType)self->dtype), em_dtype_name((EmDType)source->dtype));
    int64_t want = size_or_one(source, source->ndim ? dim : 0);
    EM_CHECK(index->numel == want, PyExc_RuntimeError,
             "index_add_(): Number of indices (%lld) should be equal to source.size(dim): (%lld), for dim: %d",
             (long long)index->numel, (long long)want, dim);
    bool same = source->ndim == self->ndim;
    for (int d = 0; same && d < self->ndim; d++) same = d == dim || self->sizes[d] == source->sizes[d];
    EM_CHECK(same, PyExc_RuntimeError,
             "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
             "%s source.shape = %s",
             em_shape_str(self->ndim, self->sizes, a, sizeof a),
             em_shape_str(source->ndim, source->sizes, b, sizeof b));
    EM_TRY(em_scalar_check_range(alpha, (EmDType)self->dtype) == 0);
    target = write_target(c, self, false);
    EM_TRY(target);
    src = readable(target, source);
    EM_TRY(src);
    /* alpha in self's dtype (ints truncate it); a scaled copy unless it is 1 */
    int64_t bits = 0;
    em_scalar_store(alpha, (EmDType)self->dtype, &bits);
    EmScalar one = {'i', {1}};
    int64_t one_bits = 0;
    em_scalar_store(one, (EmDType)self->dtype, &one_bits);
    if (bits != one_bits && src->numel > 0) {
        PyObject *pa = em_scalar_to_py(em_scalar_load(&bits, (EmDType)self->dtype));
        EM_TRY(pa);
        PyObject *scaled = em_binary_op(EM_OP_mul, (PyObject *)src, pa, NULL);
        Py_DECREF(pa);
        EM_TRY(scaled);
        Py_SETREF(src, (EmTensor *)scaled);
        if (src->dtype != self->dtype) { /* bool * int alpha: back to self's dtype */
            EmTensor *cast = em_to_dtype(src, (EmDType)self->dtype, false);
            EM_TRY(cast);
            Py_SETREF(src, cast);
        }
    }
    /* torch's fast path (2+ dims, int64 index, alpha 1, first or last dim)
     * raises RuntimeError; its general one IndexError */
    bool fast = self->ndim > 1 && index->dtype == EM_INT64 && bits == one_bits && (dim == 0 || dim == self->ndim - 1);
    EM_TRY(put_slices(target, dim, index, src, NULL, EM_RED_SUM, EM_WRAP_NONE,
                      fast ? PyExc_RuntimeError : PyExc_IndexError,
                      fast ? "index %lld is out of bounds for dimension %d with size %lld" : NULL) == 0);
    Py_DECREF(src);
    return finish(c, target);
fail:
    Py_XDECREF(src);
    Py_XDECREF(target);
    return NULL;
}

PyObject *em_impl_index_fill(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *target = NULL;
    PyObject *v = c->args[3];
    int64_t dim64;
    int dim;
    EmScalar s;
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    EM_CHECK(index->dtype == EM_INT64, PyExc_IndexError, "index_fill_(): Expected dtype int64 for index.");
    EM_CHECK(index->ndim <= 1, PyExc_RuntimeError, "Index has to be a vector/scalar");
    EM_CHECK(!em_is_tensor(v) || ((EmTensor *)v)->ndim == 0, PyExc_RuntimeError,
             "index_fill_ only supports a 0-dimensional value tensor, but got tensor with %d dimension(s).",
             em_is_tensor(v) ? ((EmTensor *)v)->ndim : 0);
    if (em_is_tensor(v) && em_is_meta((EmTensor *)v) && em_is_meta(self))
        s = (EmScalar){'i', {0}}; /* Note [meta device]: a meta value is never read; nothing is written */
    else
        EM_TRY(em_scalar_from_py(v, &s) == 0 && em_scalar_check_range(s, (EmDType)self->dtype) == 0);
    target = write_target(c, self, true);
    EM_TRY(target);
    EM_TRY(put_slices(target, dim, index, NULL, &s, EM_RED_ASSIGN, EM_WRAP_NEG, PyExc_IndexError,
                      "index %lld is out of bounds for dimension %d with size %lld") == 0);
    return (PyObject *)target;
fail:
    Py_XDECREF(target);
    return NULL;
}

/* ------------------------------------------------ one index per element */

/* Note [scatter loops] geometry: idx (int64) walks x along dim; y is the
 * other operand (src, or gather's result). 0-d operands act as 1-d of size 1. */
static void scatter_geometry(EmScatterLoop *g, EmTensor *x, char *y_data, EmTensor *y, EmTensor *idx, int dim,
                             bool gather) {
    int isz = em_itemsize(x->dtype), n = idx->ndim ? idx->ndim : 1;
    int64_t size[EM_MAX_DIMS], xs[EM_MAX_DIMS], ys[EM_MAX_DIMS], is[EM_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        size[d] = size_or_one(idx, d);
        xs[d] = (d == dim || x->ndim == 0) ? 0 : x->strides[d] * isz;
        ys[d] = (!y || y->ndim == 0) ? 0 : y->strides[d] * isz;
        is[d] = idx->ndim ? idx->strides[d] * 8 : 0;
    }
    memset(g, 0, sizeof *g);
    g->x = em_data(x);
    g->y = y_data;
    g->idx = em_data(idx);
    g->x_dim_stride = x->ndim ? x->strides[dim] * isz : 0;
    int L = n - 1;
    g->n = size[L];
    g->xs = xs[L];
    g->ys = ys[L];
    g->is = is[L];
    g->group = 1;
    /* rows: the dims before L; for scatter with dim != L, dim goes last and
     * its rows form one group (they may hit the same elements) */
    for (int d = 0; d < L; d++) {
        if (!gather && d == dim) continue;
        g->rsize[g->nrow] = size[d];
        g->rs_x[g->nrow] = xs[d];
        g->rs_y[g->nrow] = ys[d];
        g->rs_i[g->nrow++] = is[d];
    }
    if (!gather && dim != L) {
        g->rsize[g->nrow] = size[dim];
        g->rs_x[g->nrow] = 0;
        g->rs_y[g->nrow] = ys[dim];
        g->rs_i[g->nrow++] = is[dim];
        g->group = size[dim];
    }
}

/* Index values in [0, size): -1, or RuntimeError naming the first bad one. */
static int check_values(EmTensor *idx, int dim, int64_t size) {
    int64_t bad, at = em_index_offsets(em_device(idx), NULL, false, idx, idx->ndim, idx->sizes, size, 0, EM_WRAP_NONE,
                                       &bad);
    if (at == -2) return -1;
    if (at >= 0) {
        PyErr_Format(PyExc_RuntimeError, "index %lld is out of bounds for dimension %d with size %lld",
                     (long long)bad, dim, (long long)size);
        return -1;
    }
    return 0;
}

/* idx as int64 on x's device (new reference) */
static EmTensor *as_int64(EmTensor *idx, const EmTensor *x) {
    EmTensor *d = em_to_device(idx, em_device(x), false), *r = d ? em_to_dtype(d, EM_INT64, false) : NULL;
    Py_XDECREF(d);
    return r;
}

static EmTensor *gather_impl(EmTensor *self, int dim, EmTensor *index, const char *what) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    EmTensor *out = NULL, *idx = NULL;
    EM_CHECK(is_index_dtype(index, true), PyExc_RuntimeError, "gather(): Expected dtype int32/int64 for index");
    EM_TRY(em_index_device_ok(self, "gather") == 0);
    out = em_empty(index->ndim, index->sizes, (EmDType)self->dtype, em_device(self));
    if (!out || out->numel == 0) return out;
    EM_CHECK(ndim_or_one(index) == ndim_or_one(self), PyExc_RuntimeError,
             "Index tensor must have the same number of dimensions as %s tensor", what);
    for (int d = 0; d < ndim_or_one(index); d++)
        EM_CHECK(d == dim || size_or_one(index, d) <= size_or_one(self, d), PyExc_RuntimeError,
                 "Size does not match at dimension %d expected index %s to be no larger than self %s apart from "
                 "dimension %d",
                 d, em_shape_str(index->ndim, index->sizes, a, sizeof a),
                 em_shape_str(self->ndim, self->sizes, b, sizeof b), dim);
    if (em_is_meta(self)) return out; /* Note [meta device] */
    idx = as_int64(index, self);
    EM_TRY(idx);
    EmScatterLoop g;
    scatter_geometry(&g, self, em_data(out), out, idx, dim, true);
    g.size = size_or_one(self, dim); /* checked as it gathers; the error names the first bad one */
    int ok = em_gather_on(em_device(self), &g, em_itemsize(self->dtype));
    EM_TRY(ok >= 0);
    if (!ok) {
        if (check_values(index, dim, g.size) == 0)
            PyErr_SetString(PyExc_RuntimeError, "gather(): index out of bounds");
        goto fail;
    }
    Py_DECREF(idx);
    return out;
fail:
    Py_XDECREF(idx);
    Py_XDECREF(out);
    return NULL;
}

PyObject *em_impl_gather(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2);
    int64_t dim64;
    int dim;
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    if (c->out && c->out->dtype != self->dtype) {
        PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have dtype %s, but got %s instead",
                     em_dtype_info[self->dtype].name, em_dtype_info[c->out->dtype].name);
        return NULL;
    }
    if (c->out && (em_index_check_overlap(c->out, self) < 0 || em_index_check_overlap(c->out, index) < 0))
        return NULL;
    EmTensor *r = gather_impl(self, dim, index, "input");
    return c->out ? em_index_into_out(c->out, r, true) : (PyObject *)r;
}

/* Validate scatter's operands; returns the int64 index (new reference), or
 * NULL (error, or *empty set when there is nothing to scatter). */
static EmTensor *scatter_check(EmTensor *self, int dim, EmTensor *index, EmTensor *src, bool *empty,
                               const char *not_implemented) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF], s[EM_SHAPE_BUF];
    *empty = false;
    EM_CHECK(is_index_dtype(index, true), PyExc_RuntimeError, "scatter(): Expected dtype int32/int64 for index");
    EM_CHECK(!src || src->dtype == self->dtype, PyExc_RuntimeError,
             "scatter(): Expected self.dtype to be equal to src.dtype");
    EM_TRY(em_index_device_ok(self, "scatter") == 0);
    if (index->numel == 0) {
        *empty = true;
        EM_CHECK(!not_implemented, PyExc_NotImplementedError, "%s", not_implemented);
        return NULL;
    }
    int n = ndim_or_one(index);
    EM_CHECK(n == ndim_or_one(self), PyExc_RuntimeError,
             "Index tensor must have the same number of dimensions as self tensor");
    EM_CHECK(!src || n == ndim_or_one(src), PyExc_RuntimeError,
             "Index tensor must have the same number of dimensions as src tensor");
    for (int d = 0; d < n; d++) {
        bool ok = (d == dim || size_or_one(index, d) <= size_or_one(self, d)) &&
                  (!src || size_or_one(index, d) <= size_or_one(src, d));
        if (ok) continue;
        if (src)
            PyErr_Format(PyExc_RuntimeError,
                         "Expected index %s to be no larger than self %s apart from dimension %d and to be no larger "
                         "size than src %s",
                         em_shape_str(index->ndim, index->sizes, a, sizeof a),
                         em_shape_str(self->ndim, self->sizes, b, sizeof b), dim,
                         em_shape_str(src->ndim, src->sizes, s, sizeof s));
        else
            PyErr_Format(PyExc_RuntimeError, "Expected index %s to be no larger than self %s apart from dimension %d",
                         em_shape_str(index->ndim, index->sizes, a, sizeof a),
                         em_shape_str(self->ndim, self->sizes, b, sizeof b), dim);
        return NULL;
    }
    EM_CHECK(!not_implemented, PyExc_NotImplementedError, "%s", not_implemented); /* torch: after the shapes */
    EM_TRY(em_is_meta(self) || check_values(index, dim, size_or_one(self, dim)) == 0); /* meta: no values */
    return as_int64(index, self);
fail:
    return NULL;
}

/* target[... idx ...] op= src (or the scalar) */
static int scatter_run(EmTensor *target, int dim, EmTensor *idx, EmTensor *src, const EmScalar *value,
                       EmReduceOp op) {
    _Alignas(8) char buf[8];
    char *y = buf;
    EmTensor *scalar = NULL;
    EmDevice dev = em_device(target);
    if (dev.type == EM_META) return 0; /* Note [meta device]: nothing to write */
    if (src) {
        y = em_data(src);
    } else if (dev.type != EM_CPU) { /* the value where the kernel reads it */
        if (!(scalar = em_scalar_tensor(*value, (EmDType)target->dtype, dev))) return -1;
        y = em_data(scalar);
    } else {
        em_scalar_store(*value, (EmDType)target->dtype, buf);
    }
    EmScatterLoop g;
    scatter_geometry(&g, target, y, src, idx, dim, false);
    int rc = em_scatter_on(dev, &g, op, (EmDType)target->dtype);
    Py_XDECREF(scalar);
    return rc;
}

/* The shared body of scatter / scatter_add: src tensor or scalar value. */
static PyObject *scatter_common(EmCall *c, EmTensor *srct, PyObject *value_obj, EmReduceOp op) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *target = NULL, *idx = NULL, *src = NULL;
    int64_t dim64;
    int dim;
    EmScalar value;
    bool empty;
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    if (!srct) {
        EM_CHECK(!em_is_tensor(value_obj) || ((EmTensor *)value_obj)->ndim == 0, PyExc_RuntimeError,
                 "scatter(): value must be a number or a 0-dimensional tensor");
        EM_TRY(em_scalar_from_py(value_obj, &value) == 0 && em_scalar_check_range(value, (EmDType)self->dtype) == 0);
    }
    idx = scatter_check(self, dim, index, srct, &empty, NULL);
    EM_TRY(idx || empty);
    target = write_target(c, self, false);
    EM_TRY(target);
    if (!empty) {
        if (srct) {
            src = readable(target, srct);
            EM_TRY(src);
        }
        EM_TRY(scatter_run(target, dim, idx, src, srct ? NULL : &value, op) == 0);
    }
    Py_XDECREF(idx);
    Py_XDECREF(src);
    return finish(c, target);
fail:
    Py_XDECREF(idx);
    Py_XDECREF(src);
    Py_XDECREF(target);
    return NULL;
}

PyObject *em_impl_scatter(EmCall *c) {
    PyObject *srco = c->args[3], *valo = c->args[4], *red = c->args[5];
    if (srco != Py_None && valo != Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "scatter() received an invalid combination of arguments - got both src and value");
        return NULL;
    }
    if (srco == Py_None && valo == Py_None) {
        PyErr_SetString(PyExc_TypeError, "scatter() missing required argument 'src' or 'value'");
        return NULL;
    }
    EmReduceOp op = EM_RED_ASSIGN;
    if (red != Py_None) {
        if (!PyUnicode_CompareWithASCIIString(red, "add")) {
            op = EM_RED_SUM;
        } else if (!PyUnicode_CompareWithASCIIString(red, "multiply")) {
            op = EM_RED_PROD;
        } else {
            PyErr_SetString(PyExc_RuntimeError, "reduce argument must be either add or multiply.");
            return NULL;
        }
    }
    EmTensor *srct = srco != Py_None && em_is_tensor(srco) ? (EmTensor *)srco : NULL;
    static bool warned = false; /* torch warns once */
    if (srct && red != Py_None && !warned) {
        warned = true;
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "The reduce argument of ember.scatter with Tensor src is deprecated and will be removed "
                         "in a future release. Use ember.scatter_reduce instead for more reduction options.",
                         1) < 0)
            return NULL;
    }
    return scatter_common(c, srct, srct ? NULL : (srco != Py_None ? srco : valo), op);
}

PyObject *em_impl_scatter_add(EmCall *c) { return scatter_common(c, em_arg_tensor(c, 3), NULL, EM_RED_SUM); }

/* The value each reduction starts from when include_self=False. */
static EmScalar reduce_identity(EmReduceOp op, EmDType d) {
    EmScalar s = {'i', {0}};
    bool lowest = op == EM_RED_MAX;
    if (op == EM_RED_PROD) {
        s.v.i = 1;
    } else if (op == EM_RED_MAX || op == EM_RED_MIN) {
        if (em_is_float(d)) {
            s.kind = 'f';
            s.v.f = lowest ? -INFINITY : INFINITY;
        } else if (d == EM_BOOL) {
            s.v.i = lowest ? 0 : 1;
        } else {
            int bits = 8 * em_itemsize(d);
            bool sgn = em_dtype_info[d].is_signed;
            int64_t max = d == EM_INT64 ? INT64_MAX : (int64_t)((1ull << (sgn ? bits - 1 : bits)) - 1);
            s.v.i = lowest ? (sgn ? -max - 1 : 0) : max;
        }
    }
    return s;
}

PyObject *em_impl_scatter_reduce(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 2), *srct = em_arg_tensor(c, 3);
    EmTensor *target = NULL, *idx = NULL, *src = NULL, *count = NULL;
    PyObject *red = c->args[4];
    int64_t dim64;
    int dim;
    bool include_self, empty, mean = false;
    EmReduceOp op;
    em_arg_bool(c, 5, &include_self);
    if (em_arg_int(c, 1, &dim64) < 0 || em_wrap_dim(dim64, self->ndim, &dim) < 0) return NULL;
    if (!PyUnicode_CompareWithASCIIString(red, "sum")) {
        op = EM_RED_SUM;
    } else if (!PyUnicode_CompareWithASCIIString(red, "prod")) {
        op = EM_RED_PROD;
    } else if (!PyUnicode_CompareWithASCIIString(red, "mean")) {
        op = EM_RED_SUM;
        mean = true;
    } else if (!PyUnicode_CompareWithASCIIString(red, "amax") || !PyUnicode_CompareWithASCIIString(red, "max")) {
        op = EM_RED_MAX;
    } else if (!PyUnicode_CompareWithASCIIString(red, "amin") || !PyUnicode_CompareWithASCIIString(red, "min")) {
        op = EM_RED_MIN;
    } else {
        PyErr_Format(PyExc_RuntimeError, "reduce argument must be either sum, prod, mean, amax or amin, got %U", red);
        return NULL;
    }
    bool bool_mean = mean && self->dtype == EM_BOOL;
    idx = scatter_check(self, dim, index, srct, &empty,
                        !bool_mean ? NULL
                        : index->numel ? "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'"
                                       : "\"div_floor_cpu\" not implemented for 'Bool'");
    EM_TRY(idx || (empty && !PyErr_Occurred()));
    target = write_target(c, self, false);
    EM_TRY(target);
    if (empty) return (PyObject *)target;
    src = readable(target, srct);
    EM_TRY(src);
    EmDType dt = (EmDType)target->dtype;
    if (!include_self) {
        EmScalar id = reduce_identity(op, dt);
        EM_TRY(scatter_run(target, dim, idx, NULL, &id, EM_RED_ASSIGN) == 0);
    }
    EM_TRY(scatter_run(target, dim, idx, src, NULL, op) == 0);
    if (mean) { /* as torch: counts in self's dtype, floor division for integers */
        EmScalar start = {'i', {include_self ? 1 : 0}}, one = {'i', {1}};
        count = em_empty(target->ndim, target->sizes, dt, em_device(target));
        EM_TRY(count && em_fill_(count, start) == 0);
        EM_TRY(scatter_run(count, dim, idx, NULL, &one, EM_RED_SUM) == 0);
        { /* count = where(count == 0, 1, count), through ops so any device runs it */
            EmScalar zero = {'i', {0}};
            PyObject *z = em_scalar_to_py(zero);
            EmTensor *none = z ? (EmTensor *)em_binary_op(EM_OP_eq, (PyObject *)count, z, NULL) : NULL;
            Py_XDECREF(z);
            EM_TRY(none);
            EmTensor *filled = em_masked_fill(count, none, one, true);
            Py_DECREF(none);
            EM_TRY(filled);
            Py_DECREF(filled);
        }
        const EmKernels *divide = em_is_float(dt) ? &em_kernels_div : &em_kernels_floor_divide;
        EmIterConfig cfg = em_iter_config("scatter_reduce", divide, EM_PROMOTE_NONE);
        cfg.inputs[0] = em_opnd(target);
        cfg.inputs[1] = em_opnd(count);
        cfg.ninputs = 2;
        cfg.out = target;
        cfg.inplace = true;
        cfg.common_dtype = (int8_t)dt;
        EmTensor *r = em_iter_run(&cfg);
        EM_TRY(r);
        Py_DECREF(r);
    }
    Py_XDECREF(count);
    Py_DECREF(idx);
    Py_DECREF(src);
    return (PyObject *)target;
fail:
    Py_XDECREF(count);
    Py_XDECREF(idx);
    Py_XDECREF(src);
    Py_XDECREF(target);
    return NULL;
}

/* take_along_dim: with a dim, both sides broadcast except along dim and the
 * indices wrap modulo the size (as torch computes them); without, a gather
 * on the flattened tensors. */
PyObject *em_impl_take_along_dim(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *indices = em_arg_tensor(c, 1);
    EmTensor *x = NULL, *ix = NULL, *r = NULL;
    int64_t flat_x = -1, flat_i = -1; /* em_reshape fills in the -1 */
    EM_CHECK(indices->dtype == EM_INT64, PyExc_RuntimeError,
             "torch.take_along_dim(): dtype of indices should be Long but got %s",
             em_dtype_name((EmDType)indices->dtype));
    EM_CHECK(!c->out || c->out->dtype == self->dtype, PyExc_RuntimeError,
             "take_along_dim(): self and result must have the same scalar type");
    if (em_arg_is_none(c, 2)) {
        x = em_reshape(self, 1, &flat_x);
        ix = x ? em_reshape(indices, 1, &flat_i) : NULL;
        EM_TRY(ix);
        r = gather_impl(x, 0, ix, "input");
    } else {
        int64_t dim64;
        int dim, n1, n2;
        EM_TRY(em_arg_int(c, 2, &dim64) == 0);
        EM_CHECK(self->ndim > 0, PyExc_IndexError, "Dimension specified as %lld but tensor has no dimensions",
                 (long long)dim64);
        EM_TRY(em_wrap_dim(dim64, self->ndim, &dim) == 0);
        EM_CHECK(self->ndim == indices->ndim, PyExc_RuntimeError,
                 "torch.take_along_dim(): input and indices should have the same number of dimensions, but got %d "
                 "dimensions for input, and %d dimensions for indices",
                 self->ndim, indices->ndim);
        int64_t s1[EM_MAX_DIMS], s2[EM_MAX_DIMS], b1[EM_MAX_DIMS], b2[EM_MAX_DIMS];
        memcpy(s1, self->sizes, self->ndim * sizeof(int64_t));
        s1[dim] = indices->sizes[dim];
        memcpy(s2, indices->sizes, indices->ndim * sizeof(int64_t));
        s2[dim] = self->sizes[dim];
        EM_TRY(em_broadcast_shapes(self->ndim, s1, indices->ndim, indices->sizes, &n1, b1) == 0);
        EM_TRY(em_broadcast_shapes(indices->ndim, s2, self->ndim, self->sizes, &n2, b2) == 0);
        EmTensor *ie = em_expand(indices, n1, b1);
        EM_TRY(ie);
        ix = em_to_dtype(ie, EM_INT64, false);
        Py_DECREF(ie);
        EM_TRY(ix);
        x = em_expand(self, n2, b2);
        EM_TRY(x);
        int64_t size = self->sizes[dim];
        EM_CHECK(size > 0 || ix->numel == 0, PyExc_RuntimeError, "ZeroDivisionError");
        if (ix->numel > 0) { /* negative indices wrap: remainder takes the divisor's sign */
            EmScalar sz = {'i', {size}};
            PyObject *ps = em_scalar_to_py(sz);
            PyObject *w = ps ? em_binary_op(EM_OP_remainder, (PyObject *)ix, ps, NULL) : NULL;
            Py_XDECREF(ps);
            EM_TRY(w);
            Py_SETREF(ix, (EmTensor *)w);
        }
        r = gather_impl(x, dim, ix, "input");
    }
    Py_XDECREF(x);
    Py_XDECREF(ix);
    return c->out ? em_index_into_out(c->out, r, true) : (PyObject *)r;
fail:
    Py_XDECREF(x);
    Py_XDECREF(ix);
    return NULL;
}
