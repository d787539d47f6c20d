/* cross_entropy.c — front-ends of the fused cross-entropy (Note [fused
 * cross-entropy] in cpu/cross_entropy.h): F.cross_entropy with class-index
 * targets calls _cross_entropy, one pass over the logits without writing
 * log-probabilities, and its backward _cross_entropy_backward, one more.
 *
 * _cross_entropy returns (loss, lse): lse (the target's shape, computed in
 * the kernel dtype) is saved for the backward, which then needs no max or
 * sum pass. Operands are checked as nll_loss's (ops/loss.c), so errors are
 * torch's nll_loss errors, as in torch's composition.
 *
 * GPU logits run the backend's fused kernels (cross_entropy,
 * cross_entropy_backward) on the same checked operands; the kernels check the
 * targets on the device and report one out of range, which raises the CPU's
 * IndexError here. */
#include "../cpu/cross_entropy.h"
#include "fused_gpu.h"
#include "device_slot.h"
#include "loss.h"
#include <stdlib.h>

static int arg_smoothing(EmCall *c, int i, double *e) {
    if (em_arg_float(c, i, e) < 0) return -1;
    if (!(*e >= 0.0 && *e <= 1.0)) {
        PyErr_Format(PyExc_RuntimeError, "label_smoothing must be between 0.0 and 1.0. Got: %g", *e);
        return -1;
    }
    return 0;
}

/* Sum of w[t] over the targets that are not ignored: reduction='mean''s divisor. */
static double kept_weight(const EmNll *p) {
    double tw = 0;
    for (int64_t k = 0; k < p->N * p->inner; k++) {
        int64_t t = p->t[k];
        if (t == p->ignore) continue;
        tw += !p->w ? 1.0 : p->dt == EM_FLOAT32 ? (double)((const float *)p->w)[t] : ((const double *)p->w)[t];
    }
    return tw;
}

/* Release the GIL around kernels with real work. */
#define BIG_WORK(p) ((p)->N * (p)->C * (p)->inner >= 65536)

/* scratch of n float64 on dev for a kernel (new reference) */
static EmTensor *gpu_work(int64_t n, EmDevice dev) { return em_empty(1, &n, EM_FLOAT64, dev); }

static int bad_target(int rc, int64_t bad, const char *what) {
    if (rc == 1) PyErr_Format(PyExc_IndexError, "Target %lld is out of bounds.", (long long)bad);
    else if (rc < 0) em_cuda_error(what);
    return rc ? -1 : 0;
}

/* The GPU forward on prepared operands (consumes a): (loss, lse). */
static PyObject *xent_gpu(EmTensor *in, EmTensor *target, NllArgs *a, int64_t reduction, double e) {
    EmDevice dev = em_device(in);
    EmTensor *out = NULL, *lse = NULL, *work = NULL;
    PyObject *res = NULL;
    int64_t m = target->numel, bad = 0;
    EmDType ct = a->p.dt;
    EM_TRY(lse = em_empty(target->ndim, target->sizes, ct, dev));
    EM_TRY(out = reduction == RED_NONE ? em_empty(target->ndim, target->sizes, ct, dev) : em_empty(0, NULL, ct, dev));
    EM_TRY(work = gpu_work(2 * m + 2, dev));
    int rc = em_cuda->cross_entropy(dev.index, ct, em_data(out), em_data(lse), a->p.x, a->p.t, a->p.w, a->p.N, a->p.C,
                                    a->p.inner, a->p.ignore, e, (int)reduction, (double *)em_data(work), &bad);
    EM_TRY(bad_target(rc, bad, "cross_entropy_loss") == 0);
    if (out->dtype != in->dtype) Py_SETREF(out, em_to_dtype(out, (EmDType)in->dtype, false));
    EM_TRY(out);
    res = PyTuple_Pack(2, out, lse);
fail:
    em_nll_clear(a);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    Py_XDECREF(work);
    return res;
}

/* cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing) -> (loss, lse) */
static PyObject *cross_entropy_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *target = em_arg_tensor(c, 1), *weight = em_arg_tensor(c, 2);
    EmTensor *out = NULL, *lse = NULL;
    int64_t reduction, ignore;
    double e;
    NllArgs a;
    double *terms = NULL;
    PyObject *res = NULL;
    if (gpu && !em_cuda->cross_entropy) return em_fused_no_kernel("cross_entropy_loss");
    if (em_arg_reduction(c, 3, &reduction) < 0 || em_arg_int(c, 4, &ignore) < 0 || arg_smoothing(c, 5, &e) < 0)
        return NULL;
    if (!em_is_float(in->dtype)) { /* torch's composition fails in its log_softmax first */
        PyErr_Format(PyExc_NotImplementedError, "\"log_softmax_lastdim_kernel_impl\" not implemented for '%s'",
                     em_dtype_name((EmDType)in->dtype));
        return NULL;
    }
    if (em_nll_prepare(gpu, in, target, weight, ignore, &a) < 0) return NULL;
    if (gpu) return xent_gpu(in, target, &a, reduction, e);
    if (em_is_meta(in)) { /* Note [meta device]: (loss, lse) shapes, as below */
        EM_TRY(lse = em_empty(target->ndim, target->sizes, a.p.dt, em_meta()));
        EM_TRY(out = em_empty(reduction == RED_NONE ? target->ndim : 0, target->sizes, (EmDType)in->dtype, em_meta()));
        res = PyTuple_Pack(2, out, lse);
        goto fail;
    }
    EmXent p = {a.p, e};
    int64_t m = target->numel;
    EM_TRY(lse = em_empty(target->ndim, target->sizes, a.p.dt, em_cpu()));
    terms = malloc(2 * (size_t)(m + 1) * sizeof(double));
    EM_CHECK(terms, PyExc_MemoryError, "cross_entropy: could not allocate %lld bytes",
             (long long)(2 * (m + 1) * (int64_t)sizeof(double)));
    double *wt = terms + m + 1;
    int rc;
    char *ld = em_data(lse);
    if (BIG_WORK(&a.p)) {
        Py_BEGIN_ALLOW_THREADS
        rc = em_cpu_xent_forward(&p, ld, terms, wt);
        Py_END_ALLOW_THREADS
    } else {
        rc = em_cpu_xent_forward(&p, ld, terms, wt);
    }
    EM_CHECK(rc == 0, PyExc_MemoryError, "cross_entropy: out of memory for kernel scratch");
    if (reduction == RED_NONE) {
        EM_TRY(out = em_empty(target->ndim, target->sizes, a.p.dt, em_cpu()));
        char *o = em_data(out);
        for (int64_t k = 0; k < m; k++) {
            if (a.p.dt == EM_FLOAT32)
                ((float *)o)[k] = (float)terms[k];
            else
                ((double *)o)[k] = terms[k];
        }
    } else {
        double total = 0, total_w = 0;
        for (int64_t k = 0; k < m; k++) {
            total += terms[k];
            total_w += wt[k];
        }
        /* mean over nothing (every target ignored) is 0/0 = nan, as torch */
        EmScalar s = {'f', {.f = reduction == RED_MEAN ? total / total_w : total}};
        EM_TRY(out = em_scalar_tensor(s, a.p.dt, em_cpu()));
    }
    if (out->dtype != in->dtype) Py_SETREF(out, em_to_dtype(out, (EmDType)in->dtype, false));
    EM_TRY(out);
    res = PyTuple_Pack(2, out, lse);
fail:
    free(terms);
    em_nll_clear(&a);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    return res;
}
EM_DEVICE_SLOTS(cross_entropy, cross_entropy_op)

/* cross_entropy_backward(grad_output, input, target, weight, lse, reduction,
 * ignore_index, label_smoothing): the gradient for input (its dtype). */
