/* index_advanced.c — advanced indexing (Note [advanced indexing]) and the
 * ops built on it: index_put(_), masked_fill, masked_select, masked_scatter,
 * take, nonzero, argwhere. Tensor.__getitem__/__setitem__ (ops/index.c)
 * parse the key, apply the basic parts as a view and hand the tensor
 * indices here. The loops are in cpu/index.c (Note [indirect loops]), or
 * the backend's for GPU tensors (index_gpu.h). */
#include "../ember.h"
#include "index_gpu.h"

/* Note [advanced indexing] (torch's rules, as NumPy's but with integers
 * always basic): index tensors (int64/int32) broadcast together to a shape
 * B; a bool mask of k dims stands for the k index tensors of its nonzero().
 * When the indexed dims are adjacent the B dims replace them in place;
 * otherwise the indexed dims move to the front first. The result is
 * P + B + A (dims before, index shape, dims after) and always a copy. */
typedef struct {
    EmTensor *src; /* the indexed tensor, indexed dims made adjacent (new reference) */
    int first, k;  /* indexed dims: [first, first + k) of src */
    int nb;
    int64_t bshape[EM_MAX_DIMS];
    int64_t nj;
    int64_t *off; /* nj byte offsets into src's data (on its device: em_index_offsets_alloc) */
    EmTensor *off_hold;
    int rdim;
    int64_t rshape[EM_MAX_DIMS]; /* P + B + A */
} AdvPlan;

static void plan_clear(AdvPlan *pl) {
    Py_CLEAR(pl->src);
    if (pl->off) em_index_offsets_free(pl->off, pl->off_hold);
    pl->off = NULL;
    pl->off_hold = NULL;
}

static bool is_mask(const EmTensor *t) { return t->dtype == EM_BOOL || t->dtype == EM_UINT8; }

static int check_mask_shape(EmTensor *view, int d, EmTensor *mask) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    for (int j = 0; j < mask->ndim; j++) {
        if (d + j >= view->ndim || mask->sizes[j] != view->sizes[d + j]) {
            PyErr_Format(PyExc_IndexError,
                         "The shape of the mask %s at index %d does not match the shape of the indexed "
                         "tensor %s at index %d",
                         em_shape_str(mask->ndim, mask->sizes, a, sizeof a), j,
                         em_shape_str(view->ndim, view->sizes, b, sizeof b), d + j);
            return -1;
        }
    }
    return 0;
}

static int64_t *alloc_offsets(int64_t n) {
    if (n > PY_SSIZE_T_MAX / (int64_t)sizeof(int64_t)) {
        PyErr_NoMemory();
        return NULL;
    }
    int64_t *p = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!p) PyErr_NoMemory();
    return p;
}

/* Byte offsets (in t's coordinates, strides ostrides) of mask's nonzero
 * elements in row-major order on mask's device; *n their count. */
static int64_t *mask_offsets(EmTensor *mask, const int64_t *ostrides, int64_t *n, EmTensor **hold) {
    return em_index_nonzero_offsets(mask, ostrides, n, hold);
}

static int plan_result_shape(AdvPlan *pl) {
    EmTensor *s = pl->src;
    int after = s->ndim - pl->first - pl->k;
    if (pl->first + pl->nb + after > EM_MAX_DIMS) {
        PyErr_Format(PyExc_IndexError, "indexing result would have more than %d dimensions", EM_MAX_DIMS);
        return -1;
    }
    pl->rdim = 0;
    for (int i = 0; i < pl->first; i++) pl->rshape[pl->rdim++] = s->sizes[i];
    for (int i = 0; i < pl->nb; i++) pl->rshape[pl->rdim++] = pl->bshape[i];
    for (int i = 0; i < after; i++) pl->rshape[pl->rdim++] = s->sizes[pl->first + pl->k + i];
    return 0;
}

static int64_t prod_of(int n, const int64_t *s) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

/* torch checks an index_put_ value's shape after the index shapes and
 * before the index values. */
static int check_values_shape(const AdvPlan *pl, const EmTensor *values) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    bool ok = values->ndim <= pl->rdim;
    for (int i = 0; ok && i < values->ndim; i++) {
        int64_t vs = values->sizes[i], rsz = pl->rshape[pl->rdim - values->ndim + i];
        ok = vs == rsz || vs == 1;
    }
    if (!ok)
        PyErr_Format(PyExc_RuntimeError,
                     "shape mismatch: value tensor of shape %s cannot be broadcast to indexing result of shape %s",
                     em_shape_str(values->ndim, values->sizes, a, sizeof a),
                     em_shape_str(pl->rdim, pl->rshape, b, sizeof b));
    return ok ? 0 : -1;
}

