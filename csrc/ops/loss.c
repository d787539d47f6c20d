/* loss.c — front-ends of the losses with their own autograd nodes (torch's
 * NllLossBackward0, MseLossBackward0, ...): the negative log-likelihood
 * (kernel in cpu/softmax.c, Note [nll layout]) with its backward, and the
 * pointwise losses, computed here with ember ops (grad mode off inside; the
 * op's own node is recorded around the call). The composite losses
 * (cross-entropy, l1, kl_div, ...) are in python/ember/nn/functional.py. */
#include "loss.h"
#include "fused_gpu.h"
#include "device_slot.h"


int em_arg_reduction(EmCall *c, int i, int64_t *r) {
    if (em_arg_int(c, i, r) < 0) return -1;
    if (*r < 0 || *r > 2) {
        PyErr_Format(PyExc_ValueError, "%lld is not a valid value for reduction", (long long)*r);
        return -1;
    }
    return 0;
}

/* A contiguous copy (or t itself) in dtype. */
static EmTensor *contig_as(EmTensor *t, EmDType dt) {
    EmTensor *x = em_to_dtype(t, dt, false), *r;
    if (!x) return NULL;
    r = em_contiguous(x);
    Py_DECREF(x);
    return r;
}

/* --------------------------------------------------------------------- NLL */

void em_nll_clear(NllArgs *a) {
    Py_CLEAR(a->x);
    Py_CLEAR(a->t);
    Py_CLEAR(a->w);
}

/* torch's shape rules: input (C) with a 0-d target, (N, C) with (N), or
 * (N, C, d1, ...) with (N, d1, ...); weight of C elements. */
int em_nll_prepare(bool gpu, EmTensor *in, EmTensor *target, EmTensor *weight, int64_t ignore, NllArgs *a) {
    char b1[EM_SHAPE_BUF], b2[EM_SHAPE_BUF];
    memset(a, 0, sizeof *a);
    /* GPU operands (the CUDA front-ends): the kernel checks the targets on
     * the device, so the host never reads them */
    if (!gpu && !em_is_meta(in) && (em_check_cpu(in, "nll_loss") < 0 || em_check_cpu(target, "nll_loss") < 0 ||
                 (weight && em_check_cpu(weight, "nll_loss") < 0)))
        return -1;
    EM_CHECK(in->ndim >= 1, PyExc_RuntimeError, "input tensor should be 1D or 2D, got a %dD tensor", in->ndim);
    EM_CHECK(em_is_float(in->dtype), PyExc_RuntimeError,
             "\"nll_loss\" not implemented for '%s'", em_dtype_name((EmDType)in->dtype));
    EM_CHECK(target->dtype == EM_INT64 || target->dtype == EM_UINT8, PyExc_RuntimeError,
             "expected target dtype to be Long or Byte, but got %s", em_dtype_name((EmDType)target->dtype));
    if (in->ndim == 1) {
        EM_CHECK(target->ndim <= 1 && (target->ndim == 0 || target->sizes[0] == 1), PyExc_RuntimeError,
                 "0D or 1D target tensor expected, multi-target not supported (input of shape %s, target of shape %s)",
                 em_shape_str(in->ndim, in->sizes, b1, sizeof b1), em_shape_str(target->ndim, target->sizes, b2, sizeof b2));
    } else if (in->ndim == 2) {
        EM_CHECK(target->ndim >= 1 && target->sizes[0] == in->sizes[0], PyExc_ValueError,
                 "Expected input batch_size (%lld) to match target batch_size (%lld).",
                 (long long)in->sizes[0], (long long)(target->ndim ? target->sizes[0] : 0));
        EM_CHECK(target->ndim == 1, PyExc_RuntimeError,
                 "0D or 1D target tensor expected, multi-target not supported (input of shape %s, target of shape %s)",
                 em_shape_str(in->ndim, in->sizes, b1, sizeof b1), em_shape_str(target->ndim, target->sizes, b2, sizeof b2));
    } else {
        int64_t want[EM_MAX_DIMS];
        want[0] = in->sizes[0];
        for (int d = 2; d < in->ndim; d++) want[d - 1] = in->sizes[d];
        bool ok = target->ndim == in->ndim - 1;
        for (int d = 0; ok && d < target->ndim; d++) ok = target->sizes[d] == want[d];
        EM_CHECK(ok, PyExc_RuntimeError, "Expected target size %s, got %s", em_shape_str(in->ndim - 1, want, b1, sizeof b1),
                 em_shape_str(target->ndim, target->sizes, b2, sizeof b2));
    }
    int64_t C = in->ndim == 1 ? in->sizes[0] : in->sizes[1];
    if (weight)
        EM_CHECK(weight->numel == C, PyExc_RuntimeError,
                 "weight tensor should be defined either for all %lld classes or no classes but got weight tensor of shape: %s",
                 (long long)C, em_shape_str(weight->ndim, weight->sizes, b1, sizeof b1));
    EmDType cdt = em_compute_dtype((EmDType)in->dtype);
    EM_TRY(a->x = contig_as(in, cdt));
    EM_TRY(a->t = contig_as(target, EM_INT64)); /* Byte targets are widened */
    if (gpu && em_is_cpu(a->t)) { /* not dispatch: a 0-d CPU target beside GPU logits */
        Py_SETREF(a->t, em_to_device(a->t, em_device(in), false));
        EM_TRY(a->t);
    }
    if (weight) EM_TRY(a->w = contig_as(weight, cdt));
    a->p.x = em_data(a->x);
    a->p.t = (const int64_t *)em_data(a->t);
    a->p.w = a->w ? em_data(a->w) : NULL;
    a->p.dt = cdt;
    a->p.N = in->ndim == 1 ? 1 : in->sizes[0];
    a->p.C = C;
    a->p.inner = 1;
    for (int d = 2; d < in->ndim; d++) a->p.inner *= in->sizes[d];
    a->p.ignore = ignore;
    if (gpu || em_is_meta(in)) return 0; /* Note [meta device]: no targets to read */
    int64_t bad = em_cpu_nll_check(&a->p);
    EM_CHECK(bad < 0, PyExc_IndexError, "Target %lld is out of bounds.", (long long)(bad >= 0 ? a->p.t[bad] : 0));
    return 0;
fail:
    em_nll_clear(a);
    return -1;
}

