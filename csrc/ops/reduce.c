/* reduce.c — front-ends of the reductions, scans and selections: torch's
 * argument forms (dim as None / int / tuple, keepdim, dtype=, out= and the
 * (values, indices) named tuples), its dtype rules (integer sums to int64,
 * mean only of floats, ...), its checks on empty inputs, and which kernel
 * runs over which input. The reduce iterator (core/reduce.c) and the line
 * walker do the looping; cpu/reduce.c and cpu/scan.c the arithmetic.
 *
 * Two-pass ops take their first pass's result as the second's per-output
 * `aux`: var/std fold squared deviations from the mean (computed in double
 * first), logsumexp sums exp(x - max).
 */
#include "../ember.h"
#include "../cpu/reduce.h"
#include "fused_gpu.h"
#include "device_slot.h"
#include <math.h>

extern const EmReduceKernels em_reduce_sum, em_reduce_nansum, em_reduce_nanmean, em_reduce_prod,
    em_reduce_count_nonzero, em_reduce_all, em_reduce_any, em_reduce_amax, em_reduce_amin,
    em_reduce_aminmax, em_reduce_argmax, em_reduce_argmin, em_reduce_norm0, em_reduce_norm1,
    em_reduce_norm2, em_reduce_normp, em_reduce_norminf, em_reduce_normninf, em_reduce_sqdev,
    em_reduce_lse;
extern const EmKernels em_kernels_maximum, em_kernels_minimum;

static int check_out_dtype(const EmTensor *out, EmDType want) {
    if (out && out->dtype != want) {
        PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have dtype %s, but got %s instead",
                     em_dtype_ctype(want), em_dtype_ctype((EmDType)out->dtype));
        return -1;
    }
    return 0;
}

static PyObject *not_implemented(const char *what, EmDType d) {
    PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", what, em_dtype_name(d));
    return NULL;
}

/* ---------------------------------------------------------------- common */

/* The input, the reduced dims and the result's shape. */
typedef struct {
    EmTensor *in;
    uint64_t mask;
    bool all;     /* every dim, because none was named */
    bool keepdim;
    int ndim;     /* of the result */
    int64_t shape[EM_MAX_DIMS];
    int64_t count; /* elements folded into each output */
} Red;

static int red_setup(Red *r, EmTensor *in, PyObject *dim, bool keepdim) {
    r->in = in;
    r->keepdim = keepdim;
    if (em_reduce_mask(dim, in->ndim, &r->mask, &r->all) < 0) return -1;
    r->ndim = em_reduce_shape(in, r->mask, keepdim, r->shape);
    r->count = em_reduce_count(in, r->mask);
    return 0;
}

static int red_setup_dim(Red *r, EmTensor *in, int dim, bool keepdim) {
    PyObject *d = PyLong_FromLong(dim);
    if (!d) return -1;
    int rc = red_setup(r, in, d, keepdim);
    Py_DECREF(d);
    return rc;
}

static bool same_shape(const EmTensor *t, int ndim, const int64_t *shape) {
    return t->ndim == ndim && (ndim == 0 || memcmp(t->sizes, shape, ndim * sizeof(int64_t)) == 0); /* shape is NULL for 0-d */
}

/* A result in the reduced shape on like's device: `out` resized when its
 * shape differs (new reference), or a new tensor. */
static EmTensor *red_output(const EmTensor *like, EmTensor *out, int ndim, const int64_t *shape,
                            EmDType dtype) {
    EmDevice dev = em_device(like);
    if (!out) return em_empty(ndim, shape, dtype, dev); /* on the input's device (Note [CUDA reduce]) */
    if (em_device(out).type != dev.type || (dev.type == EM_CUDA && em_device(out).index != dev.index)) {
        char a[32], b[32];
        PyErr_Format(PyExc_RuntimeError,
                     "Expected all tensors to be on the same device, but found at least two devices, "
                     "%s and %s!", em_device_str(dev, a, sizeof a),
                     em_device_str(em_device(out), b, sizeof b));
        return NULL;
    }
    if (!same_shape(out, ndim, shape) && em_tensor_resize(out, ndim, shape, true) < 0) return NULL;
    return (EmTensor *)Py_NewRef(out);
}

/* Run a reduction whose outputs may share memory with the input: those are
 * computed into fresh tensors and copied over. */
static int red_run(EmReduceConfig *cfg) {
    EmTensor *orig[2] = {cfg->out[0], cfg->out[1]}, *tmp[2] = {NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        EmTensor *o = orig[i];
        if (o && o->storage == cfg->in->storage && o->numel) {
            tmp[i] = em_empty(o->ndim, o->sizes, (EmDType)o->dtype, em_device(cfg->in));
            if (!tmp[i]) rc = -1;
            cfg->out[i] = tmp[i];
        }
    }
    if (rc == 0) rc = em_reduce_run(cfg);
    for (int i = 0; i < 2; i++) {
        if (!tmp[i]) continue;
        if (rc == 0) rc = em_copy_(orig[i], (PyObject *)tmp[i]);
        Py_DECREF(tmp[i]);
        cfg->out[i] = orig[i];
    }
    return rc;
}

/* out0 (and out1) = kernel reduction of x over r's dims. */
static int reduce_into(const EmReduceKernels *K, EmTensor *x, const Red *r, EmTensor *out0,
                       EmTensor *out1, EmTensor *aux, EmReduceParams params) {
    EmReduceConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kernel = &K->k[x->dtype];
    cfg.in = x;
    cfg.mask = r->mask;
    cfg.out[0] = out0;
    cfg.out[1] = out1;
    cfg.aux = aux;
    cfg.params = params;
    return red_run(&cfg);
}

static EmReduceParams params_default(void) {
    EmReduceParams p = {0.0, 1.0, false};
    return p;
}

/* IndexError for a named reduced dim of size 0, RuntimeError when nothing
 * was named and the input is empty: ops without an identity (max, argmax). */
static int check_nonempty(const Red *r, const char *name, bool index_error_for_all) {
    if (r->in->numel != 0) return 0;
    if (r->all) {
        if (index_error_for_all)
            PyErr_Format(PyExc_IndexError,
                         "%s(): Expected reduction dim to be specified for input.numel() == 0.", name);
        else
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): Expected reduction dim to be specified for input.numel() == 0. Specify "
                         "the reduction dim with the 'dim' argument.", name);
        return -1;
    }
    for (int d = 0; d < r->in->ndim; d++) {
        if (((r->mask >> d) & 1) && r->in->sizes[d] == 0) {
            PyErr_Format(PyExc_IndexError, "%s(): Expected reduction dim %d to have non-zero size.",
                         name, d);
            return -1;
        }
    }
    return 0;
}