/* values: index_put_'s (NULL for indexing). */
static int plan_build_on(EmTensor *view, EmTensor **idx, AdvPlan *pl, const EmTensor *values, bool accumulate) {
    bool put = values != NULL && !accumulate;
    memset(pl, 0, sizeof *pl);
    int isz = em_itemsize(view->dtype), nent = 0, nmask = 0, nd = view->ndim;
    int dims[EM_MAX_DIMS];
    EmTensor *ents[EM_MAX_DIMS];
    PyObject *keep = NULL; /* nonzero results the entries view */
    char a[EM_SHAPE_BUF];

    for (int d = 0; d < nd; d++) {
        if (!idx[d]) continue;
        nmask += is_mask(idx[d]);
        nent++;
        if (is_mask(idx[d]) && check_mask_shape(view, d, idx[d]) < 0) return -1;
    }
    if (nmask && em_is_meta(view)) return em_index_meta_nonzero_error();
    /* one mask and nothing else: its offsets directly, no nonzero() */
    if (nent == 1 && nmask == 1) {
        int d = 0;
        while (!idx[d]) d++;
        EmTensor *m = idx[d];
        int64_t ost[EM_MAX_DIMS];
        for (int j = 0; j < m->ndim; j++) ost[j] = view->strides[d + j] * isz;
        pl->src = (EmTensor *)Py_NewRef(view);
        pl->first = d;
        pl->k = m->ndim;
        pl->nb = 1;
        pl->off = mask_offsets(m, ost, &pl->nj, &pl->off_hold);
        if (!pl->off) goto fail;
        pl->bshape[0] = pl->nj;
        if (plan_result_shape(pl) < 0 || (values && check_values_shape(pl, values) < 0)) goto fail;
        return 0;
    }
    nent = 0;
    keep = PyList_New(0);
    if (!keep) return -1;
    for (int d = 0; d < nd; d++) {
        EmTensor *t = idx[d];
        if (!t) continue;
        if (!is_mask(t)) {
            dims[nent] = d;
            ents[nent++] = t;
            continue;
        }
        EmTensor *nz = em_nonzero(t); /* [n, k] */
        if (!nz) goto fail;
        int r = PyList_Append(keep, (PyObject *)nz);
        Py_DECREF(nz);
        if (r < 0) goto fail;
        for (int j = 0; j < t->ndim; j++) {
            EmTensor *col = em_select(nz, 1, j);
            if (!col) goto fail;
            r = PyList_Append(keep, (PyObject *)col);
            Py_DECREF(col);
            if (r < 0) goto fail;
            dims[nent] = d + j;
            ents[nent++] = col;
        }
    }
    /* broadcast the index tensors */
    pl->nb = 0;
    for (int i = 0; i < nent; i++) {
        if (em_broadcast_shapes(pl->nb, pl->bshape, ents[i]->ndim, ents[i]->sizes, &pl->nb, pl->bshape) < 0) {
            PyErr_Clear();
            size_t used = 0;
            char msg[2048];
            used += (size_t)snprintf(msg, sizeof msg,
                                     "shape mismatch: indexing tensors could not be broadcast together with shapes ");
            for (int j = 0; j < nent && used < sizeof msg; j++)
                used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s", j ? ", " : "",
                                         em_shape_str(ents[j]->ndim, ents[j]->sizes, a, sizeof a));
            PyErr_SetString(PyExc_IndexError, msg);
            goto fail;
        }
    }
    /* adjacent indexed dims stay; others move to the front */
    bool adjacent = true;
    for (int i = 1; i < nent; i++) adjacent &= dims[i] == dims[0] + i;
    if (adjacent) {
        pl->src = (EmTensor *)Py_NewRef(view);
        pl->first = nent ? dims[0] : 0;
    } else {
        int64_t perm[EM_MAX_DIMS];
        int np = 0;
        bool used[EM_MAX_DIMS] = {false};
        for (int i = 0; i < nent; i++) {
            perm[np++] = dims[i];
            used[dims[i]] = true;
        }
        for (int d = 0; d < nd; d++)
            if (!used[d]) perm[np++] = d;
        pl->src = em_permute(view, nd, perm);
        if (!pl->src) goto fail;
        pl->first = 0;
    }
    pl->k = nent;
    if (plan_result_shape(pl) < 0) goto fail;
    if (em_numel_checked(pl->nb, pl->bshape, &pl->nj) < 0) goto fail;
    /* torch's AdvancedIndex: no value can index a dim of size 0 (except that
     * torch's index_put_ without accumulate, one index and an empty tensor
     * returns early) */
    for (int i = 0; i < nent && !(put && view->numel == 0 && nent == 1); i++)
        EM_CHECK(pl->nj == 0 || pl->src->sizes[pl->first + i] != 0, PyExc_IndexError,
                 "index is out of bounds for dimension with size 0");
    if (values && check_values_shape(pl, values) < 0) goto fail;
    if (em_is_meta(view)) { /* Note [meta device]: the result's shape; no offsets, no values read */
        Py_DECREF(keep);
        return 0;
    }
    pl->off = em_index_offsets_alloc(em_device(view), pl->nj, &pl->off_hold);
    if (!pl->off) goto fail;
    /* torch checks the index values as it copies: nothing to copy, no check
     * (and no loop reads the offsets then) */
    int64_t rnumel = prod_of(pl->first, pl->src->sizes) *
                     prod_of(pl->src->ndim - pl->first - pl->k, pl->src->sizes + pl->first + pl->k);
    if (rnumel == 0 || pl->nj == 0) {
        if (em_is_cpu(view)) memset(pl->off, 0, (size_t)pl->nj * sizeof(int64_t));
    } else {
        for (int i = 0; i < nent; i++) {
            int64_t bad, size = pl->src->sizes[pl->first + i];
            int64_t at = em_index_offsets(em_device(view), pl->off, i > 0, ents[i], pl->nb, pl->bshape, size,
                                          pl->src->strides[pl->first + i] * isz, EM_WRAP_NEG, &bad);
            EM_TRY(at != -2);
            EM_CHECK(at < 0, PyExc_IndexError, "index %lld is out of bounds for dimension %d with size %lld",
                     (long long)bad, i, (long long)size);
        }
    }
    Py_DECREF(keep);
    return 0;