/* ---- NLL on GPU tensors (Note [CUDA nn kernels]); the targets are
 * checked on the device, with the CPU's IndexError. */

static EmTensor *gpu_work(EmDevice dev) {
    int64_t n = 4;
    return em_empty(1, &n, EM_FLOAT64, dev);
}

/* 1 from a kernel: the CPU's error for the bad target; -1: the backend's. */
static int nll_gpu_status(int rc, int64_t bad, const char *what) {
    if (rc == 1) PyErr_Format(PyExc_IndexError, "Target %lld is out of bounds.", (long long)bad);
    else if (rc < 0) em_cuda_error(what);
    return rc == 0 ? 0 : -1;
}

/* The forward on the device: a.x, a.t, a.w are device tensors (released here). */
static PyObject *nll_gpu(EmTensor *in, EmTensor *target, NllArgs *a, int64_t reduction) {
    EmDevice dev = em_device(in);
    EmTensor *out = NULL, *work = NULL;
    int64_t bad = 0;
    EM_TRY(out = reduction == RED_NONE ? em_empty(target->ndim, target->sizes, a->p.dt, dev)
                                       : em_empty(0, NULL, a->p.dt, dev));
    EM_TRY(work = gpu_work(dev));
    int rc = em_cuda->nll_loss(dev.index, a->p.dt, em_data(out), a->p.x, a->p.t, a->p.w, a->p.N, a->p.C, a->p.inner,
                               a->p.ignore, (int)reduction, (double *)em_data(work), &bad);
    EM_TRY(nll_gpu_status(rc, bad, "nll_loss") == 0);
    em_nll_clear(a);
    Py_DECREF(work);
    if (out->dtype != in->dtype) Py_SETREF(out, em_to_dtype(out, (EmDType)in->dtype, false));
    return (PyObject *)out;
fail:
    em_nll_clear(a);
    Py_XDECREF(out);
    Py_XDECREF(work);
    return NULL;
}