/* Whether x must be cast to `to` before a sum-like kernel runs: not when the
 * kernel's wide accumulator gives the same result (integers into any integer
 * dtype wrap alike; the half types accumulate in double). float32 into
 * float64 is cast: float32 kernels add short blocks in float first. */
static bool needs_cast(EmDType from, EmDType to) {
    if (from == to) return false;
    if (!em_is_float(from) && em_is_int(to)) return false;
    if ((from == EM_FLOAT16 || from == EM_BFLOAT16) && (to == EM_FLOAT32 || to == EM_FLOAT64)) return false;
    return true;
}

static int arg_keepdim(EmCall *c, int i, bool *v) { return em_arg_bool(c, i, v); }

/* The (values, indices)-style out= of the ops returning two tensors: None or
 * a tuple/list of two tensors. */
static int tuple_out(PyObject *o, const char *name, EmTensor **a, EmTensor **b) {
    *a = *b = NULL;
    if (o == Py_None) return 0;
    if (!(PyTuple_Check(o) || PyList_Check(o)) || PySequence_Fast_GET_SIZE(o) != 2 ||
        !em_is_tensor(PySequence_Fast_ITEMS(o)[0]) || !em_is_tensor(PySequence_Fast_ITEMS(o)[1])) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'out' must be tuple of Tensors, not %.100s", name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *a = (EmTensor *)PySequence_Fast_ITEMS(o)[0];
    *b = (EmTensor *)PySequence_Fast_ITEMS(o)[1];
    if (*a == *b) {
        PyErr_Format(PyExc_RuntimeError, "%s(): the two out tensors must be different tensors", name);
        return -1;
    }
    return 0;
}

/* Named pair from two results; when they are out= tensors, their versions
 * are bumped (Note [when versions change]: the binding layer only knows
 * single-tensor outs). Steals a and b. */
static PyObject *pair_result(const char *name, const char *f0, const char *f1, EmTensor *a, EmTensor *b,
                             bool written) {
    if (written && a && b) {
        em_bump_version(a);
        em_bump_version(b);
    }
    return em_return_pair(name, f0, f1, (PyObject *)a, (PyObject *)b);
}

/* ---------------------------------------------------- sum, mean, prod, ... */

typedef enum { K_SUM, K_NANSUM, K_PROD, K_MEAN, K_NANMEAN } SumKind;

/* A float64 copy of a float tensor with its NaNs replaced by 0, through ops
 * (x != x marks the NaNs) so it runs on the tensor's device. */
static EmTensor *zero_nans(EmTensor *t) {
    EmTensor *c = em_empty(t->ndim, t->sizes, EM_FLOAT64, em_device(t));
    if (!c || em_is_meta(t)) return c; /* Note [meta device] */
    EmTensor *nan = em_copy_(c, (PyObject *)t) < 0 ? NULL
                  : (EmTensor *)em_binary_op(EM_OP_ne, (PyObject *)c, (PyObject *)c, NULL);
    EmTensor *r = nan ? em_masked_fill(c, nan, (EmScalar){'f', {.f = 0}, 0}, true) : NULL;
    Py_XDECREF(nan);
    Py_DECREF(c);
    return r;
}

/* Signature: (input, dim, keepdim, *, dtype, out) */
static PyObject *sum_like(EmCall *c, SumKind kind) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out, *x = NULL, *res = NULL;
    bool keepdim;
    EmDType dt, in_dt = (EmDType)in->dtype;
    Red r;
    if (em_is_complex(in_dt) && (kind == K_SUM || kind == K_MEAN)) return em_complex_sum(c, kind == K_MEAN);
    int has_dt = em_arg_dtype(c, 3, &dt);
    if (has_dt < 0 || arg_keepdim(c, 2, &keepdim) < 0) return NULL;
    bool given = has_dt == 0;
    if (given && check_out_dtype(out, dt) < 0) return NULL;

    EmDType rt; /* the result dtype */
    if (kind == K_MEAN || kind == K_NANMEAN) {
        if (kind == K_NANMEAN && !em_is_float(in_dt)) {
            PyErr_Format(PyExc_NotImplementedError,
                         "nanmean(): expected input to have floating point or complex dtype but got %s",
                         em_dtype_name(in_dt));
            return NULL;
        }
        if (given && !em_is_float(dt)) {
            PyErr_Format(PyExc_NotImplementedError,
                         "%s(): could not infer output dtype. Optional dtype must be either a floating "
                         "point or complex dtype. Got: %s", name, em_dtype_name(dt));
            return NULL;
        }
        if (!given && !em_is_float(in_dt)) {
            PyErr_Format(PyExc_NotImplementedError,
                         "%s(): could not infer output dtype. Input dtype must be either a floating point "
                         "or complex dtype. Got: %s", name, em_dtype_name(in_dt));
            return NULL;
        }
        rt = given ? dt : in_dt;
        if (!given && out && !em_can_cast(rt, (EmDType)out->dtype)) {
            PyErr_Format(PyExc_RuntimeError, "result type %s can't be cast to the desired output type %s",
                         em_dtype_name(rt), em_dtype_name((EmDType)out->dtype));
            return NULL;
        }
        if (out) rt = (EmDType)out->dtype;
    } else {
        rt = given ? dt : out ? (EmDType)out->dtype : em_is_float(in_dt) ? in_dt : EM_INT64;
    }
    if (red_setup(&r, in, c->args[1], keepdim) < 0) return NULL;

    if (kind == K_NANSUM && em_is_float(in_dt) && !em_is_float(rt)) {
        /* into an integer dtype: NaNs become 0 first, then each element is cast (torch) */
        x = zero_nans(in);
        if (!x) return NULL;
        Py_SETREF(x, em_to_dtype(x, rt, false));
    } else {
        x = needs_cast(in_dt, rt) ? em_to_dtype(in, rt, false) : (EmTensor *)Py_NewRef(in);
    }
    if (!x) return NULL;
    const EmReduceKernels *K = kind == K_PROD ? &em_reduce_prod
                               : kind == K_NANMEAN ? &em_reduce_nanmean
                               : kind == K_NANSUM && em_is_float(x->dtype) ? &em_reduce_nansum
                                                                            : &em_reduce_sum;
    EmReduceParams p = params_default();
    if (kind == K_MEAN) p.divisor = (double)r.count;
    if (!K->k[x->dtype].step) {
        not_implemented(name, (EmDType)x->dtype);
        goto fail;
    }
    res = red_output(in, out, r.ndim, r.shape, rt);
    if (!res || reduce_into(K, x, &r, res, NULL, NULL, p) < 0) goto fail;
    Py_DECREF(x);
    return (PyObject *)res;