fail:
    Py_XDECREF(keep);
    plan_clear(pl);
    return -1;
}

/* plan_build_on with CPU index tensors of a GPU view moved to its device
 * (torch allows them; the offsets are computed where the data is). */
static int plan_build(EmTensor *view, EmTensor **idx, AdvPlan *pl, const EmTensor *values, bool accumulate) {
    if (em_is_cpu(view)) return plan_build_on(view, idx, pl, values, accumulate);
    EmTensor *moved[EM_MAX_DIMS];
    int r = 0;
    for (int d = 0; d < view->ndim; d++) {
        moved[d] = idx[d] ? em_to_device(idx[d], em_device(view), false) : NULL;
        if (idx[d] && !moved[d]) {
            for (int e = 0; e < d; e++) Py_XDECREF(moved[e]);
            return -1;
        }
    }
    r = plan_build_on(view, moved, pl, values, accumulate);
    for (int d = 0; d < view->ndim; d++) Py_XDECREF(moved[d]);
    return r;
}

/* Drop size-1 dims and merge neighbours contiguous for both stride sets. */
static void coalesce(int *n, int64_t *size, int64_t *s1, int64_t *s2) {
    int m = 0;
    for (int i = 0; i < *n; i++) {
        if (size[i] == 1) continue;
        if (m > 0 && s1[m - 1] == s1[i] * size[i] && s2[m - 1] == s2[i] * size[i]) {
            size[m - 1] *= size[i];
            s1[m - 1] = s1[i];
            s2[m - 1] = s2[i];
            continue;
        }
        size[m] = size[i];
        s1[m] = s1[i];
        s2[m] = s2[i];
        m++;
    }
    *n = m;
}

/* The P and A parts of the loop: x is pl->src, d is a tensor (or an
 * expanded view) of the result's shape given by its byte strides rs[]. */
static void plan_geometry(const AdvPlan *pl, EmIndirect *g, char *d, const int64_t *rs) {
    EmTensor *s = pl->src;
    int isz = em_itemsize(s->dtype), after = s->ndim - pl->first - pl->k;
    g->x = em_data(s);
    g->d = d;
    g->np = pl->first;
    for (int i = 0; i < pl->first; i++) {
        g->psize[i] = s->sizes[i];
        g->ps_x[i] = s->strides[i] * isz;
        g->ps_d[i] = rs[i];
    }
    g->na = after;
    for (int i = 0; i < after; i++) {
        g->asize[i] = s->sizes[pl->first + pl->k + i];
        g->as_x[i] = s->strides[pl->first + pl->k + i] * isz;
        g->as_d[i] = rs[pl->first + pl->nb + i];
    }
    coalesce(&g->np, g->psize, g->ps_x, g->ps_d);
    coalesce(&g->na, g->asize, g->as_x, g->as_d);
    g->nj = pl->nj;
    g->off = pl->off;
    g->dense_off = NULL;
    g->dense_jstride = 0;
}

EmTensor *em_index_advanced(EmTensor *view, EmTensor **idx) {
    AdvPlan pl;
    if (em_index_device_ok(view, "index") < 0 || plan_build(view, idx, &pl, NULL, false) < 0) return NULL;
    EmTensor *out = em_empty(pl.rdim, pl.rshape, (EmDType)view->dtype, em_device(view));
    if (!out) goto done;
    if (out->numel > 0 && !em_is_meta(view)) { /* Note [meta device]: the shape only */
        int isz = em_itemsize(view->dtype);
        int64_t rs[EM_MAX_DIMS];
        for (int i = 0; i < pl.rdim; i++) rs[i] = out->strides[i] * isz;
        EmIndirect g;
        plan_geometry(&pl, &g, em_data(out), rs);
        g.dense_jstride = prod_of(g.na, g.asize) * isz; /* out is contiguous: j steps over A */
        if (em_index_gather_on(em_device(view), &g, isz) < 0) Py_CLEAR(out);
    }
done:
    plan_clear(&pl);
    return out;
}