static PyObject *cross_entropy_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *target = em_arg_tensor(c, 2),
             *weight = em_arg_tensor(c, 3), *lse_in = em_arg_tensor(c, 4), *g = NULL, *lse = NULL, *gi = NULL;
    int64_t reduction, ignore;
    double e, *s = NULL;
    NllArgs a;
    char b1[EM_SHAPE_BUF], b2[EM_SHAPE_BUF];
    EmTensor *work = NULL;
    if (gpu && !em_cuda->cross_entropy_backward) return em_fused_no_kernel("cross_entropy_loss_backward");
    if (em_arg_reduction(c, 5, &reduction) < 0 || em_arg_int(c, 6, &ignore) < 0 || arg_smoothing(c, 7, &e) < 0)
        return NULL;
    if (em_nll_prepare(gpu, in, target, weight, ignore, &a) < 0) return NULL;
    int64_t m = target->numel, want = reduction == RED_NONE ? m : 1;
    EM_CHECK(go->numel == want && em_is_float(go->dtype), PyExc_RuntimeError,
             "cross_entropy_backward: expected a floating point gradient of %lld elements, got %lld (%s)",
             (long long)want, (long long)go->numel, em_dtype_name((EmDType)go->dtype));
    bool same = lse_in->ndim == target->ndim && em_is_float(lse_in->dtype);
    for (int d = 0; same && d < target->ndim; d++) same = lse_in->sizes[d] == target->sizes[d];
    EM_CHECK(same, PyExc_RuntimeError,
             "cross_entropy_backward: lse of shape %s and dtype %s does not fit a target of shape %s",
             em_shape_str(lse_in->ndim, lse_in->sizes, b1, sizeof b1), em_dtype_name((EmDType)lse_in->dtype),
             em_shape_str(target->ndim, target->sizes, b2, sizeof b2));
    if (em_is_meta(in)) { /* Note [meta device] */
        em_nll_clear(&a);
        return (PyObject *)em_empty(in->ndim, in->sizes, (EmDType)in->dtype, em_meta());
    }
    if (gpu) {
        EmDevice dev = em_device(in);
        int64_t bad = 0;
        EM_TRY(g = em_fused_operand(go, a.p.dt, dev));
        EM_TRY(lse = em_fused_operand(lse_in, a.p.dt, dev));
        EM_TRY(gi = em_empty(in->ndim, in->sizes, a.p.dt, dev));
        EM_TRY(work = gpu_work(4, dev));
        int rc = em_cuda->cross_entropy_backward(dev.index, a.p.dt, em_data(gi), em_data(g), a.p.x, a.p.t, a.p.w,
                                                 em_data(lse), a.p.N, a.p.C, a.p.inner, a.p.ignore, e,
                                                 (int)reduction, (double *)em_data(work), &bad);
        EM_TRY(bad_target(rc, bad, "cross_entropy_loss_backward") == 0);
        goto done;
    }
    if (em_check_cpu(go, "cross_entropy_backward") < 0 || em_check_cpu(lse_in, "cross_entropy_backward") < 0) goto fail;
    EM_TRY(g = em_to_dtype(go, EM_FLOAT64, false));
    Py_SETREF(g, em_contiguous(g));
    EM_TRY(g);
    EM_TRY(lse = em_to_dtype(lse_in, a.p.dt, false));
    Py_SETREF(lse, em_contiguous(lse));
    EM_TRY(lse);
    /* the per-position scale: the incoming gradient, / total weight for 'mean' */
    s = malloc((size_t)(m + 1) * sizeof(double));
    EM_CHECK(s, PyExc_MemoryError, "cross_entropy_backward: could not allocate %lld bytes",
             (long long)((m + 1) * (int64_t)sizeof(double)));
    const double *gd = (const double *)em_data(g);
    double scale = reduction == RED_MEAN ? 1.0 / kept_weight(&a.p) : 1.0;
    for (int64_t k = 0; k < m; k++) s[k] = (reduction == RED_NONE ? gd[k] : gd[0]) * scale;
    EM_TRY(gi = em_empty(in->ndim, in->sizes, a.p.dt, em_cpu()));
    EmXent p = {a.p, e};
    int rc;
    const char *ld = em_data(lse);
    char *gid = em_data(gi);
    if (BIG_WORK(&a.p)) {
        Py_BEGIN_ALLOW_THREADS
        rc = em_cpu_xent_backward(&p, ld, s, gid);
        Py_END_ALLOW_THREADS
    } else {
        rc = em_cpu_xent_backward(&p, ld, s, gid);
    }
    EM_CHECK(rc == 0, PyExc_MemoryError, "cross_entropy_backward: out of memory for kernel scratch");
done:
    Py_XDECREF(work);
    free(s);
    em_nll_clear(&a);
    Py_DECREF(g);
    Py_DECREF(lse);
    if (gi->dtype != in->dtype) Py_SETREF(gi, em_to_dtype(gi, (EmDType)in->dtype, false));
    return (PyObject *)gi;
fail:
    Py_XDECREF(work);
    free(s);
    em_nll_clear(&a);
    Py_XDECREF(g);
    Py_XDECREF(lse);
    Py_XDECREF(gi);
    return NULL;
}
EM_DEVICE_SLOTS(cross_entropy_backward, cross_entropy_backward_op)

/* reduction='mean''s divisor for a target and weight a forward has checked
 * (the composed backward, autograd/derivatives_loss.c, needs it). 0 / -1. */
int em_nll_total_weight(EmTensor *target, EmTensor *weight, int64_t ignore, double *total) {
    EmTensor *t = em_to_dtype(target, EM_INT64, false), *w = NULL;
    int rc = -1;
    if (t) Py_SETREF(t, em_contiguous(t));
    if (!t) goto done;
    if (weight) {
        w = em_to_dtype(weight, EM_FLOAT64, false);
        if (w) Py_SETREF(w, em_contiguous(w));
        if (!w) goto done;
    }
    const int64_t *tp = (const int64_t *)em_data(t);
    const double *wp = w ? (const double *)em_data(w) : NULL;
    double tw = 0;
    for (int64_t k = 0; k < t->numel; k++) {
        if (tp[k] == ignore) continue;
        if (wp && (tp[k] < 0 || tp[k] >= w->numel)) {
            PyErr_Format(PyExc_IndexError, "Target %lld is out of bounds.", (long long)tp[k]);
            goto done;
        }
        tw += wp ? wp[tp[k]] : 1.0;
    }
    *total = tw;
    rc = 0;
done:
    Py_XDECREF(t);
    Py_XDECREF(w);
    return rc;
}