static PyObject *nll_loss_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *target = em_arg_tensor(c, 1), *weight = em_arg_tensor(c, 2), *out = NULL;
    int64_t reduction, ignore;
    NllArgs a;
    if (em_arg_reduction(c, 3, &reduction) < 0 || em_arg_int(c, 4, &ignore) < 0) return NULL;
    if (gpu && !em_cuda->nll_loss) return em_fused_no_kernel("nll_loss");
    if (em_nll_prepare(gpu, in, target, weight, ignore, &a) < 0) return NULL;
    if (gpu) return nll_gpu(in, target, &a, reduction);
    if (em_is_meta(in)) { /* Note [meta device]: the loss's shape */
        em_nll_clear(&a);
        return (PyObject *)em_empty(reduction == RED_NONE ? target->ndim : 0, target->sizes, (EmDType)in->dtype,
                                    em_meta());
    }
    double total, total_w;
    if (reduction == RED_NONE) {
        EM_TRY(out = em_empty(target->ndim, target->sizes, a.p.dt, em_cpu()));
        em_cpu_nll_forward(&a.p, em_data(out), &total, &total_w);
    } else {
        em_cpu_nll_forward(&a.p, NULL, &total, &total_w);
        /* mean over nothing (every target ignored) is 0/0 = nan, as torch */
        EmScalar s = {'f', {.f = reduction == RED_MEAN ? total / total_w : total}};
        EM_TRY(out = em_scalar_tensor(s, a.p.dt, em_cpu()));
    }
    em_nll_clear(&a);
    if (out->dtype != in->dtype) Py_SETREF(out, em_to_dtype(out, (EmDType)in->dtype, false));
    return (PyObject *)out;
fail:
    em_nll_clear(&a);
    Py_XDECREF(out);
    return NULL;
}
EM_DEVICE_SLOTS(nll_loss, nll_loss_op)

/* nll_loss_backward(grad_output, input, target, weight, reduction, ignore_index):
 * the gradient for input — zeros but -weight[t] * grad (/ total weight for
 * mean) at each target. */
static PyObject *nll_loss_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *target = em_arg_tensor(c, 2),
             *weight = em_arg_tensor(c, 3), *g = NULL, *gi = NULL;
    int64_t reduction, ignore;
    NllArgs a;
    if (em_arg_reduction(c, 4, &reduction) < 0 || em_arg_int(c, 5, &ignore) < 0) return NULL;
    if (gpu && !em_cuda->nll_loss_backward) return em_fused_no_kernel("nll_loss_backward");
    if (em_nll_prepare(gpu, in, target, weight, ignore, &a) < 0) return NULL;
    int64_t want = reduction == RED_NONE ? target->numel : 1;
    EM_CHECK(go->numel == want, PyExc_RuntimeError,
             "nll_loss_backward: expected a gradient of %lld elements, got %lld", (long long)want, (long long)go->numel);
    if (em_is_meta(in)) { /* Note [meta device] */
        em_nll_clear(&a);
        return (PyObject *)em_empty(in->ndim, in->sizes, (EmDType)in->dtype, em_meta());
    }
    EM_TRY(g = contig_as(go, a.p.dt));
    if (gpu) { /* the scatter on the device */
        EmDevice dev = em_device(in);
        EmTensor *work = NULL;
        int64_t bad = 0;
        if (em_is_cpu(g)) Py_SETREF(g, em_to_device(g, dev, false)); /* not dispatch: a 0-d CPU gradient */
        EM_TRY(g);
        EM_TRY(gi = em_empty(in->ndim, in->sizes, a.p.dt, dev));
        EM_TRY(work = gpu_work(dev));
        int rc = em_cuda->nll_loss_backward(dev.index, a.p.dt, em_data(gi), em_data(g), a.p.t, a.p.w, a.p.N, a.p.C,
                                            a.p.inner, a.p.ignore, (int)reduction, (double *)em_data(work), &bad);
        Py_DECREF(work);
        EM_TRY(nll_gpu_status(rc, bad, "nll_loss backward") == 0);
        em_nll_clear(&a);
        Py_DECREF(g);
        if (gi->dtype != in->dtype) Py_SETREF(gi, em_to_dtype(gi, (EmDType)in->dtype, false));
        return (PyObject *)gi;
    }
    EM_TRY(gi = em_zeros(in->ndim, in->sizes, a.p.dt, em_cpu()));
    double scale = 1.0;
    if (reduction == RED_MEAN) {
        double total, total_w;
        em_cpu_nll_forward(&a.p, NULL, &total, &total_w);
        scale = 1.0 / total_w;
    }
    em_cpu_nll_backward(&a.p, em_data(g), reduction != RED_NONE, scale, em_data(gi));
    em_nll_clear(&a);
    Py_DECREF(g);
    if (gi->dtype != in->dtype) Py_SETREF(gi, em_to_dtype(gi, (EmDType)in->dtype, false));
    return (PyObject *)gi;