/* ---------------------------------------------------------- overlap */

static void byte_range(const EmTensor *t, char **lo, char **hi) {
    int64_t span = 0;
    for (int d = 0; d < t->ndim; d++) span += (t->sizes[d] - 1) * t->strides[d];
    *lo = em_data(t);
    *hi = *lo + (span + 1) * em_itemsize(t->dtype);
}

int em_index_check_overlap(EmTensor *written, EmTensor *input) {
    if (!input || input->storage != written->storage || input->numel == 0 || written->numel == 0) return 0;
    if (!em_is_non_overlapping_and_dense(written) || !em_is_non_overlapping_and_dense(input)) return 1;
    char *alo, *ahi, *blo, *bhi;
    byte_range(written, &alo, &ahi);
    byte_range(input, &blo, &bhi);
    if (alo < bhi && blo < ahi) {
        PyErr_SetString(PyExc_RuntimeError,
                        "unsupported operation: some elements of the input tensor and the written-to "
                        "tensor refer to a single memory location. Please clone() the tensor before "
                        "performing the operation.");
        return -1;
    }
    return 0;
}

int em_index_check_internal_overlap(EmTensor *t) {
    if (em_is_non_overlapping_and_dense(t)) return 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] > 1 && t->strides[d] == 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "unsupported operation: more than one element of the written-to tensor "
                            "refers to a single memory location. Please clone() the tensor before "
                            "performing the operation.");
            return -1;
        }
    }
    return 0;
}

/* input itself, or a clone when it shares memory with `written` in a way the
 * overlap check cannot decide; NULL on error (new reference). */
static EmTensor *readable_input(EmTensor *written, EmTensor *input) {
    int r = em_index_check_overlap(written, input);
    if (r < 0) return NULL;
    return r ? em_clone(input) : (EmTensor *)Py_NewRef(input);
}

/* ---------------------------------------------------------- index_put */


EmTensor *em_masked_fill(EmTensor *self, EmTensor *mask, EmScalar value, bool inplace) {
    extern const EmKernels em_kernels_where;
    if (mask->dtype != EM_BOOL) {
        PyErr_Format(PyExc_RuntimeError, "masked_fill_ only supports boolean masks, but got mask with dtype %s",
                     em_dtype_ctype((EmDType)mask->dtype));
        return NULL;
    }
    if (em_scalar_check_range(value, (EmDType)self->dtype) < 0) return NULL;
    EmIterConfig cfg = em_iter_config("masked_fill", &em_kernels_where, EM_PROMOTE_NONE);
    cfg.bool_mask = EM_BOOL_IN(0);
    cfg.common_dtype = (int8_t)self->dtype;
    cfg.inputs[0] = em_opnd(mask);
    cfg.inputs[1] = em_opnd_scalar(value);
    cfg.inputs[2] = em_opnd(self);
    cfg.ninputs = 3;
    if (inplace) {
        cfg.out = self;
        cfg.inplace = true;
        cfg.allow_self_overlap = true; /* torch fills expanded tensors */
        return em_iter_run(&cfg);
    }
    int n; /* out of place: contiguous, as torch clones self */
    int64_t shape[EM_MAX_DIMS];
    if (em_broadcast_shapes(self->ndim, self->sizes, mask->ndim, mask->sizes, &n, shape) < 0) return NULL;
    EmTensor *r = em_empty(n, shape, (EmDType)self->dtype, em_device(self));
    if (!r) return NULL;
    cfg.out = r;
    EmTensor *done = em_iter_run(&cfg);
    Py_DECREF(r);
    return done;
}

/* torch's canDispatchToMaskedFill: one mask, a one-element value. */
static int put_as_masked_fill(EmTensor *view, EmTensor **idx, EmTensor *values) {
    int d = -1, n = 0;
    for (int i = 0; i < view->ndim; i++)
        if (idx[i]) {
            n++;
            d = i;
        }
    if (n != 1 || !is_mask(idx[d]) || values->numel != 1) return 0;
    EmTensor *m = idx[d], *moved = NULL;
    if (check_mask_shape(view, d, m) < 0) return -1;
    if (!em_is_cpu(view) && em_is_cpu(m)) { /* a CPU mask of a GPU tensor */
        if (!(moved = em_to_device(m, em_device(view), false))) return -1;
        m = moved;
    }
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int k = m->ndim, nd = view->ndim - d;
    for (int j = 0; j < nd; j++) {
        sizes[j] = j < k ? m->sizes[j] : 1;
        strides[j] = j < k ? m->strides[j] : 0;
    }
    EmTensor *mv = m->dtype == EM_BOOL ? em_view_of(m, nd, sizes, strides, m->offset) : NULL;
    if (m->dtype != EM_BOOL) {
        EmTensor *b = em_to_dtype(m, EM_BOOL, false);
        if (!b) {
            Py_XDECREF(moved);
            return -1;
        }
        mv = em_view_of(b, nd, sizes, strides, b->offset);
        Py_DECREF(b);
    }
    Py_XDECREF(moved);
    if (!mv) return -1;
    _Alignas(8) char vbuf[8];
    if (!em_is_cpu(values)) { /* the one value, read back from the device */
        if (em_cuda->memcpy(vbuf, -1, em_data(values), em_device(values).index, (size_t)em_itemsize(values->dtype),
                            false) < 0) {
            Py_DECREF(mv);
            return em_cuda_error("copy to the host");
        }
    } else {
        memcpy(vbuf, em_data(values), (size_t)em_itemsize(values->dtype));
    }
    EmScalar s = em_scalar_load(vbuf, (EmDType)values->dtype);
    EmTensor *r = em_masked_fill(view, mv, s, true);
    Py_DECREF(mv);
    if (!r) return -1;
    Py_DECREF(r);
    return 1;
}

