/* sort.c — front-ends of sorting, selection and searching: sort, argsort,
 * msort, topk, kthvalue (kernels in cpu/sort.c), searchsorted / bucketize
 * (binary search per element), unique / unique_consecutive.
 *
 * torch's orders: NaN sorts after everything (first when descending), -0.0
 * equals +0.0, and sorting is stable in both directions. topk and kthvalue
 * break ties by the lower index (torch leaves their tie order unspecified).
 * Ops returning (values, indices) return torch.return_types named tuples and
 * take out=(values, indices). */
#include "../ember.h"
#include "fused_gpu.h"
#include "device_slot.h"
#include "../cuda/sort_logic.h"
#ifdef _OPENMP
#include <omp.h>
#endif


static int arg_dim(EmCall *c, int i, int ndim, int *dim) {
    int64_t d;
    if (em_arg_int(c, i, &d) < 0) return -1;
    return em_wrap_dim(d, ndim, dim);
}

/* An alias of t with a dim of length 1 inserted at `dim` (kthvalue without
 * keepdim: the kernel writes through it). Not a view: an internal operand. */
static EmTensor *with_dim(EmTensor *t, int dim) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    for (int d = 0, k = 0; d <= t->ndim; d++) {
        if (d == dim) {
            sizes[d] = 1;
            strides[d] = 0;
        } else {
            sizes[d] = t->sizes[k];
            strides[d] = t->strides[k++];
        }
    }
    EmTensor *r = em_tensor_alloc(&EmTensorType, t->storage, t->offset, t->ndim + 1, sizes, strides,
                                  (EmDType)t->dtype);
    if (r) em_version_share(r, t);
    return r;
}

/* One out= tensor: dtype must be exactly `want`; resized to shape. */
static int prepare_out(EmTensor *o, EmDType want, int ndim, const int64_t *shape, const char *fname) {
    if (o->dtype != want) {
        PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have dtype %s, but got %s instead",
                     em_dtype_ctype(want), em_dtype_ctype((EmDType)o->dtype));
        return -1;
    }
    if (!em_is_meta(o) && em_check_cpu(o, fname) < 0) return -1;
    bool same = o->ndim == ndim && !memcmp(o->sizes, shape, ndim * sizeof(int64_t));
    return same ? 0 : em_tensor_resize(o, ndim, shape, true);
}

/* out=(values, indices): NULLs when None; TypeError for other shapes. */
static int out_pair(EmCall *c, EmTensor **v, EmTensor **i) {
    PyObject *o = em_arg_named(c, "out");
    *v = *i = NULL;
    if (!o || o == Py_None) return 0;
    if (!PyTuple_Check(o) && !PyList_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'out' must be tuple of Tensors, not %.100s", c->def->name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (n != 2) {
        PyErr_Format(PyExc_TypeError, "expected tuple of 2 elements but got %zd", n);
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        PyObject *e = PySequence_Fast_ITEMS(o)[k];
        if (!em_is_tensor(e)) {
            PyErr_Format(PyExc_TypeError, "expected Tensor as element %d in argument %d, but got %.100s", k,
                         c->def->sig.out_index - 1, Py_TYPE(e)->tp_name);
            return -1;
        }
    }
    *v = (EmTensor *)PySequence_Fast_ITEMS(o)[0];
    *i = (EmTensor *)PySequence_Fast_ITEMS(o)[1];
    return 0;
}

static int64_t dim_len(const EmTensor *t, int dim) { return t->ndim ? t->sizes[dim] : 1; }

static bool shares(const EmTensor *a, const EmTensor *b) {
    return a && b && a->storage == b->storage && a->numel > 0 && b->numel > 0;
}

/* ------------------------------------------------------ GPU tensors */

/* Note [CUDA sort] (csrc/cuda/sort.h): GPU tensors are sorted by the
 * backend's row kernels. The sorted dim moves innermost in a contiguous copy
 * (rows x n), each row's first m results come back as rows x m and move
 * back into place. The backend lacking an entry raises EmNoCudaKernel
 * before anything is allocated (Note [CUDA fallback] then runs the op). */

/* t with `dim` moved last, contiguous (new reference); perm receives the order. */
static EmTensor *dim_last(EmTensor *t, int dim, int64_t *perm) {
    int k = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != dim) perm[k++] = d;
    if (t->ndim) perm[k] = dim;
    if (t->ndim <= 1 || dim == t->ndim - 1) return em_contiguous(t);
    EmTensor *p = em_permute(t, t->ndim, perm), *c = p ? em_contiguous(p) : NULL;
    Py_XDECREF(p);
    return c;
}

/* A rows x m result r (stolen; laid out as t's dims with dim last and of
 * length m) as a contiguous tensor of the final shape (nd, shape). */
static EmTensor *dim_back(EmTensor *r, const EmTensor *t, int dim, const int64_t *perm, int nd,
                          int64_t *shape) {
    if (!r) return NULL;
    EmTensor *res;
    if (nd != t->ndim || t->ndim <= 1 || dim == t->ndim - 1) { /* squeezed, or already in place */
        res = em_reshape(r, nd, shape);
    } else {
        int64_t back[EM_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) back[perm[d]] = d;
        EmTensor *p = em_permute(r, t->ndim, back);
        res = p ? em_contiguous(p) : NULL;
        Py_XDECREF(p);
    }
    Py_DECREF(r);
    return res;
}

/* One GPU out= tensor: torch's dtype and device checks, resized, then the
 * result copied in. New reference to o. */