fail:
    em_nll_clear(&a);
    Py_XDECREF(g);
    Py_XDECREF(gi);
    return NULL;
}
EM_DEVICE_SLOTS(nll_loss_backward, nll_loss_backward_op)

/* --------------------------------------------------------- pointwise losses */

/* A small expression scratch (as formula.h's, for the forward): results of
 * ember ops kept until the end of the call. */
typedef struct {
    PyObject *o[32];
    int n;
    bool failed;
} Keep;
static PyObject *kp(Keep *k, PyObject *o) {
    if (!o || k->n == 32) {
        Py_XDECREF(o);
        k->failed = true;
        return NULL;
    }
    return k->o[k->n++] = o;
}
static PyObject *op(Keep *k, EmOpId id, int n, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *args[3] = {a, b, c};
    for (int i = 0; i < n; i++)
        if (!args[i]) {
            k->failed = true;
            return NULL;
        }
    return kp(k, em_op(id, n, args));
}
#define K (&keep)
#define O1(id, a) op(K, EM_OP_##id, 1, (a), NULL, NULL)
#define O2(id, a, b) op(K, EM_OP_##id, 2, (a), (b), NULL)
#define O3(id, a, b, c) op(K, EM_OP_##id, 3, (a), (b), (c))
#define NUMF(v) kp(K, PyFloat_FromDouble(v))

/* all(0 <= x <= 1) of a GPU tensor with the device's kernels: 1 / 0 / -1 */
static int gpu_all_in_unit_interval(EmTensor *in) {
    PyObject *zero = PyLong_FromLong(0), *one = PyLong_FromLong(1), *lo = NULL, *hi = NULL, *both = NULL,
             *all = NULL, *v = NULL;
    int r = -1;
    if (zero && one && (lo = em_op(EM_OP_ge, 2, (PyObject *[]){(PyObject *)in, zero})) &&
        (hi = em_op(EM_OP_le, 2, (PyObject *[]){(PyObject *)in, one})) &&
        (both = em_op(EM_OP_logical_and, 2, (PyObject *[]){lo, hi})) &&
        (all = em_op(EM_OP_all, 1, (PyObject *[]){both})) && (v = em_tensor_item((EmTensor *)all)))
        r = PyObject_IsTrue(v);
    Py_XDECREF(zero);
    Py_XDECREF(one);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    Py_XDECREF(both);
    Py_XDECREF(all);
    Py_XDECREF(v);
    return r;
}

/* binary_cross_entropy's inputs are probabilities (NaN is not) */
static int check_unit_interval(EmTensor *in, bool gpu) {
    if (gpu) { /* checked on the device, one bool read back */
        int ok = gpu_all_in_unit_interval(in);
        if (ok < 0) return -1;
        if (!ok) PyErr_SetString(PyExc_RuntimeError, "all elements of input should be between 0 and 1");
        return ok ? 0 : -1;
    }
    EmTensor *x = contig_as(in, EM_FLOAT64);
    if (!x) return -1;
    const double *p = (const double *)em_data(x);
    bool ok = true;
    for (int64_t i = 0; i < x->numel; i++) ok &= p[i] >= 0 && p[i] <= 1;
    Py_DECREF(x);
    if (!ok) {
        PyErr_SetString(PyExc_RuntimeError, "all elements of input should be between 0 and 1");
        return -1;
    }
    return 0;
}