/* Note [meta device]: index_put_ on meta checks what needs no data and
 * writes nothing; with a mask (its count is data) it checks the mask's
 * shape only, as torch's meta index_put_ does. */
static int meta_index_put_(EmTensor *view, EmTensor **idx, EmTensor *values, bool accumulate) {
    int masks = 0;
    for (int d = 0; d < view->ndim; d++)
        if (idx[d] && is_mask(idx[d])) {
            if (check_mask_shape(view, d, idx[d]) < 0) return -1;
            masks++;
        }
    if (masks) return 0;
    if (values->dtype != view->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Index put requires the source and destination dtypes match, got %s for the "
                     "destination and %s for the source.",
                     em_dtype_name((EmDType)view->dtype), em_dtype_name((EmDType)values->dtype));
        return -1;
    }
    AdvPlan pl;
    if (plan_build(view, idx, &pl, values, accumulate) < 0) return -1;
    plan_clear(&pl);
    return 0;
}

int em_index_put_(EmTensor *view, EmTensor **idx, EmTensor *values, bool accumulate) {
    if (em_is_meta(view)) return meta_index_put_(view, idx, values, accumulate);
    if (em_index_device_ok(view, "index_put_") < 0 || em_index_device_ok(values, "index_put_") < 0) return -1;
    if (!accumulate) {
        int r = put_as_masked_fill(view, idx, values);
        if (r != 0) return r < 0 ? -1 : 0;
    }
    if (values->dtype != view->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Index put requires the source and destination dtypes match, got %s for the "
                     "destination and %s for the source.",
                     em_dtype_name((EmDType)view->dtype), em_dtype_name((EmDType)values->dtype));
        return -1;
    }
    AdvPlan pl;
    if (plan_build(view, idx, &pl, values, accumulate) < 0) return -1;
    int ret = -1, isz = em_itemsize(view->dtype);
    EmTensor *vdev = NULL; /* CPU values of a GPU view, moved over */
    if (!em_is_cpu(view) && em_is_cpu(values)) {
        if (!(vdev = em_to_device(values, em_device(view), false))) {
            plan_clear(&pl);
            return -1;
        }
        values = vdev;
    }
    int64_t *doff = NULL, *ddoff = NULL;
    EmTensor *v = NULL, *ddoff_hold = NULL;
    if (view->numel == 0) { /* nothing to write */
        ret = 0;
        goto fail;
    }
    v = readable_input(view, values);
    EM_TRY(v);
    int64_t rs[EM_MAX_DIMS];
    for (int r = 0; r < pl.rdim; r++) {
        int vd = r - (pl.rdim - v->ndim);
        rs[r] = (vd < 0 || v->sizes[vd] == 1) ? 0 : v->strides[vd] * isz;
    }
    EmIndirect g;
    plan_geometry(&pl, &g, em_data(v), rs);
    /* the values' steps over the B dims: none, one stride, or an offset each */
    const int64_t *bs = rs + pl.first;
    bool zero = true, packed = true;
    int64_t step = 0, span = 1;
    for (int i = pl.nb - 1; i >= 0; i--) {
        if (pl.bshape[i] == 1) continue;
        zero &= bs[i] == 0;
        if (step == 0 && span == 1) step = bs[i];
        packed &= bs[i] == step * span;
        span *= pl.bshape[i];
    }
    if (zero) {
        g.dense_jstride = 0;
    } else if (packed) {
        g.dense_jstride = step;
    } else {
        doff = alloc_offsets(pl.nj);
        EM_TRY(doff);
        int64_t c[EM_MAX_DIMS] = {0}, o = 0;
        for (int64_t j = 0; j < pl.nj; j++) {
            doff[j] = o;
            for (int i = pl.nb - 1; i >= 0; i--) {
                o += bs[i];
                if (++c[i] < pl.bshape[i]) break;
                o -= c[i] * bs[i];
                c[i] = 0;
            }
        }
        g.dense_off = doff;
        if (!em_is_cpu(view)) { /* the values' offsets where the kernel reads them */
            ddoff = em_index_offsets_upload(em_device(view), doff, pl.nj, &ddoff_hold);
            EM_TRY(ddoff);
            g.dense_off = ddoff;
        }
    }
    bool par = em_is_non_overlapping_and_dense(pl.src);
    EmReduceOp op = accumulate ? EM_RED_SUM : EM_RED_ASSIGN;
    EM_TRY(em_index_put_on(em_device(view), &g, op, (EmDType)view->dtype, par) == 0);
    ret = 0;