static EmTensor *gpu_out(EmTensor *o, EmTensor *res, EmDType want, const EmTensor *t, int nd, const int64_t *shape) {
    if (o->dtype != want) {
        PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have dtype %s, but got %s instead",
                     em_dtype_ctype(want), em_dtype_ctype((EmDType)o->dtype));
        return NULL;
    }
    if (!em_device_eq(em_device(o), em_device(t))) {
        char a[32], b[32];
        PyErr_Format(PyExc_RuntimeError,
                     "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                     em_device_str(em_device(t), a, sizeof a), em_device_str(em_device(o), b, sizeof b));
        return NULL;
    }
    bool same = o->ndim == nd && !memcmp(o->sizes, shape, nd * sizeof(int64_t));
    if (!same && em_tensor_resize(o, nd, shape, true) < 0) return NULL;
    if (em_copy_(o, (PyObject *)res) < 0) return NULL;
    return (EmTensor *)Py_NewRef(o);
}

static PyObject *select_gpu(EmTensor *t, int dim, EmSelectMode mode, int64_t k, bool desc, int64_t m, int nd,
                            int64_t *shape, const char *rname, bool want_v, bool want_i, EmTensor *vout,
                            EmTensor *iout, const char *fname) {
    bool kth = mode == EM_SELECT_KTH;
    /* the GPU sorts have keys for the dtypes up to float64 only (csrc/cuda/sort_logic.h) */
    if ((kth ? !em_cuda->select_rows : !em_cuda->sort_rows) || em_is_wide_unsigned((EmDType)t->dtype))
        return em_fused_no_kernel(fname);
    EmDevice dev = em_device(t);
    int64_t perm[EM_MAX_DIMS], psizes[EM_MAX_DIMS], n = dim_len(t, dim), rows = 1;
    EmTensor *x = NULL, *v = NULL, *ix = NULL;
    for (int d = 0, j = 0; d < t->ndim; d++)
        if (d != dim) rows *= (psizes[j++] = t->sizes[d]);
    int pn = t->ndim ? t->ndim : 1;
    psizes[pn - 1] = m;
    EM_TRY(x = dim_last(t, dim, perm));
    if (want_v) EM_TRY(v = em_empty(pn, psizes, (EmDType)t->dtype, dev));
    if (want_i) EM_TRY(ix = em_empty(pn, psizes, EM_INT64, dev));
    if (rows > 0 && m > 0) {
        void *vp = v ? em_data(v) : NULL;
        int64_t *ip = ix ? (int64_t *)em_data(ix) : NULL;
        int rc = kth ? em_cuda->select_rows(dev.index, 3, t->dtype, em_data(x), rows, n, k, vp, ip)
                     : em_cuda->sort_rows(dev.index, t->dtype, em_data(x), rows, n, desc, m, vp, ip);
        if (rc < 0) {
            em_cuda_error(fname);
            goto fail;
        }
    }
    Py_CLEAR(x);
    if (v) EM_TRY(v = dim_back(v, t, dim, perm, nd, shape));
    if (ix) EM_TRY(ix = dim_back(ix, t, dim, perm, nd, shape));
    if (v && vout) Py_SETREF(v, gpu_out(vout, v, (EmDType)t->dtype, t, nd, shape));
    if (want_v && !v) goto fail;
    if (ix && iout) Py_SETREF(ix, gpu_out(iout, ix, EM_INT64, t, nd, shape));
    if (want_i && !ix) goto fail;
    if (vout && iout) { /* Note [when versions change]: a pair of out= tensors is ours to bump */
        em_bump_version(vout);
        em_bump_version(iout);
    }
    if (want_v && want_i) {
        char name[40];
        snprintf(name, sizeof name, vout ? "%s_out" : "%s", rname);
        return em_return_pair(name, "values", "indices", (PyObject *)v, (PyObject *)ix);
    }
    return want_v ? (PyObject *)v : (PyObject *)ix;
fail:
    Py_XDECREF(x);
    Py_XDECREF(v);
    Py_XDECREF(ix);
    return NULL;
}

/* The common driver of sort / argsort / msort / topk / kthvalue: the result
 * has t's shape with dim of length m (dropped when `squeeze`). vout / iout
 * are out= tensors or NULL; want_v / want_i select the results. Returns a
 * (values, indices) pair named rname, or the single wanted tensor. */