fail:
    Py_XDECREF(x);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_sum(EmCall *c) { return sum_like(c, K_SUM); }
PyObject *em_impl_nansum(EmCall *c) { return sum_like(c, K_NANSUM); }
PyObject *em_impl_prod(EmCall *c) { return sum_like(c, K_PROD); }
PyObject *em_impl_mean(EmCall *c) { return sum_like(c, K_MEAN); }
PyObject *em_impl_nanmean(EmCall *c) { return sum_like(c, K_NANMEAN); }

/* ------------------------------------------------------ all, any, count */

static PyObject *all_any(EmCall *c, const EmReduceKernels *K) {
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out;
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 2, &keepdim) < 0 || red_setup(&r, in, c->args[1], keepdim) < 0) return NULL;
    EmDType rt = in->dtype == EM_UINT8 ? EM_UINT8 : EM_BOOL;
    if (out && out->dtype != EM_BOOL && out->dtype != EM_UINT8) {
        PyErr_Format(PyExc_RuntimeError, "%s only supports bool tensor for result, got: %s", c->def->name,
                     em_dtype_name((EmDType)out->dtype));
        return NULL;
    }
    EmTensor *res = red_output(in, out, r.ndim, r.shape, rt);
    if (!res || reduce_into(K, in, &r, res, NULL, NULL, params_default()) < 0) {
        Py_XDECREF(res);
        return NULL;
    }
    return (PyObject *)res;
}

PyObject *em_impl_all(EmCall *c) { return all_any(c, &em_reduce_all); }
PyObject *em_impl_any(EmCall *c) { return all_any(c, &em_reduce_any); }

PyObject *em_impl_count_nonzero(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0);
    Red r;
    if (red_setup(&r, in, c->args[1], false) < 0) return NULL;
    EmTensor *res = em_empty(r.ndim, r.shape, EM_INT64, em_device(in));
    if (!res || reduce_into(&em_reduce_count_nonzero, in, &r, res, NULL, NULL, params_default()) < 0) {
        Py_XDECREF(res);
        return NULL;
    }
    return (PyObject *)res;
}

/* -------------------------------------------------------------- extrema */

/* amax / amin: (input, dim, keepdim, *, out) */
static PyObject *amax_like(EmCall *c, const EmReduceKernels *K) {
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out;
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 2, &keepdim) < 0 || red_setup(&r, in, c->args[1], keepdim) < 0 ||
        check_nonempty(&r, c->def->name, false) < 0)
        return NULL;
    if (out && out->dtype != in->dtype) {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected the dtype for input and out to match, but got %s for input's dtype and %s "
                     "for out's dtype.", em_dtype_name((EmDType)in->dtype), em_dtype_name((EmDType)out->dtype));
        return NULL;
    }
    EmTensor *res = red_output(in, out, r.ndim, r.shape, (EmDType)in->dtype);
    if (!res || reduce_into(K, in, &r, res, NULL, NULL, params_default()) < 0) {
        Py_XDECREF(res);
        return NULL;
    }
    return (PyObject *)res;
}

PyObject *em_impl_amax(EmCall *c) { return amax_like(c, &em_reduce_amax); }
PyObject *em_impl_amin(EmCall *c) { return amax_like(c, &em_reduce_amin); }

/* values and int64 indices along one dim (max/min with dim, and their
 * tuple outs); NULL on error */
static PyObject *extreme_with_indices(EmTensor *in, int dim, bool keepdim, PyObject *out_obj,
                                      const char *name, const EmReduceKernels *K) {
    Red r;
    EmTensor *oa, *ob, *v = NULL, *i = NULL;
    if (tuple_out(out_obj, name, &oa, &ob) < 0 || red_setup_dim(&r, in, dim, keepdim) < 0 ||
        check_nonempty(&r, name, false) < 0)
        return NULL;
    if (check_out_dtype(oa, (EmDType)in->dtype) < 0 || check_out_dtype(ob, EM_INT64) < 0) return NULL;
    v = red_output(in, oa, r.ndim, r.shape, (EmDType)in->dtype);
    i = v ? red_output(in, ob, r.ndim, r.shape, EM_INT64) : NULL;
    if (!i || reduce_into(K, in, &r, v, i, NULL, params_default()) < 0) {
        Py_XDECREF(v);
        Py_XDECREF(i);
        return NULL;
    }
    return pair_result(name, "values", "indices", v, i, oa != NULL);
}

/* max / min: (input, dim, keepdim, *, other, out) — with a Tensor in place
 * of dim (or other=), the elementwise maximum / minimum */
static PyObject *max_like(EmCall *c, bool is_max) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0);
    PyObject *dim = c->args[1], *other = c->args[3], *out = c->args[4];
    bool keepdim;
    if (arg_keepdim(c, 2, &keepdim) < 0) return NULL;
    if (em_is_tensor(dim) || other != Py_None) {
        if (em_is_tensor(dim) && other != Py_None) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument 'other'", name);
            return NULL;
        }
        if (em_is_tensor(dim)) { /* max(a, b): autograd records b as the `other` input */
            c->args[3] = other = dim;
            c->args[1] = dim = Py_None;
        }
        if (out != Py_None && !em_is_tensor(out)) {
            PyErr_Format(PyExc_TypeError, "%s(): argument 'out' must be Tensor, not %.100s", name,
                         Py_TYPE(out)->tp_name);
            return NULL;
        }
        EmIterConfig cfg = em_iter_config(is_max ? "maximum" : "minimum",
                                          is_max ? &em_kernels_maximum : &em_kernels_minimum,
                                          EM_PROMOTE_NONE);
        cfg.inputs[0] = em_opnd(in);
        cfg.inputs[1] = em_opnd((EmTensor *)other);
        cfg.ninputs = 2;
        cfg.out = out != Py_None ? (EmTensor *)out : NULL;
        return (PyObject *)em_iter_run(&cfg); /* (a Tensor out: the binding layer bumps its version) */
    }
    const EmReduceKernels *K = is_max ? &em_reduce_argmax : &em_reduce_argmin;
    if (dim == Py_None) { /* over everything: the value only */
        if (keepdim) {
            PyErr_Format(PyExc_TypeError, "%s(): keepdim=True needs a dim", name);
            return NULL;
        }
        if (out != Py_None && !em_is_tensor(out)) {
            PyErr_Format(PyExc_TypeError, "%s(): argument 'out' must be Tensor, not %.100s", name,
                         Py_TYPE(out)->tp_name);
            return NULL;
        }
        EmTensor *o = out != Py_None ? (EmTensor *)out : NULL;
        Red r;
        if (red_setup(&r, in, Py_None, false) < 0 || check_nonempty(&r, name, false) < 0) return NULL;
        if (o && o->dtype != in->dtype) {
            PyErr_Format(PyExc_RuntimeError,
                         "Expected the dtype for input and out to match, but got %s for input's dtype and "
                         "%s for out's dtype.", em_dtype_name((EmDType)in->dtype), em_dtype_name((EmDType)o->dtype));
            return NULL;
        }
        EmTensor *res = red_output(in, o, r.ndim, r.shape, (EmDType)in->dtype);
        if (!res || reduce_into(is_max ? &em_reduce_amax : &em_reduce_amin, in, &r, res, NULL, NULL,
                                params_default()) < 0) {
            Py_XDECREF(res);
            return NULL;
        }
        return (PyObject *)res;
    }
    if (PyBool_Check(dim) || !PyIndex_Check(dim)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' must be int, not %.100s", name,
                     Py_TYPE(dim)->tp_name);
        return NULL;
    }
    int64_t d;
    int w;
    if (em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &w) < 0) return NULL;
    return extreme_with_indices(in, w, keepdim, out, name, K);
}