fail:
    Py_XDECREF(v);
    Py_XDECREF(vdev);
    Py_XDECREF(ddoff_hold);
    PyMem_Free(doff);
    plan_clear(&pl);
    return ret;
}

/* indices (a tuple or list of tensors) aligned to self's dims */
static int parse_put_indices(EmTensor *self, PyObject *obj, EmTensor **idx, bool allow_none) {
    if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "index_put(): argument 'indices' (position 2) must be tuple of Tensors, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    PyObject **items = PySequence_Fast_ITEMS(obj);
    for (int d = 0; d < self->ndim; d++) idx[d] = NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError, "index_put_(): expected at least one index tensor");
        return -1;
    }
    if (n > self->ndim) {
        PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d (got %zd)", self->ndim, n);
        return -1;
    }
    int d = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (allow_none && items[i] == Py_None) { /* x[:, idx] = v: dim d is not indexed */
            d++;
            continue;
        }
        if (!em_is_tensor(items[i])) {
            PyErr_Format(PyExc_TypeError, "expected Tensor as element %zd in argument 1, but got %.100s", i,
                         Py_TYPE(items[i])->tp_name);
            return -1;
        }
        EmTensor *t = (EmTensor *)items[i];
        EmDType dt = (EmDType)t->dtype;
        if (dt != EM_INT64 && dt != EM_INT32 && !is_mask(t)) {
            PyErr_SetString(PyExc_IndexError, "tensors used as indices must be long, int, byte or bool tensors");
            return -1;
        }
        int used = is_mask(t) ? t->ndim : 1;
        if (d + used > self->ndim) {
            PyErr_Format(PyExc_IndexError, "too many indices for tensor of dimension %d (got %d)", self->ndim,
                         d + used);
            return -1;
        }
        if (is_mask(t) && t->ndim == 0) {
            PyErr_SetString(PyExc_IndexError, "index_put_(): 0-dimensional bool masks are not supported");
            return -1;
        }
        idx[d] = t;
        d += used;
    }
    return 0;
}

static PyObject *index_put(EmCall *c, bool allow_none) {
    EmTensor *self = em_arg_tensor(c, 0), *values = em_arg_tensor(c, 2), *target = NULL;
    EmTensor *idx[EM_MAX_DIMS];
    bool acc;
    em_arg_bool(c, 3, &acc);
    if (parse_put_indices(self, c->args[1], idx, allow_none) < 0) return NULL;
    if (c->inplace || c->def->writes_self) {
        target = (EmTensor *)Py_NewRef(self);
    } else {
        target = em_clone(self);
        if (!target) return NULL;
    }
    if (em_index_put_(target, idx, values, acc) < 0) Py_CLEAR(target);
    return (PyObject *)target;
}

PyObject *em_impl_index_put(EmCall *c) { return index_put(c, false); }
/* __setitem__'s advanced writes: None stands for a dim the key doesn't index */
PyObject *em_impl_setitem_put(EmCall *c) { return index_put(c, true); }

/* ---------------------------------------------------------- nonzero */

EmTensor *em_nonzero(EmTensor *t) {
    if (em_is_meta(t)) return em_index_meta_nonzero_error(), NULL;
    if (em_index_device_ok(t, "nonzero") < 0) return NULL;
    if (!em_is_cpu(t)) return em_index_nonzero_gpu(t);
    int nch = em_cpu_nonzero_chunks(t);
    int64_t counts[256], n = 0;
    bool big = t->numel >= 65536;
    if (big) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_nonzero_count(t, nch, counts);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_nonzero_count(t, nch, counts);
    }
    for (int c = 0; c < nch; c++) n += counts[c];
    int64_t shape[2] = {n, t->ndim};
    EmTensor *r = em_empty(2, shape, EM_INT64, em_device(t));
    if (r && n > 0 && big) {
        int64_t *coords = (int64_t *)em_data(r);
        Py_BEGIN_ALLOW_THREADS
        em_cpu_nonzero_fill(t, nch, counts, coords, NULL, NULL);
        Py_END_ALLOW_THREADS
    } else if (r && n > 0) {
        em_cpu_nonzero_fill(t, nch, counts, (int64_t *)em_data(r), NULL, NULL);
    }
    return r;
}