static PyObject *select_op(bool gpu, EmTensor *t, int dim, EmSelectMode mode, int64_t k, bool desc, int64_t m,
                           bool squeeze, const char *rname, bool want_v, bool want_i, EmTensor *vout,
                           EmTensor *iout, const char *fname) {
    int64_t shape[EM_MAX_DIMS];
    int nd = t->ndim;
    EmTensor *v = NULL, *ix = NULL, *kv = NULL, *ki = NULL;
    if (em_is_complex(t->dtype)) { /* complex numbers have no order (torch's TypeError) */
        PyErr_Format(PyExc_TypeError, "%s does not support complex dtypes", fname);
        return NULL;
    }
    memcpy(shape, t->sizes, nd * sizeof(int64_t));
    if (nd) shape[dim] = m;
    if (squeeze && nd) {
        memmove(shape + dim, shape + dim + 1, (nd - dim - 1) * sizeof(int64_t));
        nd--;
    }
    if (gpu)
        return select_gpu(t, dim, mode, k, desc, m, nd, shape, rname, want_v, want_i, vout, iout, fname);
    const bool meta = em_is_meta(t); /* Note [meta device]: the results' shapes only */
    if (!meta && em_check_cpu(t, fname) < 0) return NULL;
    if (want_v && vout && prepare_out(vout, (EmDType)t->dtype, nd, shape, fname) < 0) return NULL;
    if (want_i && iout && prepare_out(iout, EM_INT64, nd, shape, fname) < 0) return NULL;
    /* out= tensors that alias the input (or each other) get the result by copy */
    bool direct_v = vout && !shares(vout, t), direct_i = iout && !shares(iout, t) && !shares(iout, vout);
    /* a full sort is laid out like its input (torch's empty_like), the others contiguous */
    bool like = mode == EM_SELECT_SORT && nd == t->ndim && nd > 0;
    if (want_v)
        v = direct_v ? (EmTensor *)Py_NewRef(vout)
            : like   ? em_empty_like(t, (EmDType)t->dtype)
                     : em_empty(nd, shape, (EmDType)t->dtype, em_device(t));
    if (want_i)
        ix = direct_i ? (EmTensor *)Py_NewRef(iout)
             : like   ? em_empty_like(t, EM_INT64)
                      : em_empty(nd, shape, EM_INT64, em_device(t));
    if ((want_v && !v) || (want_i && !ix)) goto fail;
    bool insert = squeeze && t->ndim > 0;
    if (v) kv = insert ? with_dim(v, dim) : (EmTensor *)Py_NewRef(v);
    if (ix) ki = insert ? with_dim(ix, dim) : (EmTensor *)Py_NewRef(ix);
    if ((v && !kv) || (ix && !ki)) goto fail;
    if (!meta && em_cpu_sort_select(t, dim, mode, k, desc, kv, ki) < 0) goto fail;
    if (v && vout && !direct_v) {
        if (em_copy_(vout, (PyObject *)v) < 0) goto fail;
        Py_SETREF(v, (EmTensor *)Py_NewRef(vout));
    }
    if (ix && iout && !direct_i) {
        if (em_copy_(iout, (PyObject *)ix) < 0) goto fail;
        Py_SETREF(ix, (EmTensor *)Py_NewRef(iout));
    }
    /* Note [when versions change]: the binding layer bumps single out=
     * tensors; a pair of them is ours to bump */
    if (vout && iout) {
        em_bump_version(vout);
        em_bump_version(iout);
    }
    Py_XDECREF(kv);
    Py_XDECREF(ki);
    if (want_v && want_i) {
        char name[40];
        snprintf(name, sizeof name, vout ? "%s_out" : "%s", rname);
        return em_return_pair(name, "values", "indices", (PyObject *)v, (PyObject *)ix);
    }
    return want_v ? (PyObject *)v : (PyObject *)ix;
fail:
    Py_XDECREF(kv);
    Py_XDECREF(ki);
    Py_XDECREF(v);
    Py_XDECREF(ix);
    return NULL;
}


static PyObject *sort_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *vo, *io;
    int dim;
    bool desc;
    if (arg_dim(c, 1, t->ndim, &dim) < 0 || em_arg_bool(c, 2, &desc) < 0 || out_pair(c, &vo, &io) < 0)
        return NULL;
    return select_op(gpu, t, dim, EM_SELECT_SORT, 0, desc, dim_len(t, dim), false, "sort", true, true, vo, io, "sort");
}
EM_DEVICE_SLOTS(sort, sort_op)

static PyObject *argsort_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim;
    bool desc;
    if (arg_dim(c, 1, t->ndim, &dim) < 0 || em_arg_bool(c, 2, &desc) < 0) return NULL;
    return select_op(gpu, t, dim, EM_SELECT_SORT, 0, desc, dim_len(t, dim), false, "argsort", false, true, NULL, NULL,
                     "argsort");
}
EM_DEVICE_SLOTS(argsort, argsort_op)

static PyObject *msort_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0);
    return select_op(gpu, t, 0, EM_SELECT_SORT, 0, false, dim_len(t, 0), false, "msort", true, false, c->out, NULL,
                     "msort");
}
EM_DEVICE_SLOTS(msort, msort_op)

static PyObject *topk_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *vo, *io;
    int64_t k;
    int dim;
    bool largest;
    if (em_arg_int(c, 1, &k) < 0 || arg_dim(c, 2, t->ndim, &dim) < 0 || em_arg_bool(c, 3, &largest) < 0 ||
        out_pair(c, &vo, &io) < 0)
        return NULL;
    if (t->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "topk does not support bool dtypes on CPU");
        return NULL;
    }
    if (k < 0 || k > dim_len(t, dim)) {
        PyErr_SetString(PyExc_RuntimeError, "selected index k out of range");
        return NULL;
    }
    if (t->ndim == 0) k = 1; /* a 0-d input is its own top-k for k = 0 and 1 */
    /* sorted=False: any order is allowed; sorted is one */
    return select_op(gpu, t, dim, EM_SELECT_TOPK, k, largest, k, false, "topk", true, true, vo, io, "topk");
}
EM_DEVICE_SLOTS(topk, topk_op)