PyObject *em_impl_max(EmCall *c) { return max_like(c, true); }
PyObject *em_impl_min(EmCall *c) { return max_like(c, false); }

/* aminmax: (input, *, dim, keepdim, out) -> (min, max) */
PyObject *em_impl_aminmax(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0), *oa, *ob, *lo = NULL, *hi = NULL;
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 2, &keepdim) < 0 || tuple_out(c->args[3], "aminmax", &oa, &ob) < 0) return NULL;
    if (c->args[1] == Py_None) {
        if (in->numel == 0) {
            PyErr_SetString(PyExc_RuntimeError, "aminmax(): cannot compute aminmax over an empty dimension "
                                                "as the operation has no identity.");
            return NULL;
        }
        if (red_setup(&r, in, Py_None, keepdim) < 0) return NULL;
    } else {
        int64_t d;
        int w;
        if (em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &w) < 0 ||
            red_setup_dim(&r, in, w, keepdim) < 0 || check_nonempty(&r, "aminmax", false) < 0)
            return NULL;
    }
    if (check_out_dtype(oa, (EmDType)in->dtype) < 0 || check_out_dtype(ob, (EmDType)in->dtype) < 0)
        return NULL;
    lo = red_output(in, oa, r.ndim, r.shape, (EmDType)in->dtype);
    hi = lo ? red_output(in, ob, r.ndim, r.shape, (EmDType)in->dtype) : NULL;
    if (!hi || reduce_into(&em_reduce_aminmax, in, &r, lo, hi, NULL, params_default()) < 0) {
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return NULL;
    }
    return pair_result("aminmax", "min", "max", lo, hi, oa != NULL);
}

/* argmax / argmin: (input, dim, keepdim, *, out); no dim: the flat index */
static PyObject *argmax_like(EmCall *c, const EmReduceKernels *K) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out, *x = NULL, *res = NULL;
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 2, &keepdim) < 0) return NULL;
    if (in->dtype == EM_BOOL) {
        PyErr_Format(PyExc_NotImplementedError, "%s(): does not support bool input", name);
        return NULL;
    }
    if (check_out_dtype(out, EM_INT64) < 0) return NULL;
    int64_t shape[EM_MAX_DIMS];
    int ndim;
    if (c->args[1] == Py_None) {
        if (red_setup(&r, in, Py_None, keepdim) < 0 || check_nonempty(&r, name, true) < 0) return NULL;
        int64_t flat = -1;
        x = em_reshape(in, 1, &flat);
        if (!x) return NULL;
        ndim = r.ndim;
        memcpy(shape, r.shape, sizeof(int64_t) * ndim);
        if (red_setup_dim(&r, x, 0, false) < 0) goto fail;
    } else {
        int64_t d;
        int w;
        if (em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &w) < 0 ||
            red_setup_dim(&r, in, w, keepdim) < 0 || check_nonempty(&r, name, true) < 0)
            return NULL;
        x = (EmTensor *)Py_NewRef(in);
        ndim = r.ndim;
        memcpy(shape, r.shape, sizeof(int64_t) * ndim);
    }
    res = red_output(in, out, ndim, shape, EM_INT64);
    if (!res || reduce_into(K, x, &r, NULL, res, NULL, params_default()) < 0) goto fail;
    Py_DECREF(x);
    return (PyObject *)res;
fail:
    Py_XDECREF(x);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_argmax(EmCall *c) { return argmax_like(c, &em_reduce_argmax); }
PyObject *em_impl_argmin(EmCall *c) { return argmax_like(c, &em_reduce_argmin); }

/* --------------------------------------------------------------- var, std */

/* (input, dim, unbiased, keepdim, *, correction[, out]) with torch's forms:
 * var(x, True) takes the bool as unbiased; correction and unbiased exclude
 * each other. Two passes: the mean in double, then the squared deviations. */
static PyObject *var_like(EmCall *c, bool root, bool with_mean) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out, *mean = NULL, *res = NULL;
    PyObject *dim = c->args[1], *unbiased = c->args[2], *corr = c->args[4];
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 3, &keepdim) < 0) return NULL;
    if (PyBool_Check(dim)) {
        if (unbiased != Py_None) {
            PyErr_Format(PyExc_TypeError, "%s(): argument 'dim' must be tuple of ints, not bool", name);
            return NULL;
        }
        unbiased = dim;
        dim = Py_None;
    }
    if (unbiased != Py_None && !PyBool_Check(unbiased)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'unbiased' must be bool, not %.100s", name,
                     Py_TYPE(unbiased)->tp_name);
        return NULL;
    }
    if (unbiased != Py_None && corr != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s(): cannot take both 'unbiased' and 'correction'", name);
        return NULL;
    }
    double correction = unbiased == Py_False ? 0.0 : 1.0;
    if (corr != Py_None && em_arg_float(c, 4, &correction) < 0) return NULL;
    if (!em_is_float(in->dtype)) {
        PyErr_SetString(PyExc_NotImplementedError, "std and var only support floating point and complex dtypes");
        return NULL;
    }
    if (red_setup(&r, in, dim, keepdim) < 0) return NULL;
    if (out && !em_can_cast((EmDType)in->dtype, (EmDType)out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "result type %s can't be cast to the desired output type %s",
                     em_dtype_name((EmDType)in->dtype), em_dtype_name((EmDType)out->dtype));
        return NULL;
    }
    double dof = (double)r.count - correction;
    if (dof <= 0 &&
        PyErr_WarnFormat(PyExc_UserWarning, 1,
                         "%s(): degrees of freedom is <= 0. Correction should be strictly less than the "
                         "reduction factor (input numel divided by output numel).", name) < 0)
        return NULL;
    EmReduceParams p = params_default();
    p.divisor = (double)r.count;
    mean = em_empty(r.ndim, r.shape, EM_FLOAT64, em_device(in));
    if (!mean || reduce_into(&em_reduce_sum, in, &r, mean, NULL, NULL, p) < 0) goto fail;
    p.divisor = dof > 0 ? dof : 0.0;
    p.root = root;
    res = red_output(in, out, r.ndim, r.shape, (EmDType)in->dtype);
    if (!res || reduce_into(&em_reduce_sqdev, in, &r, res, NULL, mean, p) < 0) goto fail;
    if (!with_mean) {
        Py_DECREF(mean);
        return (PyObject *)res;
    }
    EmTensor *m = em_to_dtype(mean, (EmDType)in->dtype, false);
    Py_DECREF(mean);
    if (!m) {
        Py_DECREF(res);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, res, m);
    Py_DECREF(res);
    Py_DECREF(m);
    return t;