/* nonzero(as_tuple=True): the columns; a 0-d input counts as 1-d */
PyObject *em_nonzero_tuple(EmTensor *t) {
    EmTensor *nz = NULL;
    if (t->ndim == 0) {
        int64_t one = 1;
        EmTensor *t1 = em_view_of(t, 1, &one, &one, t->offset);
        if (!t1) return NULL;
        nz = em_nonzero(t1);
        Py_DECREF(t1);
    } else {
        nz = em_nonzero(t);
    }
    if (!nz) return NULL;
    PyObject *tup = PyTuple_New(nz->sizes[1]);
    for (int64_t j = 0; tup && j < nz->sizes[1]; j++) {
        EmTensor *col = em_select(nz, 1, j);
        if (!col) {
            Py_CLEAR(tup);
            break;
        }
        PyTuple_SET_ITEM(tup, j, (PyObject *)col);
    }
    Py_DECREF(nz);
    return tup;
}

/* The result `r` of an op with out=: copied into out, resized to r's shape
 * (warning when out had elements, unless the op's size is data-dependent). */
PyObject *em_index_into_out(EmTensor *out, EmTensor *r, bool warn) {
    if (!r) return NULL;
    bool same = out->ndim == r->ndim && !memcmp(out->sizes, r->sizes, r->ndim * sizeof(int64_t));
    int ok = (same || em_tensor_resize(out, r->ndim, r->sizes, warn) == 0) && em_copy_(out, (PyObject *)r) == 0;
    Py_DECREF(r);
    return ok ? Py_NewRef(out) : NULL;
}

PyObject *em_impl_nonzero(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    bool as_tuple;
    em_arg_bool(c, 2, &as_tuple);
    if (as_tuple) {
        if (c->out) {
            PyErr_SetString(PyExc_RuntimeError, "nonzero does not support the out kwarg when as_tuple is True");
            return NULL;
        }
        return em_nonzero_tuple(t);
    }
    if (c->out && c->out->dtype != EM_INT64) {
        PyErr_Format(PyExc_RuntimeError, "nonzero: Expected out tensor to have scalar type Long but got scalar type %s",
                     em_dtype_name((EmDType)c->out->dtype));
        return NULL;
    }
    EmTensor *r = em_nonzero(t);
    return c->out ? em_index_into_out(c->out, r, false) : (PyObject *)r;
}

PyObject *em_impl_argwhere(EmCall *c) { return (PyObject *)em_nonzero(em_arg_tensor(c, 0)); }

/* ------------------------------------------------------------ masked_* */

static int value_scalar(EmTensor *self, PyObject *v, const char *opname, EmScalar *s) {
    if (em_is_tensor(v) && em_is_meta((EmTensor *)v) && em_is_meta(self) && ((EmTensor *)v)->ndim == 0) {
        *s = (EmScalar){'i', {0}}; /* Note [meta device]: a meta value is never read; nothing is written */
        return 0;
    }
    if (em_is_tensor(v) && ((EmTensor *)v)->ndim != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s only supports a 0-dimensional value tensor, but got tensor with %d dimension(s).",
                     opname, ((EmTensor *)v)->ndim);
        return -1;
    }
    return em_scalar_from_py(v, s);
}

PyObject *em_impl_masked_fill(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *mask = em_arg_tensor(c, 1);
    EmScalar s;
    if (value_scalar(self, c->args[2], "masked_fill_", &s) < 0) return NULL;
    return (PyObject *)em_masked_fill(self, mask, s, c->inplace);
}

/* self and mask expanded to their broadcast shape (new references) */
static int broadcast_pair(EmTensor *a, EmTensor *b, EmTensor **ea, EmTensor **eb) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (em_broadcast_shapes(a->ndim, a->sizes, b->ndim, b->sizes, &n, shape) < 0) return -1;
    *ea = em_expand(a, n, shape);
    *eb = *ea ? em_expand(b, n, shape) : NULL;
    if (!*eb) {
        Py_CLEAR(*ea);
        return -1;
    }
    return 0;
}

PyObject *em_impl_masked_select(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *mask = em_arg_tensor(c, 1), *es, *em;
    if (mask->dtype != EM_BOOL) {
        PyErr_SetString(PyExc_RuntimeError, "masked_select: expected BoolTensor for mask");
        return NULL;
    }
    if (c->out && c->out->dtype != self->dtype) {
        PyErr_Format(PyExc_RuntimeError, "masked_select(): self and result must have the same scalar type");
        return NULL;
    }
    if (broadcast_pair(self, mask, &es, &em) < 0) return NULL;
    EmTensor *idx[EM_MAX_DIMS] = {NULL};
    EmTensor *r;
    if (es->ndim == 0) { /* a 0-d mask: as a 1-element one */
        int64_t one = 1;
        EmTensor *s1 = em_view_of(es, 1, &one, &one, es->offset), *m1 = em_view_of(em, 1, &one, &one, em->offset);
        idx[0] = m1;
        r = s1 && m1 ? em_index_advanced(s1, idx) : NULL;
        Py_XDECREF(s1);
        Py_XDECREF(m1);
    } else {
        idx[0] = em;
        r = em_index_advanced(es, idx);
    }
    Py_DECREF(es);
    Py_DECREF(em);
    return c->out ? em_index_into_out(c->out, r, false) : (PyObject *)r;
}