static PyObject *kthvalue_op(EmCall *c, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *vo, *io;
    int64_t k;
    int dim;
    bool keepdim;
    if (em_arg_int(c, 1, &k) < 0 || arg_dim(c, 2, t->ndim, &dim) < 0 || em_arg_bool(c, 3, &keepdim) < 0 ||
        out_pair(c, &vo, &io) < 0)
        return NULL;
    if (t->dtype == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "\"kthvalue_cpu\" not implemented for 'Bool'");
        return NULL;
    }
    if (dim_len(t, dim) == 0) {
        PyErr_Format(PyExc_IndexError, "kthvalue(): Expected reduction dim %d to have non-zero size.", dim);
        return NULL;
    }
    if (k < 1 || k > dim_len(t, dim)) {
        PyErr_Format(PyExc_RuntimeError, "kthvalue(): selected number k out of range for dimension %d", dim);
        return NULL;
    }
    return select_op(gpu, t, dim, EM_SELECT_KTH, k, false, 1, !keepdim, "kthvalue", true, true, vo, io, "kthvalue");
}
EM_DEVICE_SLOTS(kthvalue, kthvalue_op)

/* ---------------------------------------------------- searchsorted */

/* For each value: the first boundary index i with bd[i] >= v (left) or
 * bd[i] > v (right), written as torch's cus_lower_bound / cus_upper_bound so
 * that NaNs land where torch puts them. Boundaries (rows of L) and values
 * are contiguous and of one C type; a row per `per_row` values (0: one row). */
#ifdef _OPENMP
#define OMP_SEARCH _Pragma("omp parallel for if (nval >= EM_GRAIN && em_num_threads > 1) num_threads(em_num_threads)")
#else
#define OMP_SEARCH
#endif
/* the binary search itself is the GPU's (cuda/sort_logic.h), one per type */
#define SEARCH_KERNEL(T, SEARCH)                                                                      \
    static void search_##T(const T *bd, const int64_t *srt, int64_t L, const T *val, int64_t nval,       \
                           int64_t per_row, bool right, bool i32, char *out) {                           \
        OMP_SEARCH                                                                                       \
        for (int64_t j = 0; j < nval; j++) {                                                             \
            int64_t row = per_row ? j / per_row : 0;                                                     \
            int64_t lo = SEARCH(bd + row * L, srt ? srt + row * L : NULL, L, val[j], right);             \
            if (i32)                                                                                     \
                ((int32_t *)out)[j] = (int32_t)lo;                                                       \
            else                                                                                         \
                ((int64_t *)out)[j] = lo;                                                                \
        }                                                                                                \
    }
SEARCH_KERNEL(uint8_t, emc_search_u8)
SEARCH_KERNEL(int8_t, emc_search_i8)
SEARCH_KERNEL(int16_t, emc_search_i16)
SEARCH_KERNEL(int32_t, emc_search_i32)
SEARCH_KERNEL(int64_t, emc_search_i64)
SEARCH_KERNEL(float, emc_search_f32)
SEARCH_KERNEL(double, emc_search_f64)

/* t cast to d and made contiguous (new reference). */
static EmTensor *as_contig(EmTensor *t, EmDType d) {
    EmTensor *x = em_to_dtype(t, d, false);
    if (x && !em_is_contiguous(x)) Py_SETREF(x, em_contiguous(x));
    return x;
}