fail:
    Py_XDECREF(mean);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_var(EmCall *c) { return var_like(c, false, false); }
PyObject *em_impl_std(EmCall *c) { return var_like(c, true, false); }
PyObject *em_impl_var_mean(EmCall *c) { return var_like(c, false, true); }
PyObject *em_impl_std_mean(EmCall *c) { return var_like(c, true, true); }

/* ----------------------------------------------------------------- norms */

/* The vector norm of order p over dims; the core of norm and
 * linalg.vector_norm. dtype: the dtype= argument's index. */
static PyObject *vector_norm(EmCall *c, double p, PyObject *dim, bool keepdim, int dtype_arg) {
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out;
    EmDType in_dt = (EmDType)in->dtype, dt;
    Red r;
    if (!em_is_float(in_dt)) {
        PyErr_Format(PyExc_NotImplementedError,
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got %s",
                     em_dtype_name(in_dt));
        return NULL;
    }
    int has_dt = em_arg_dtype(c, dtype_arg, &dt);
    if (has_dt < 0) return NULL;
    if (has_dt == 0) {
        if (!em_is_float(dt)) {
            PyErr_Format(PyExc_RuntimeError, "linalg.vector_norm: dtype should be floating point or complex, "
                                             "but got %s", em_dtype_name(dt));
            return NULL;
        }
        if (em_promote_types(in_dt, dt) != dt) {
            PyErr_Format(PyExc_RuntimeError,
                         "linalg.vector_norm: the dtype of the input (%s) should be convertible without "
                         "narrowing to the specified dtype (%s)", em_dtype_name(in_dt), em_dtype_name(dt));
            return NULL;
        }
    } else {
        dt = in_dt;
    }
    /* complex input: the norm of |z| (hypot of the parts, in dt's precision), a real result */
    EmTensor *mag = NULL;
    if (em_is_complex(dt)) {
        EmTensor *z = needs_cast(in_dt, dt) ? em_to_dtype(in, dt, false) : (EmTensor *)Py_NewRef(in);
        mag = z ? (EmTensor *)em_complex_abs(z, NULL) : NULL;
        Py_XDECREF(z);
        if (!mag) return NULL;
        in = mag;
        in_dt = dt = em_complex_part(dt);
    }
    if (check_out_dtype(out, dt) < 0 || red_setup(&r, in, dim, keepdim) < 0) {
        Py_XDECREF(mag);
        return NULL;
    }
    if ((p < 0 || isinf(p)) && r.count == 0) {
        int64_t outn = 1;
        for (int d = 0; d < r.ndim; d++) outn *= r.shape[d];
        if (outn > 0) {
            em_error(PyExc_RuntimeError,
                     "linalg.vector_norm cannot compute the %g norm on an empty tensor because the "
                     "operation does not have an identity", p);
            Py_XDECREF(mag);
            return NULL;
        }
    }
    const EmReduceKernels *K = p == 0 ? &em_reduce_norm0 : p == 1 ? &em_reduce_norm1
                               : p == 2 ? &em_reduce_norm2 : p == INFINITY ? &em_reduce_norminf
                               : p == -INFINITY ? &em_reduce_normninf : &em_reduce_normp;
    EmReduceParams prm = params_default();
    prm.p = p;
    EmTensor *x = needs_cast(in_dt, dt) ? em_to_dtype(in, dt, false) : (EmTensor *)Py_NewRef(in);
    EmTensor *res = x ? red_output(in, out, r.ndim, r.shape, dt) : NULL;
    if (!res || reduce_into(K, x, &r, res, NULL, NULL, prm) < 0) {
        Py_XDECREF(x);
        Py_XDECREF(res);
        Py_XDECREF(mag);
        return NULL;
    }
    Py_DECREF(x);
    Py_XDECREF(mag);
    return (PyObject *)res;
}

/* linalg_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None) */
PyObject *em_impl_linalg_vector_norm(EmCall *c) {
    double p;
    bool keepdim;
    if (em_arg_float(c, 1, &p) < 0 || arg_keepdim(c, 3, &keepdim) < 0) return NULL;
    if (isnan(p)) {
        PyErr_SetString(PyExc_RuntimeError, "linalg.vector_norm: ord must not be NaN");
        return NULL;
    }
    return vector_norm(c, p, c->args[2], keepdim, 4);
}

/* norm(input, p='fro', dim=None, keepdim=False, *, out=None, dtype=None):
 * 'fro' (the default) is the 2-norm over at most two dims; numbers are
 * vector norms */
PyObject *em_impl_norm(EmCall *c) {
    PyObject *po = c->args[1], *dim = c->args[2];
    bool keepdim;
    double p = 2;
    if (arg_keepdim(c, 3, &keepdim) < 0) return NULL;
    if (po == Py_None || PyUnicode_Check(po)) {
        if (po != Py_None && PyUnicode_CompareWithASCIIString(po, "fro") != 0) {
            if (!PyUnicode_CompareWithASCIIString(po, "nuc"))
                PyErr_SetString(PyExc_NotImplementedError,
                                "norm(): the nuclear norm needs a singular value decomposition, which ember "
                                "does not have yet");
            else
                PyErr_Format(PyExc_RuntimeError, "linalg.matrix_norm: Order %U not supported.", po);
            return NULL;
        }
        if ((PyTuple_Check(dim) || PyList_Check(dim)) && PySequence_Fast_GET_SIZE(dim) > 2) {
            PyErr_SetString(PyExc_RuntimeError, "linalg.matrix_norm: dim must be a 2-tuple.");
            return NULL;
        }
    } else if (PyBool_Check(po) || !(PyLong_Check(po) || PyFloat_Check(po) || PyIndex_Check(po) ||
                                     PyNumber_Check(po)) || em_is_tensor(po)) {
        PyErr_Format(PyExc_TypeError, "norm(): argument 'p' must be a number or str, not %.100s",
                     Py_TYPE(po)->tp_name);
        return NULL;
    } else {
        p = PyFloat_AsDouble(po);
        if (p == -1.0 && PyErr_Occurred()) return NULL;
        if (isnan(p)) {
            PyErr_SetString(PyExc_RuntimeError, "linalg.vector_norm: ord must not be NaN");
            return NULL;
        }
    }
    return vector_norm(c, p, dim, keepdim, 5);
}