PyObject *em_impl_masked_scatter(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *mask = em_arg_tensor(c, 1), *source = em_arg_tensor(c, 2);
    EmTensor *target = NULL, *m = NULL, *src = NULL, *hold = NULL;
    int64_t *off = NULL, n = 0;
    if (mask->dtype != EM_BOOL) {
        PyErr_Format(PyExc_RuntimeError, "masked_scatter_ only supports boolean masks, but got mask with dtype %s",
                     em_dtype_name((EmDType)mask->dtype));
        return NULL;
    }
    if (source->dtype != self->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "masked_scatter: expected self and source to have same dtypes but got %s and %s",
                     em_dtype_name((EmDType)self->dtype), em_dtype_name((EmDType)source->dtype));
        return NULL;
    }
    if (em_index_device_ok(self, "masked_scatter") < 0) return NULL;
    if (c->inplace) {
        if (em_index_check_internal_overlap(self) < 0) return NULL;
        target = (EmTensor *)Py_NewRef(self);
        m = em_expand(mask, self->ndim, self->sizes);
        if (!m) goto fail;
    } else {
        EmTensor *es;
        if (broadcast_pair(self, mask, &es, &m) < 0) return NULL;
        target = em_clone_as(es, EM_CONTIGUOUS_FORMAT); /* as torch clones it */
        Py_DECREF(es);
        if (!target) goto fail;
    }
    if (em_is_meta(target)) { /* Note [meta device]: self's (broadcast) shape; the count needs data */
        Py_DECREF(m);
        return (PyObject *)target;
    }
    int isz = em_itemsize(target->dtype);
    int64_t ost[EM_MAX_DIMS];
    for (int d = 0; d < target->ndim; d++) ost[d] = target->strides[d] * isz;
    off = mask_offsets(m, ost, &n, &hold);
    if (!off) goto fail;
    EM_CHECK(n <= source->numel, PyExc_RuntimeError, "Number of elements of source < number of ones in mask");
    if (n > 0) {
        /* torch reads a source that is self as it was: a clone when shared */
        src = source->storage == target->storage ? em_clone(source) : em_contiguous(source);
        if (!src) goto fail;
        EmIndirect g;
        memset(&g, 0, sizeof g);
        g.x = em_data(target);
        g.d = em_data(src);
        g.nj = n;
        g.off = off;
        g.dense_jstride = isz;
        if (em_index_put_on(em_device(target), &g, EM_RED_ASSIGN, (EmDType)target->dtype, false) < 0) goto fail;
    }
    em_index_offsets_free(off, hold);
    Py_DECREF(m);
    Py_XDECREF(src);
    return (PyObject *)target;
fail:
    if (off) em_index_offsets_free(off, hold);
    Py_XDECREF(m);
    Py_XDECREF(src);
    Py_XDECREF(target);
    return NULL;
}

/* ------------------------------------------------------------ take */

PyObject *em_impl_take(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *index = em_arg_tensor(c, 1), *out = NULL, *hold = NULL, *x = NULL;
    int64_t *off = NULL;
    if (index->dtype != EM_INT64) {
        PyErr_Format(PyExc_RuntimeError, "take(): Expected a long tensor for index, but got %s",
                     em_dtype_name((EmDType)index->dtype));
        return NULL;
    }
    if (c->out && c->out->dtype != self->dtype) {
        PyErr_Format(PyExc_RuntimeError, "take(): self and result must have the same scalar type");
        return NULL;
    }
    if (em_index_device_ok(self, "take") < 0) return NULL;
    out = em_empty(index->ndim, index->sizes, (EmDType)self->dtype, em_device(self));
    if (!out || out->numel == 0 || em_is_meta(self)) goto done; /* meta: Note [meta device] */
    /* self is read contiguous, so flat positions are offsets on every device */
    x = em_contiguous(self);
    EM_TRY(x);
    off = em_index_offsets_alloc(em_device(self), out->numel, &hold);
    if (!off) goto fail;
    int isz = em_itemsize(self->dtype);
    int64_t bad, at = em_index_offsets(em_device(self), off, false, index, index->ndim, index->sizes, self->numel,
                                       isz, EM_WRAP_NEG, &bad);
    EM_TRY(at != -2);
    EM_CHECK(at < 0, PyExc_IndexError, "out of range: tried to access index %lld on a tensor of %lld elements.",
             (long long)bad, (long long)self->numel);
    EmIndirect g;
    memset(&g, 0, sizeof g);
    g.x = em_data(x);
    g.d = em_data(out);
    g.nj = out->numel;
    g.off = off;
    g.dense_jstride = isz;
    EM_TRY(em_index_gather_on(em_device(self), &g, isz) == 0);
done:
    if (off) em_index_offsets_free(off, hold);
    Py_XDECREF(x);
    return c->out ? em_index_into_out(c->out, out, true) : (PyObject *)out;
fail:
    if (off) em_index_offsets_free(off, hold);
    Py_XDECREF(x);
    Py_XDECREF(out);
    return NULL;
}