PyObject *em_pointwise_loss_terms(int kind, PyObject *x, PyObject *y, PyObject *pos_weight, double param) {
    Keep keep = {{0}, 0, false};
    PyObject *l = NULL, *one = NUMF(1.0);
    switch (kind) {
    case EM_LOSS_MSE: {
        PyObject *d = O2(sub, x, y);
        l = O2(mul, d, d);
        break;
    }
    case EM_LOSS_SMOOTH_L1:
    case EM_LOSS_HUBER: {
        PyObject *d = O2(sub, x, y), *ad = O1(abs, d);
        if (kind == EM_LOSS_SMOOTH_L1 && param == 0) {
            l = ad;
            break;
        }
        PyObject *sq = O2(mul, O2(mul, d, d), NUMF(kind == EM_LOSS_HUBER ? 0.5 : 0.5 / param));
        PyObject *lin = O2(sub, ad, NUMF(0.5 * param));
        if (kind == EM_LOSS_HUBER) lin = O2(mul, lin, NUMF(param));
        l = O3(where, O2(lt, ad, NUMF(param)), sq, lin);
        break;
    }
    case EM_LOSS_BCE: { /* -(y log x + (1 - y) log(1 - x)), each log at least -100 */
        PyObject *lx = O2(clamp_min, O1(log, x), NUMF(-100));
        PyObject *l1x = O2(clamp_min, O1(log, O2(sub, one, x)), NUMF(-100));
        l = O1(neg, O2(add, O2(mul, lx, y), O2(mul, l1x, O2(sub, one, y)))); /* x's terms first: its layout */
        break;
    }
    case EM_LOSS_BCE_LOGITS: { /* (1 - y) x + lw softplus(-x), lw = 1 + (pos_weight - 1) y */
        PyObject *sp = em_softplus_neg(x);
        kp(K, sp);
        PyObject *lw = pos_weight ? O2(add, one, O2(mul, O2(sub, pos_weight, one), y)) : NULL;
        l = O2(add, O2(mul, x, O2(sub, one, y)), lw ? O2(mul, sp, lw) : sp);
        break;
    }
    default:
        PyErr_Format(PyExc_ValueError, "pointwise_loss: unknown kind %d", kind);
        keep.failed = true;
    }
    if (l) Py_INCREF(l);
    for (int i = 0; i < keep.n; i++) Py_DECREF(keep.o[i]);
    if (keep.failed) {
        Py_XDECREF(l);
        return NULL;
    }
    return l;
}

/* softplus(-x) = log(1 + exp(-x)), computed as max(-x, 0) + log1p(exp(-|x|)) so that it never overflows */
PyObject *em_softplus_neg(PyObject *x) {
    Keep keep = {{0}, 0, false};
    PyObject *r = O2(add, O2(clamp_min, O1(neg, x), NUMF(0)), O1(log1p, O1(exp, O1(neg, O1(abs, x)))));
    Py_XINCREF(r);
    for (int i = 0; i < keep.n; i++) Py_DECREF(keep.o[i]);
    if (keep.failed) Py_CLEAR(r);
    return r;
}

static PyObject *pointwise_loss_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *target = em_arg_tensor(c, 1), *weight = em_arg_tensor(c, 2),
             *pos_weight = em_arg_tensor(c, 3);
    int64_t kind, reduction;
    double param;
    if (em_arg_int(c, 4, &kind) < 0 || em_arg_reduction(c, 5, &reduction) < 0 || em_arg_float(c, 6, &param) < 0)
        return NULL;
    if (kind == EM_LOSS_BCE && !em_is_meta(in) && check_unit_interval(in, gpu) < 0) return NULL;
    bool grad = em_grad_enabled();
    em_set_grad_enabled(false); /* the op records one node of its own */
    Keep keep = {{0}, 0, false};
    PyObject *l = kp(K, em_pointwise_loss_terms((int)kind, (PyObject *)in, (PyObject *)target,
                                                (PyObject *)pos_weight, param));
    if (weight) l = O2(mul, l, (PyObject *)weight);
    PyObject *r = reduction == RED_NONE ? l : reduction == RED_MEAN ? O1(mean, l) : O1(sum, l);
    Py_XINCREF(r);
    em_set_grad_enabled(grad);
    for (int i = 0; i < keep.n; i++) Py_DECREF(keep.o[i]);
    if (keep.failed) Py_CLEAR(r);
    return r;
}
EM_DEVICE_SLOTS(pointwise_loss, pointwise_loss_op)