/* ------------------------------------------------------------- logsumexp */

/* log(sum(exp(x - m))) + m with m the max over the dims (0 where infinite) */
PyObject *em_impl_logsumexp(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out, *x = NULL, *mx = NULL, *res = NULL;
    bool keepdim;
    Red r;
    if (arg_keepdim(c, 2, &keepdim) < 0) return NULL;
    if (out && !em_is_float(out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "logsumexp(): Expected floating point type for result tensor, but got: %s",
                     em_dtype_name((EmDType)out->dtype));
        return NULL;
    }
    x = em_is_float(in->dtype) ? (EmTensor *)Py_NewRef(in) : em_to_dtype(in, em_default_float, false);
    if (!x || red_setup(&r, x, c->args[1], keepdim) < 0) goto fail;
    mx = em_empty(r.ndim, r.shape, EM_FLOAT64, em_device(x));
    if (!mx || reduce_into(&em_reduce_amax, x, &r, mx, NULL, NULL, params_default()) < 0) goto fail;
    res = red_output(x, out, r.ndim, r.shape, out ? (EmDType)out->dtype : (EmDType)x->dtype);
    if (!res || reduce_into(&em_reduce_lse, x, &r, res, NULL, mx, params_default()) < 0) goto fail;
    Py_DECREF(x);
    Py_DECREF(mx);
    return (PyObject *)res;
fail:
    Py_XDECREF(x);
    Py_XDECREF(mx);
    Py_XDECREF(res);
    return NULL;
}

/* ------------------------------------------------------------------ scans */

/* Note [CUDA sort] (csrc/cuda/sort.h) for the scans of GPU tensors: the
 * input cast to the result dtype, contiguous, seen as [outer, n, inner]
 * along dim; the backend's scan writes fresh contiguous results, copied
 * into out= (or self, in place) afterwards, which also covers aliasing.
 * op: 0 cumsum, 1 cumprod, 2 cummax, 3 cummin. Returns the values tensor
 * (new reference) and *idx (cummax/cummin); no backend entry: EmNoCudaKernel
 * before anything is written. */
static const char *const scan_names[] = {"cumsum", "cumprod", "cummax", "cummin"};

/* A (values, indices) out= pair not on the GPU input's device: torch's error (true). */
static bool gpu_outs_elsewhere(const EmTensor *in, const EmTensor *oa, const EmTensor *ob) {
    const EmTensor *o = !oa ? NULL : !em_device_eq(em_device(oa), em_device(in)) ? oa
                                   : !em_device_eq(em_device(ob), em_device(in)) ? ob : NULL;
    if (!o) return false;
    char a[32], b[32];
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found at least two devices, %s and %s!",
                 em_device_str(em_device(in), a, sizeof a), em_device_str(em_device(o), b, sizeof b));
    return true;
}

static EmTensor *scan_gpu_run(EmTensor *in, int dim, EmDType rt, int op, EmTensor **idx) {
    if (!em_cuda->scan) return em_fused_no_kernel(scan_names[op]);
    EmDevice dev = em_device(in);
    EmTensor *x = em_fused_operand(in, rt, dev), *y = NULL;
    if (idx) *idx = NULL;
    EM_TRY(x);
    EM_TRY(y = em_empty(in->ndim, in->sizes, rt, dev));
    if (idx) EM_TRY(*idx = em_empty(in->ndim, in->sizes, EM_INT64, dev));
    if (in->numel) {
        int64_t outer = 1, inner = 1, n = in->ndim ? in->sizes[dim] : 1;
        for (int d = 0; d < in->ndim; d++) {
            if (d < dim) outer *= in->sizes[d];
            if (d > dim) inner *= in->sizes[d];
        }
        if (em_cuda->scan(dev.index, op, rt, em_data(x), em_data(y), idx ? (int64_t *)em_data(*idx) : NULL, outer,
                          n, inner) < 0) {
            em_cuda_error(scan_names[op]);
            goto fail;
        }
    }
    Py_DECREF(x);
    return y;
fail:
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (idx) Py_CLEAR(*idx);
    return NULL;
}

/* cumsum / cumprod of a GPU tensor into `dst` (out= or self in place; NULL: a new tensor). */
static PyObject *scan_gpu(EmCall *c, EmTensor *in, int dim, EmDType rt, int op, EmTensor *dst) {
    EmTensor *y = scan_gpu_run(in, dim, rt, op, NULL), *res;
    if (!y || !dst) return (PyObject *)y;
    res = c->inplace ? (EmTensor *)Py_NewRef(dst) : red_output(in, dst, in->ndim, in->sizes, rt);
    if (res && em_copy_(res, (PyObject *)y) < 0) Py_CLEAR(res);
    Py_DECREF(y);
    return (PyObject *)res;
}