static PyObject *search_impl(EmCall *c, bool gpu, EmTensor *bd, PyObject *input, bool out_int32, bool right,
                             EmTensor *sorter, const char *fname) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    EmTensor *in = NULL, *bc = NULL, *vc = NULL, *sc = NULL, *r = NULL;
    if (em_is_tensor(input)) {
        in = (EmTensor *)Py_NewRef(input);
    } else { /* a Python number: a 0-d tensor of its own type (float64 for floats) */
        EmScalar s;
        if (em_scalar_from_py(input, &s) < 0) return NULL;
        in = em_scalar_tensor(s, s.kind == 'f' ? EM_FLOAT64 : s.kind == 'c' ? EM_COMPLEX128 : s.kind == 'b' ? EM_BOOL
                                 : s.kind == 'u' ? EM_UINT64 : EM_INT64, em_cpu());
        if (!in) return NULL;
    }
    /* Note [CUDA sort]: GPU boundaries are searched by the backend; a number
     * or 0-d CPU tensor searched in them moves to their device */
    if (gpu && !em_cuda->search) {
        Py_DECREF(in);
        return em_fused_no_kernel(fname);
    }
    if (gpu && em_is_cpu(in)) { /* not dispatch: a number or 0-d CPU tensor beside GPU boundaries */
        Py_SETREF(in, em_to_device(in, em_device(bd), false));
        EM_TRY(in);
    }
    const bool meta = em_is_meta(bd); /* Note [meta device]: the result's shape only, no sorter read */
    EM_TRY(gpu || meta || (em_check_cpu(bd, fname) == 0 && em_check_cpu(in, fname) == 0));
    EM_CHECK(bd->ndim > 0, PyExc_RuntimeError,
             "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension");
    EM_CHECK(bd->ndim == 1 || in->ndim > 0, PyExc_RuntimeError,
             "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, "
             "but we got boundaries tensor dim(%d) and input value's dim(%d) numel(%lld)", bd->ndim, in->ndim,
             (long long)in->numel);
    if (bd->ndim > 1) {
        bool ok = bd->ndim == in->ndim && !memcmp(bd->sizes, in->sizes, (bd->ndim - 1) * sizeof(int64_t));
        EM_CHECK(ok, PyExc_RuntimeError,
                 "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                 "boundaries tensor and input value tensor must match, but we got boundaries tensor %s and "
                 "input value tensor %s", em_shape_str(bd->ndim, bd->sizes, a, sizeof a),
                 em_shape_str(in->ndim, in->sizes, b, sizeof b));
    }
    if (sorter) {
        EM_CHECK(sorter->dtype == EM_INT64, PyExc_RuntimeError,
                 "torch.searchsorted(): sorter must be a tensor of long dtype but got dtype %s",
                 em_dtype_name((EmDType)sorter->dtype));
        EM_CHECK(sorter->ndim == bd->ndim && !memcmp(sorter->sizes, bd->sizes, bd->ndim * sizeof(int64_t)),
                 PyExc_RuntimeError,
                 "torch.searchsorted(): boundary and sorter must have the same size, but got boundary tensor "
                 "%sand got sorter tensor %s", em_shape_str(bd->ndim, bd->sizes, a, sizeof a),
                 em_shape_str(sorter->ndim, sorter->sizes, b, sizeof b));
    }
    EmDType out_dt = out_int32 ? EM_INT32 : EM_INT64;
    if (c->out) {
        EM_CHECK(c->out->dtype == out_dt, PyExc_RuntimeError,
                 "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) "
                 "depending on whether out_int32 flag is True, but we got output tensor's dtype %s and out_int32 "
                 "flag is %s", em_dtype_name((EmDType)c->out->dtype), out_int32 ? "True" : "False");
        EM_TRY(gpu || meta || em_check_cpu(c->out, fname) == 0);
    }
    EmDType common = em_promote_types((EmDType)bd->dtype, (EmDType)in->dtype);
    EM_TRY(common != EM_DTYPE_ERROR);
    EM_CHECK(common != EM_BOOL && !em_is_wide_unsigned(common), PyExc_NotImplementedError,
             "\"searchsorted_out_cpu\" not implemented for '%s'", em_dtype_name(common));
    /* compare in the common dtype (as torch does); halves widen exactly to float32 */
    EmTensor *bcom = em_to_dtype(bd, common, false), *vcom = bcom ? em_to_dtype(in, common, false) : NULL;
    EmDType kd = em_compute_dtype(common);
    if (vcom) {
        bc = as_contig(bcom, kd);
        vc = bc ? as_contig(vcom, kd) : NULL;
    }
    Py_XDECREF(bcom);
    Py_XDECREF(vcom);
    EM_TRY(vc);
    int64_t L = bd->sizes[bd->ndim - 1];
    if (sorter) {
        EM_TRY(sc = as_contig(sorter, EM_INT64));
        const int64_t *s = gpu || meta ? NULL : (const int64_t *)em_data(sc);
        for (int64_t i = 0; s && i < sc->numel; i++)
            EM_CHECK(s[i] >= 0 && s[i] < L, PyExc_RuntimeError, "torch.searchsorted(): sorter index out of range");
    }
    r = em_empty(in->ndim, in->sizes, out_dt, em_device(bd));
    EM_TRY(r);
    if (gpu) { /* the backend checks the sorter on the device first (1: out of range) */
        int64_t per_row = bd->ndim > 1 ? in->sizes[in->ndim - 1] : 0;
        int rc = em_cuda->search(em_device(bd).index, kd, em_data(bc), sc ? (const int64_t *)em_data(sc) : NULL,
                                 bc->numel / (L ? L : 1), L, em_data(vc), r->numel, per_row, right, out_int32,
                                 em_data(r));
        EM_CHECK(rc != 1, PyExc_RuntimeError, "torch.searchsorted(): sorter index out of range");
        if (rc < 0) {
            em_cuda_error(fname);
            goto fail;
        }
    } else if (r->numel > 0 && !meta) {
        int64_t per_row = bd->ndim > 1 ? in->sizes[in->ndim - 1] : 0;
        const int64_t *srt = sc ? (const int64_t *)em_data(sc) : NULL;
        char *o = em_data(r);
        const void *bp = em_data(bc), *vp = em_data(vc);
        PyThreadState *ts = r->numel >= 65536 ? PyEval_SaveThread() : NULL;
        switch (kd) {
        case EM_UINT8: search_uint8_t(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        case EM_INT8: search_int8_t(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        case EM_INT16: search_int16_t(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        case EM_INT32: search_int32_t(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        case EM_INT64: search_int64_t(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        case EM_FLOAT32: search_float(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        default: search_double(bp, srt, L, vp, r->numel, per_row, right, out_int32, o); break;
        }
        if (ts) PyEval_RestoreThread(ts);
    }
    if (c->out) { /* dtype checked above: resize and copy */
        EmTensor *out = c->out;
        bool same = out->ndim == r->ndim && !memcmp(out->sizes, r->sizes, r->ndim * sizeof(int64_t));
        EM_TRY(same || em_tensor_resize(out, r->ndim, r->sizes, true) == 0);
        EM_TRY(em_copy_(out, (PyObject *)r) == 0);
        Py_SETREF(r, (EmTensor *)Py_NewRef(out));
    }
    goto done;
fail:
    Py_CLEAR(r);
done:
    Py_XDECREF(in);
    Py_XDECREF(bc);
    Py_XDECREF(vc);
    Py_XDECREF(sc);
    return (PyObject *)r;
}

static PyObject *searchsorted_op(EmCall *c, bool gpu) {
    bool out_int32, right;
    em_arg_bool(c, 2, &out_int32);
    em_arg_bool(c, 3, &right);
    if (!em_arg_is_none(c, 4)) {
        const char *side = PyUnicode_AsUTF8(c->args[4]);
        if (!side) return NULL;
        if (strcmp(side, "left") && strcmp(side, "right")) {
            PyErr_Format(PyExc_RuntimeError, "torch.searchsorted(): side can only be 'left' or 'right' but got %s",
                         side);
            return NULL;
        }
        bool side_right = !strcmp(side, "right");
        if (right && !side_right) {
            PyErr_Format(PyExc_RuntimeError,
                         "torch.searchsorted(): side and right can't be set to opposites, got side of %s while "
                         "right was True", side);
            return NULL;
        }
        right = side_right;
    }
    return search_impl(c, gpu, em_arg_tensor(c, 0), c->args[1], out_int32, right, em_arg_tensor(c, 5), "searchsorted");
}
EM_DEVICE_SLOTS(searchsorted, searchsorted_op)

static PyObject *bucketize_op(EmCall *c, bool gpu) {
    EmTensor *bd = em_arg_tensor(c, 1);
    bool out_int32, right;
    em_arg_bool(c, 2, &out_int32);
    em_arg_bool(c, 3, &right);
    if (bd->ndim != 1) {
        PyErr_Format(PyExc_RuntimeError, "boundaries tensor must be 1 dimension, but got dim(%d)", bd->ndim);
        return NULL;
    }
    return search_impl(c, gpu, bd, c->args[0], out_int32, right, NULL, "bucketize");
}
EM_DEVICE_SLOTS(bucketize, bucketize_op)

/* ------------------------------------------------------------- unique */

/* Note [unique equality]: two elements are equal when their sort keys are
 * (Note [sort keys]) — except NaNs, which torch treats as all distinct. */
static uint64_t nan_key(EmDType d) {
    int bits = em_sort_key_bits(d);
    return em_is_float(d) ? (bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1) : 0;
}

static bool rows_equal(const uint64_t *a, const uint64_t *b, int64_t n, uint64_t nan, bool is_float) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i] || (is_float && a[i] == nan)) return false;
    return true;
}

/* Stable merge sort of row indices by their key rows (lexicographic). */
typedef struct {
    const uint64_t *keys;
    int64_t rl;
} RowCmp;

static bool row_lt(const RowCmp *rc, int64_t x, int64_t y) {
    const uint64_t *a = rc->keys + x * rc->rl, *b = rc->keys + y * rc->rl;
    for (int64_t i = 0; i < rc->rl; i++)
        if (a[i] != b[i]) return a[i] < b[i];
    return x < y;
}

static void sort_rows(const RowCmp *rc, int64_t *idx, int64_t *tmp, int64_t n) {
    if (n < 2) return;
    int64_t h = n / 2;
    sort_rows(rc, idx, tmp, h);
    sort_rows(rc, idx + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = row_lt(rc, idx[j], idx[i]) ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof(int64_t));
}

/* The tuple torch returns: the values alone, or with inverse and/or counts. */
static PyObject *unique_result(EmTensor *vals, EmTensor *inv, EmTensor *cnt, bool want_inv, bool want_cnt) {
    if (!vals || (want_inv && !inv) || (want_cnt && !cnt)) goto fail;
    if (!want_inv && !want_cnt) {
        Py_XDECREF(inv);
        Py_XDECREF(cnt);
        return (PyObject *)vals;
    }
    PyObject *tup = PyTuple_New(1 + want_inv + want_cnt);
    if (!tup) goto fail;
    int k = 0;
    PyTuple_SET_ITEM(tup, k++, (PyObject *)vals);
    if (want_inv) PyTuple_SET_ITEM(tup, k++, (PyObject *)inv);
    else Py_XDECREF(inv);
    if (want_cnt) PyTuple_SET_ITEM(tup, k++, (PyObject *)cnt);
    else Py_XDECREF(cnt);
    return tup;
fail:
    Py_XDECREF(vals);
    Py_XDECREF(inv);
    Py_XDECREF(cnt);
    return NULL;
}

/* unique / unique_consecutive over rows: `x` is contiguous (m, rl...) with
 * rows along dim 0 (rl elements each; dim=None: rl = 1). sorted: sort the
 * rows first. Returns the unique rows (g, ...) in x's layout, the inverse
 * (m) and the counts (g). */
static int unique_rows(EmTensor *x, bool sorted, EmTensor **vals, EmTensor **inv, EmTensor **cnt) {
    int64_t m = x->ndim ? x->sizes[0] : 1, rl = m ? x->numel / m : 0, g = 0;
    EmDType dt = (EmDType)x->dtype;
    int isz = em_itemsize(dt);
    uint64_t *keys = NULL;
    int64_t *order = NULL, *tmp = NULL, *group = NULL;
    size_t kb;
    *vals = *inv = *cnt = NULL;
    if (__builtin_mul_overflow((size_t)(x->numel ? x->numel : 1), sizeof(uint64_t), &kb)) goto nomem;
    keys = PyMem_Malloc(kb);
    order = PyMem_Malloc((size_t)(m ? m : 1) * 3 * sizeof(int64_t));
    if (!keys || !order) goto nomem;
    tmp = order + m;
    group = tmp + m;
    em_cpu_sort_keys(em_data(x), isz, x->numel, dt, false, keys);
    for (int64_t i = 0; i < m; i++) order[i] = i;
    if (sorted) {
        if (rl == 1) { /* one element per row: the radix/merge kernel */
            EmTensor *idx = em_empty(1, &m, EM_INT64, em_cpu()), *flat = NULL;
            int64_t one = m;
            flat = idx ? em_tensor_alloc(&EmTensorType, x->storage, x->offset, 1, &one, NULL, dt) : NULL;
            int rc = flat ? em_cpu_sort_select(flat, 0, EM_SELECT_SORT, 0, false, NULL, idx) : -1;
            if (rc == 0) memcpy(order, em_data(idx), (size_t)m * sizeof(int64_t));
            Py_XDECREF(idx);
            Py_XDECREF(flat);
            if (rc < 0) goto fail;
        } else {
            RowCmp rc = {keys, rl};
            sort_rows(&rc, order, tmp, m);
        }
    }
    uint64_t nan = nan_key(dt);
    bool fl = em_is_float(dt);
    for (int64_t i = 0; i < m; i++) { /* group[i]: the group of the i-th row in order */
        if (i > 0 && rows_equal(keys + order[i] * rl, keys + order[i - 1] * rl, rl, nan, fl))
            group[i] = group[i - 1];
        else
            group[i] = g++;
    }
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, x->sizes, x->ndim * sizeof(int64_t));
    if (x->ndim) shape[0] = g;
    *vals = em_empty(x->ndim ? x->ndim : 1, x->ndim ? shape : &g, dt, em_cpu());
    *inv = em_empty(1, &m, EM_INT64, em_cpu());
    *cnt = em_zeros(1, &g, EM_INT64, em_cpu());
    if (!*vals || !*inv || !*cnt) goto fail;
    int64_t *iv = (int64_t *)em_data(*inv), *cv = (int64_t *)em_data(*cnt);
    char *vd = em_data(*vals);
    const char *xd = em_data(x);
    size_t rb = (size_t)rl * isz;
    for (int64_t i = 0; i < m; i++) {
        int64_t gi = group[i];
        if (cv[gi]++ == 0) memcpy(vd + gi * rb, xd + order[i] * rb, rb); /* first of its group */
        iv[order[i]] = gi;
    }
    PyMem_Free(keys);
    PyMem_Free(order);
    return 0;
nomem:
    PyErr_NoMemory();
fail:
    PyMem_Free(keys);
    PyMem_Free(order);
    Py_CLEAR(*vals);
    Py_CLEAR(*inv);
    Py_CLEAR(*cnt);
    return -1;
}

/* unique / unique_consecutive (dim=None) of a GPU tensor (Note [CUDA sort]):
 * the flattened elements sorted stably on the device (unique) or taken as
 * they are (unique_consecutive), then grouped by the backend, which reads
 * the number of groups back; results are the first g of n-long buffers. */
static PyObject *unique_gpu(EmTensor *t, bool sorted, bool want_inv, bool want_cnt) {
    if (!em_cuda->unique || (sorted && !em_cuda->sort_rows) || em_is_wide_unsigned((EmDType)t->dtype))
        return em_fused_no_kernel("unique");
    EmDevice dev = em_device(t);
    EmDType dt = (EmDType)t->dtype;
    int64_t n = t->numel, g = 0, m1 = -1;
    EmTensor *x = NULL, *sv = NULL, *perm = NULL, *vals = NULL, *inv = NULL, *cnt = NULL, *r[3] = {NULL, NULL, NULL};
    EmTensor *flat = em_reshape(t, 1, &m1);
    EM_TRY(flat && (x = em_contiguous(flat)));
    EM_TRY(vals = em_empty(1, &n, dt, dev));
    EM_TRY(inv = em_empty(1, &n, EM_INT64, dev));
    EM_TRY(cnt = em_empty(1, &n, EM_INT64, dev));
    if (sorted) {
        EM_TRY(sv = em_empty(1, &n, dt, dev));
        EM_TRY(perm = em_empty(1, &n, EM_INT64, dev));
        if (n && em_cuda->sort_rows(dev.index, dt, em_data(x), 1, n, false, n, em_data(sv), (int64_t *)em_data(perm)) < 0) {
            em_cuda_error("unique");
            goto fail;
        }
    }
    if (n && em_cuda->unique(dev.index, dt, em_data(sorted ? sv : x), perm ? (const int64_t *)em_data(perm) : NULL, n,
                             em_data(vals), want_inv ? (int64_t *)em_data(inv) : NULL,
                             want_cnt ? (int64_t *)em_data(cnt) : NULL, &g) < 0) {
        em_cuda_error("unique");
        goto fail;
    }
    EM_TRY(r[0] = em_tensor_alloc(&EmTensorType, vals->storage, 0, 1, &g, NULL, dt));
    EM_TRY(r[1] = em_tensor_alloc(&EmTensorType, inv->storage, 0, t->ndim, t->sizes, NULL, EM_INT64));
    EM_TRY(r[2] = em_tensor_alloc(&EmTensorType, cnt->storage, 0, 1, &g, NULL, EM_INT64));
    Py_XDECREF(flat);
    Py_XDECREF(x);
    Py_XDECREF(sv);
    Py_XDECREF(perm);
    Py_XDECREF(vals);
    Py_XDECREF(inv);
    Py_XDECREF(cnt);
    return unique_result(r[0], r[1], r[2], want_inv, want_cnt);
fail:
    Py_XDECREF(flat);
    Py_XDECREF(x);
    Py_XDECREF(sv);
    Py_XDECREF(perm);
    Py_XDECREF(vals);
    Py_XDECREF(inv);
    Py_XDECREF(cnt);
    for (int k = 0; k < 3; k++) Py_XDECREF(r[k]);
    return NULL;
}

/* unique / unique_consecutive along a dim of a GPU tensor, Note [CUDA unique
 * dim] (csrc/cuda/unique_dim.h): x is the input with that dim first,
 * contiguous on the device (m rows of rl elements). The backend groups the
 * rows and reads the number of groups back; *vals (g, rest...) views the
 * first g rows of an m-row buffer, *inv (m), *cnt (g). */
static int unique_dim_gpu(EmTensor *x, bool sorted, bool want_inv, bool want_cnt, EmTensor **vals, EmTensor **inv,
                          EmTensor **cnt) {
    EmDevice dev = em_device(x);
    EmDType dt = (EmDType)x->dtype;
    int64_t m = x->sizes[0], rl = m ? x->numel / m : 0, g = 0, shape[EM_MAX_DIMS];
    EmTensor *v = NULL, *c = NULL;
    *vals = *inv = *cnt = NULL;
    EM_TRY((v = em_empty(x->ndim, x->sizes, dt, dev)) && (*inv = em_empty(1, &m, EM_INT64, dev)) &&
           (c = em_empty(1, &m, EM_INT64, dev)));
    if (m && em_cuda->unique_dim(dev.index, dt, em_data(x), m, rl, sorted, em_data(v),
                                 want_inv ? (int64_t *)em_data(*inv) : NULL, want_cnt ? (int64_t *)em_data(c) : NULL,
                                 &g) < 0) {
        em_cuda_error("unique");
        goto fail;
    }
    memcpy(shape, x->sizes, x->ndim * sizeof(int64_t));
    shape[0] = g;
    EM_TRY(*vals = em_tensor_alloc(&EmTensorType, v->storage, 0, x->ndim, shape, NULL, dt));
    EM_TRY(*cnt = em_tensor_alloc(&EmTensorType, c->storage, 0, 1, &g, NULL, EM_INT64));
    Py_DECREF(v);
    Py_DECREF(c);
    return 0;
fail:
    Py_XDECREF(v);
    Py_XDECREF(c);
    Py_CLEAR(*vals);
    Py_CLEAR(*inv);
    return -1;
}

static PyObject *unique_impl(EmCall *c, bool gpu, bool sorted, int inv_i, int cnt_i, int dim_i) {
    EmTensor *t = em_arg_tensor(c, 0), *x = NULL, *vals, *inv, *cnt;
    bool want_inv, want_cnt;
    em_arg_bool(c, inv_i, &want_inv);
    em_arg_bool(c, cnt_i, &want_cnt);
    if (gpu && em_arg_is_none(c, dim_i)) return unique_gpu(t, sorted, want_inv, want_cnt);
    if (gpu && !em_cuda->unique_dim) return em_fused_no_kernel(c->def->name);
    if (em_arg_is_none(c, dim_i)) {
        int64_t m1 = -1;
        x = em_reshape(t, 1, &m1);
        if (x && !em_is_contiguous(x)) Py_SETREF(x, em_contiguous(x));
        if (!x || unique_rows(x, sorted, &vals, &inv, &cnt) < 0) goto fail;
        Py_DECREF(x);
        /* the inverse has the input's shape */
        EmTensor *inv2 = em_tensor_alloc(&EmTensorType, inv->storage, 0, t->ndim, t->sizes, NULL, EM_INT64);
        Py_DECREF(inv);
        return unique_result(vals, inv2, cnt, want_inv, want_cnt);
    }
    int64_t d64;
    int dim;
    if (em_arg_int(c, dim_i, &d64) < 0) return NULL;
    if (t->ndim == 0) {
        PyErr_Format(PyExc_IndexError, "Dimension specified as %lld but tensor has no dimensions", (long long)d64);
        return NULL;
    }
    if (em_wrap_dim(d64, t->ndim, &dim) < 0) return NULL;
    for (int d = 0; d < t->ndim; d++)
        if (d != dim && t->sizes[d] == 0) {
            PyErr_SetString(PyExc_RuntimeError,
                            "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
            return NULL;
        }
    int64_t perm[EM_MAX_DIMS], back[EM_MAX_DIMS];
    for (int d = 0, k = 1; d < t->ndim; d++) perm[d == dim ? 0 : k++] = d; /* dim first */
    for (int d = 0; d < t->ndim; d++) back[perm[d]] = d;
    EmTensor *p = em_permute(t, t->ndim, perm);
    x = p ? em_contiguous(p) : NULL;
    Py_XDECREF(p);
    if (!x || (gpu ? unique_dim_gpu(x, sorted, want_inv, want_cnt, &vals, &inv, &cnt)
                   : unique_rows(x, sorted, &vals, &inv, &cnt)) < 0)
        goto fail;
    Py_CLEAR(x);
    EmTensor *pv = em_permute(vals, t->ndim, back), *v2 = pv ? em_contiguous(pv) : NULL;
    Py_XDECREF(pv);
    Py_DECREF(vals);
    return unique_result(v2, inv, cnt, want_inv, want_cnt);
fail:
    Py_XDECREF(x);
    return NULL;
}

static PyObject *unique_op(EmCall *c, bool gpu) { return unique_impl(c, gpu, true, 2, 3, 4); } /* torch sorts either way */
static PyObject *unique_consecutive_op(EmCall *c, bool gpu) { return unique_impl(c, gpu, false, 1, 2, 3); }
EM_DEVICE_SLOTS(unique, unique_op)
EM_DEVICE_SLOTS(unique_consecutive, unique_consecutive_op)