/* cumsum / cumprod: (input, dim, *, dtype, out); in place: self's dtype */
static PyObject *cum_like(EmCall *c, bool gpu, const EmLineKernels *K, bool prod) {
    EmTensor *in = em_arg_tensor(c, 0), *out = c->out, *x = NULL, *res = NULL, *tmp = NULL;
    int64_t d;
    int dim;
    EmDType dt, in_dt = (EmDType)in->dtype, rt;
    int has_dt = em_arg_dtype(c, 2, &dt);
    if (has_dt < 0 || em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &dim) < 0) return NULL;
    if (c->inplace) {
        if (has_dt == 0 && dt != in_dt) {
            PyErr_Format(PyExc_RuntimeError,
                         "Bad in-place call: input tensor dtype %s and output tensor dtype %s should match",
                         em_dtype_ctype(in_dt), em_dtype_ctype(dt));
            return NULL;
        }
        rt = in_dt;
        for (int k = 0; k < in->ndim && in->numel; k++) {
            if (in->sizes[k] > 1 && in->strides[k] == 0) {
                PyErr_SetString(PyExc_RuntimeError,
                                "unsupported operation: more than one element of the written-to tensor "
                                "refers to a single memory location. Please clone() the tensor before "
                                "performing the operation.");
                return NULL;
            }
        }
    } else {
        if (has_dt == 0 && check_out_dtype(out, dt) < 0) return NULL;
        rt = has_dt == 0 ? dt : out ? (EmDType)out->dtype : em_is_float(in_dt) ? in_dt : EM_INT64;
    }
    /* (a 0-d or empty input needs no kernel: torch takes bool then) */
    if (!K->fn[rt] && in->ndim && in->numel)
        return not_implemented(prod ? "cumprod_out_cpu" : "cumsum_out_cpu", rt);
    if (gpu) return scan_gpu(c, in, dim, rt, prod ? 1 : 0, c->inplace ? in : out);
    x = em_to_dtype(in, rt, false);
    if (!x) return NULL;
    if (c->inplace) {
        res = (EmTensor *)Py_NewRef(in);
    } else {
        res = red_output(in, out, in->ndim, in->sizes, rt);
        if (!res) goto fail;
    }
    EmTensor *target = res;
    bool aliased = res->storage == x->storage && res->numel &&
                   !(res == x || (em_data(res) == em_data(x) && res->ndim == x->ndim &&
                                  !memcmp(res->strides, x->strides, x->ndim * sizeof(int64_t))));
    if (aliased) {
        tmp = em_empty(in->ndim, in->sizes, rt, em_device(in));
        if (!tmp) goto fail;
        target = tmp;
    }
    if (x->ndim == 0) { /* one element: itself */
        if (em_copy_(target, (PyObject *)x) < 0) goto fail;
    } else if (x->numel && !em_is_meta(x) && em_lines_run(K->fn[rt], x, dim, target, NULL) < 0) {
        goto fail;
    }
    if (tmp && em_copy_(res, (PyObject *)tmp) < 0) goto fail;
    Py_XDECREF(tmp);
    Py_DECREF(x);
    return (PyObject *)res;
fail:
    Py_XDECREF(tmp);
    Py_XDECREF(x);
    Py_XDECREF(res);
    return NULL;
}

static PyObject *cumsum_op(EmCall *c, bool gpu) { return cum_like(c, gpu, &em_scan_cumsum, false); }
static PyObject *cumprod_op(EmCall *c, bool gpu) { return cum_like(c, gpu, &em_scan_cumprod, true); }
EM_DEVICE_SLOTS(cumsum, cumsum_op)
EM_DEVICE_SLOTS(cumprod, cumprod_op)

/* cummax / cummin: (input, dim, *, out) -> (values, indices) */
static PyObject *cumext(EmCall *c, bool gpu, const EmLineKernels *K) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0), *oa, *ob, *v = NULL, *i = NULL;
    int64_t d;
    int dim;
    if (em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &dim) < 0 ||
        tuple_out(c->args[2], name, &oa, &ob) < 0)
        return NULL;
    if (check_out_dtype(oa, (EmDType)in->dtype) < 0 || check_out_dtype(ob, EM_INT64) < 0) return NULL;
    if (!gpu && !K->fn[in->dtype]) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s_cpu\" not implemented for '%s'", name,
                     em_dtype_name((EmDType)in->dtype));
        return NULL;
    }
    /* computed into fresh tensors (an out= may alias the input), then copied */
    if (gpu) {
        if (gpu_outs_elsewhere(in, oa, ob)) return NULL;
        v = scan_gpu_run(in, dim, (EmDType)in->dtype, K == &em_scan_cummax ? 2 : 3, &i);
        if (!v) return NULL;
    } else {
        v = em_empty(in->ndim, in->sizes, (EmDType)in->dtype, em_device(in)); /* the CPU, or meta */
        i = v ? em_empty(in->ndim, in->sizes, EM_INT64, em_device(in)) : NULL;
        if (!i || (!em_is_meta(in) && em_lines_run(K->fn[in->dtype], in, dim, v, i) < 0)) goto fail;
    }
    if (oa) {
        EmTensor *outs[2] = {oa, ob}, *vals[2] = {v, i};
        for (int k = 0; k < 2; k++) {
            if (!same_shape(outs[k], in->ndim, in->sizes) && em_tensor_resize(outs[k], in->ndim, in->sizes, true) < 0)
                goto fail;
            if (em_copy_(outs[k], (PyObject *)vals[k]) < 0) goto fail;
        }
        Py_DECREF(v);
        Py_DECREF(i);
        return pair_result(name, "values", "indices", (EmTensor *)Py_NewRef(oa), (EmTensor *)Py_NewRef(ob),
                           true);
    }
    return pair_result(name, "values", "indices", v, i, false);
fail:
    Py_XDECREF(v);
    Py_XDECREF(i);
    return NULL;
}

static PyObject *cummax_op(EmCall *c, bool gpu) { return cumext(c, gpu, &em_scan_cummax); }
static PyObject *cummin_op(EmCall *c, bool gpu) { return cumext(c, gpu, &em_scan_cummin); }
EM_DEVICE_SLOTS(cummax, cummax_op)
EM_DEVICE_SLOTS(cummin, cummin_op)

/* ------------------------------------------------------------- selections */

/* Select along dim: values (in's dtype) and indices in the reduced shape,
 * as new tensors (or copied into a tuple out=). */
static PyObject *select_dim(bool gpu, EmTensor *in, int dim, bool keepdim, PyObject *out_obj, const char *name,
                            EmSelectKind kind) {
    EmTensor *oa, *ob, *rows = NULL, *v = NULL, *i = NULL, *perm = NULL;
    char *scratch = NULL;
    Red r;
    if (tuple_out(out_obj, name, &oa, &ob) < 0 || red_setup_dim(&r, in, dim, keepdim) < 0 ||
        check_nonempty(&r, name, true) < 0)
        return NULL;
    if (check_out_dtype(oa, (EmDType)in->dtype) < 0 || check_out_dtype(ob, EM_INT64) < 0) return NULL;
    if (gpu && (!em_cuda->select_rows || em_is_wide_unsigned((EmDType)in->dtype))) return em_fused_no_kernel(name);
    if (gpu && gpu_outs_elsewhere(in, oa, ob)) return NULL;
    /* rows: in with dim moved last, contiguous: (lines, n) */
    int64_t order[EM_MAX_DIMS], n = in->ndim ? in->sizes[dim] : 1;
    int k = 0;
    for (int d = 0; d < in->ndim; d++)
        if (d != dim) order[k++] = d;
    if (in->ndim) order[k++] = dim;
    perm = in->ndim ? em_permute(in, in->ndim, order) : (EmTensor *)Py_NewRef(in);
    rows = perm ? em_contiguous(perm) : NULL;
    if (!rows) goto fail;
    int64_t lines = n ? rows->numel / n : 0;
    int64_t flat[EM_MAX_DIMS];
    int nflat = em_reduce_shape(in, in->ndim ? (uint64_t)1 << dim : 0, false, flat);
    v = em_empty(nflat, flat, (EmDType)in->dtype, em_device(in));
    i = v ? em_empty(nflat, flat, EM_INT64, em_device(in)) : NULL;
    if (!i) goto fail;
    if (gpu) { /* Note [CUDA sort]: the backend's row selection */
        if (lines > 0 && em_cuda->select_rows(em_device(in).index, (int)kind, rows->dtype, em_data(rows), lines, n, 0,
                                              em_data(v), (int64_t *)em_data(i)) < 0) {
            em_cuda_error(name);
            goto fail;
        }
    } else if (lines > 0 && !em_is_meta(in)) { /* Note [meta device]: shapes only */
        int nt = 1;
        if (em_num_threads > 1 && lines > 1 && lines * n >= 2 * EM_GRAIN)
            nt = em_num_threads < lines ? em_num_threads : (int)lines;
        size_t bytes;
        if (__builtin_mul_overflow((size_t)n, (size_t)16 * (size_t)nt, &bytes) ||
            !(scratch = PyMem_RawMalloc(bytes))) {
            PyErr_NoMemory();
            goto fail;
        }
        EmSelectFn fn = em_select_fns[rows->dtype];
        if (!fn) {
            PyErr_Format(PyExc_NotImplementedError, "\"%s_cpu\" not implemented for '%s'", name,
                         em_dtype_name((EmDType)rows->dtype));
            goto fail;
        }
        const char *src = em_data(rows);
        char *vd = em_data(v);
        int64_t *id = (int64_t *)em_data(i);
        if (lines * n >= 65536) {
            Py_BEGIN_ALLOW_THREADS
            fn(kind, src, lines, n, vd, id, scratch, nt);
            Py_END_ALLOW_THREADS
        } else {
            fn(kind, src, lines, n, vd, id, scratch, nt);
        }
    }
    if (keepdim) { /* put dim back as size 1 */
        EmTensor *vv = em_reshape(v, r.ndim, r.shape);
        EmTensor *ii = vv ? em_reshape(i, r.ndim, r.shape) : NULL;
        Py_DECREF(v);
        Py_DECREF(i);
        v = vv;
        i = ii;
        if (!i) goto fail;
    }
    if (oa) {
        EmTensor *outs[2] = {oa, ob}, *vals[2] = {v, i};
        for (int q = 0; q < 2; q++) {
            if (!same_shape(outs[q], r.ndim, r.shape) && em_tensor_resize(outs[q], r.ndim, r.shape, true) < 0)
                goto fail;
            if (em_copy_(outs[q], (PyObject *)vals[q]) < 0) goto fail;
        }
        Py_DECREF(v);
        Py_DECREF(i);
        v = (EmTensor *)Py_NewRef(oa);
        i = (EmTensor *)Py_NewRef(ob);
    }
    PyMem_RawFree(scratch);
    Py_DECREF(perm);
    Py_DECREF(rows);
    return pair_result(name, "values", "indices", v, i, oa != NULL);
fail:
    PyMem_RawFree(scratch);
    Py_XDECREF(perm);
    Py_XDECREF(rows);
    Py_XDECREF(v);
    Py_XDECREF(i);
    return NULL;
}

/* median / nanmedian: (input, dim, keepdim, *, out); no dim: the value of
 * the lower median of all elements */
static PyObject *median_like(EmCall *c, bool gpu, EmSelectKind kind) {
    const char *name = c->def->name;
    EmTensor *in = em_arg_tensor(c, 0);
    bool keepdim;
    if (arg_keepdim(c, 2, &keepdim) < 0) return NULL;
    if (c->args[1] != Py_None) {
        int64_t d;
        int w;
        if (em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &w) < 0) return NULL;
        if (in->ndim && in->sizes[w] == 0) {
            PyErr_Format(PyExc_IndexError, "median(): Expected reduction dim %d to have non-zero size.", w);
            return NULL;
        }
        if (in->dtype == EM_BOOL) return not_implemented("median_out", EM_BOOL);
        return select_dim(gpu, in, w, keepdim, c->args[3], name, kind);
    }
    if (keepdim || c->args[3] != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s() missing 1 required positional arguments: \"dim\"", name);
        return NULL;
    }
    if (in->numel == 0) { /* NaN, cast to the dtype as torch's CPU cast does it */
        EmScalar s = {'f', {0}};
        s.v.f = NAN;
        if (!em_is_float(in->dtype)) {
            EmDType d = (EmDType)in->dtype;
            s.kind = 'i';
            s.v.i = d == EM_BOOL ? 1 : d == EM_INT32 ? INT32_MIN : d == EM_INT64 ? INT64_MIN : 0;
        }
        return (PyObject *)em_scalar_tensor(s, (EmDType)in->dtype, em_device(in));
    }
    if (in->dtype == EM_BOOL) return not_implemented("median_cpu", EM_BOOL);
    int64_t flat = -1;
    EmTensor *x = em_reshape(in, 1, &flat);
    if (!x) return NULL;
    PyObject *pair = select_dim(gpu, x, 0, false, Py_None, name, kind);
    Py_DECREF(x);
    if (!pair) return NULL;
    PyObject *v = Py_NewRef(PyStructSequence_GetItem(pair, 0));
    Py_DECREF(pair);
    return v;
}

static PyObject *median_op(EmCall *c, bool gpu) { return median_like(c, gpu, EM_SELECT_MEDIAN); }
static PyObject *nanmedian_op(EmCall *c, bool gpu) { return median_like(c, gpu, EM_SELECT_NANMEDIAN); }
EM_DEVICE_SLOTS(median, median_op)
EM_DEVICE_SLOTS(nanmedian, nanmedian_op)

/* mode: (input, dim=-1, keepdim, *, out) */
static PyObject *mode_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0);
    bool keepdim;
    int64_t d;
    int w;
    if (arg_keepdim(c, 2, &keepdim) < 0 || em_arg_int(c, 1, &d) < 0 || em_wrap_dim(d, in->ndim, &w) < 0)
        return NULL;
    return select_dim(gpu, in, w, keepdim, c->args[3], "mode", EM_SELECT_MODE);
}
EM_DEVICE_SLOTS(mode, mode_op)
