/* interp.c — front-ends of the upsampling ops behind F.interpolate (torch's
 * aten names: upsample_nearest1d/2d, _upsample_nearest_exact1d/2d,
 * upsample_linear1d, upsample_bilinear2d, upsample_bicubic2d) and of their
 * `_backward` ops (the adjoints). They check torch's shape rules, build the
 * per-axis index/weight tables (cpu/interp.c, Note [interp layout]) and run
 * the kernel on a contiguous copy; half types compute in float32. Nearest
 * forward copies elements as they are (any float dtype and uint8). On a GPU
 * the same tables go to the device with their inverse maps and
 * the backend's kernels run (Note [CUDA upsample] in csrc/cuda/upsample.h),
 * on data kept in its dtype. */
#include "../cpu/interp.h"
#include "fused_gpu.h"

typedef struct {
    EmInterpMode mode;
    int spatial; /* 1 or 2 */
    bool backward;
    const char *name;
} UpsampleSpec;

/* A contiguous copy (or t itself) in dtype. */
static EmTensor *contig_as(EmTensor *t, EmDType dt) {
    EmTensor *x = em_to_dtype(t, dt, false), *r;
    if (!x) return NULL;
    r = em_contiguous(x);
    Py_DECREF(x);
    return r;
}

/* One axis's tables on the device. `ints` receives idx [out*taps],
 * inv_off [in+1] and inv [out*taps] (the taps reading each input position,
 * ascending: Note [CUDA upsample]) at element *at; `wts` the weights (skipped
 * when NULL) at *wat; both advance. 0 / -1 with an exception. */
static int axis_to_device(const EmInterpAxis *a, EmTensor *ints, int64_t *at, EmTensor *wts, int64_t *wat,
                          int64_t wsz, EmCudaInterpAxis *out) {
    const int64_t nt = a->out * a->taps, n = nt + a->in + 1 + nt;
    const int dev = em_device(ints).index;
    int64_t *h = PyMem_Malloc((size_t)n * sizeof(int64_t));
    if (!h) return PyErr_NoMemory(), -1;
    int64_t *off = h + nt, *inv = off + a->in + 1;
    memcpy(h, a->idx, (size_t)nt * sizeof(int64_t));
    memset(off, 0, (size_t)(a->in + 1) * sizeof(int64_t));
    for (int64_t t = 0; t < nt; t++) off[a->idx[t] + 1]++;
    for (int64_t i = 0; i < a->in; i++) off[i + 1] += off[i];
    int64_t *fill = PyMem_Malloc((size_t)(a->in > 0 ? a->in : 1) * sizeof(int64_t));
    if (!fill) {
        PyMem_Free(h);
        return PyErr_NoMemory(), -1;
    }
    memcpy(fill, off, (size_t)a->in * sizeof(int64_t));
    for (int64_t t = 0; t < nt; t++) inv[fill[a->idx[t]]++] = t; /* t ascending: (o, k) order */
    PyMem_Free(fill);
    int64_t *base = (int64_t *)em_data(ints) + *at;
    int rc = em_cuda->memcpy(base, dev, h, -1, (size_t)n * sizeof(int64_t), false);
    PyMem_Free(h);
    if (rc < 0) return em_cuda_error("upsample tables");
    *out = (EmCudaInterpAxis){a->taps, a->in, a->out, base, NULL, base + nt, base + nt + a->in + 1};
    *at += n;
    if (wts) {
        char *wd = em_data(wts) + *wat * wsz;
        if (em_cuda->memcpy(wd, dev, a->w, -1, (size_t)(nt * wsz), false) < 0) return em_cuda_error("upsample weights");
        out->w = wd;
        *wat += nt;
    }
    return 0;
}

/* The upsampling of x into y on their GPU through the host
 * tables ah, aw (weights of dtype wdt). 0 / -1 with an exception. */
static int upsample_gpu(bool copies, bool backward, EmTensor *x, EmTensor *y, EmDType wdt, int64_t planes,
                        const EmInterpAxis *ah, const EmInterpAxis *aw) {
    const EmDevice dev = em_device(x);
    int64_t nint = 2 * (ah->out * ah->taps + aw->out * aw->taps) + ah->in + aw->in + 2;
    int64_t nw = ah->out * ah->taps + aw->out * aw->taps, at = 0, wat = 0, wsz = em_itemsize(wdt);
    EmTensor *ints = em_empty(1, &nint, EM_INT64, dev), *wts = copies || !ints ? NULL : em_empty(1, &nw, wdt, dev);
    EmCudaInterpAxis h, w;
    int rc = -1;
    if (!ints || (!copies && !wts)) goto done;
    if (axis_to_device(ah, ints, &at, wts, &wat, wsz, &h) < 0 || axis_to_device(aw, ints, &at, wts, &wat, wsz, &w) < 0)
        goto done;
    if (copies)
        rc = em_cuda->interp_nearest(dev.index, em_itemsize((EmDType)x->dtype), planes, &h, &w, em_data(x), em_data(y));
    else
        rc = em_cuda->interp(dev.index, x->dtype, planes, &h, &w, em_data(x), em_data(y), backward);
    if (rc < 0) em_cuda_error("upsample");
done:
    Py_XDECREF(ints);
    Py_XDECREF(wts);
    return rc;
}

/* sizes as torch prints them: [2, 0, 5] */
static const char *list_str(int n, const int64_t *v, char *buf, size_t len) {
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

static PyObject *upsample(EmCall *c, const UpsampleSpec *sp, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *x = NULL, *y = NULL;
    EmInterpAxis ah = {0}, aw = {0};
    int64_t osize[EM_MAX_DIMS], isize[EM_MAX_DIMS], shape[4];
    int no, ni, nd = sp->spatial + 2, at = 2;
    bool ac = false;
    double scales[2] = {0, 0};
    char b1[EM_SHAPE_BUF];
    if (gpu && !(em_cuda && em_cuda->interp && em_cuda->interp_nearest)) return em_fused_no_kernel(sp->name);
    if (em_arg_intlist(c, 1, &no, osize) < 0) return NULL;
    EM_CHECK(no == sp->spatial, PyExc_RuntimeError, "It is expected output_size equals to %d, but got size %d",
             sp->spatial, no);
    if (sp->backward) {
        if (em_arg_intlist(c, 2, &ni, isize) < 0) return NULL;
        at = 3;
    } else {
        ni = t->ndim;
        for (int d = 0; d < ni && d < EM_MAX_DIMS; d++) isize[d] = t->sizes[d];
    }
    EM_CHECK(ni == nd, PyExc_RuntimeError, "It is expected input_size equals to %d, but got size %d", nd, ni);
    if (sp->mode == EM_INTERP_LINEAR || sp->mode == EM_INTERP_CUBIC)
        if (em_arg_bool(c, at++, &ac) < 0) return NULL;
    for (int k = 0; k < sp->spatial; k++, at++)
        if (!em_arg_is_none(c, at) && em_arg_float(c, at, &scales[k]) < 0) return NULL;
    int64_t ih = sp->spatial == 2 ? isize[2] : 1, iw = isize[nd - 1];
    int64_t oh = sp->spatial == 2 ? osize[0] : 1, ow = osize[sp->spatial - 1];
    if (sp->spatial == 1)
        EM_CHECK(iw > 0 && ow > 0, PyExc_RuntimeError,
                 "Input and output sizes should be greater than 0, but got input (W: %lld) and output (W: %lld)",
                 (long long)iw, (long long)ow);
    else
        EM_CHECK(ih > 0 && iw > 0 && oh > 0 && ow > 0, PyExc_RuntimeError,
                 "Input and output sizes should be greater than 0, but got input (H: %lld, W: %lld) output (H: %lld, "
                 "W: %lld)", (long long)ih, (long long)iw, (long long)oh, (long long)ow);
    if (sp->backward) {
        EM_CHECK(t->ndim == nd, PyExc_RuntimeError,
                 "Expected grad_output to be a tensor of dimension %d but got: dimension %d", nd, t->ndim);
        for (int d = 0; d < nd; d++) {
            int64_t want = d < 2 ? isize[d] : osize[d - 2];
            EM_CHECK(t->sizes[d] == want, PyExc_RuntimeError,
                     "Expected grad_output to have the same shape as output; output.size(%d) = %lld but got "
                     "grad_output.size(%d) = %lld", d, (long long)want, d, (long long)t->sizes[d]);
        }
    } else {
        bool nonempty = true;
        for (int d = 1; d < nd; d++) nonempty = nonempty && t->sizes[d] > 0;
        EM_CHECK(nonempty, PyExc_RuntimeError, "Non-empty %dD data tensor expected but got a tensor with sizes %s", nd,
                 list_str(nd, t->sizes, b1, sizeof b1));
    }
    EmDType dt = (EmDType)t->dtype;
    bool copies = sp->mode <= EM_INTERP_NEAREST_EXACT && !sp->backward; /* nearest forward: any float, uint8 */
    EM_CHECK(em_is_float(dt) || (copies && dt == EM_UINT8), PyExc_NotImplementedError,
             "\"%s\" not implemented for '%s'", sp->name, em_dtype_name(dt));
    EmDType cdt = copies || gpu ? dt : em_compute_dtype(dt); /* a GPU computes halves in float32 itself */

    int64_t planes, plane_out, total; /* sizes are positive (N may be 0): check the products */
    EM_CHECK(!__builtin_mul_overflow(isize[0], isize[1], &planes) && !__builtin_mul_overflow(oh, ow, &plane_out) &&
                 !__builtin_mul_overflow(planes, plane_out, &total),
             PyExc_RuntimeError, "%s: output of %lld x %lld planes of %lld x %lld elements is too large", sp->name,
             (long long)isize[0], (long long)isize[1], (long long)oh, (long long)ow);
    (void)total;
    EmDType wdt = copies ? EM_FLOAT32 : em_compute_dtype(dt); /* the weights' dtype (nearest forward reads none) */
    EM_TRY(x = contig_as(t, cdt));
    if (sp->backward) {
        EM_TRY(y = em_empty(nd, isize, cdt, em_device(t)));
    } else {
        shape[0] = isize[0];
        shape[1] = isize[1];
        shape[2] = sp->spatial == 2 ? oh : ow;
        shape[3] = ow;
        EM_TRY(y = em_empty(nd, shape, cdt, em_device(t)));
    }
    if (planes > 0 && !em_is_meta(t)) { /* Note [meta device]: the result's shape was the work */
        /* the tables after the result: an impossible size fails there, before any work */
        EmInterpMode mode = sp->mode == EM_INTERP_NEAREST && sp->spatial == 2 ? EM_INTERP_NEAREST_2D : sp->mode;
        if (sp->spatial == 2) EM_TRY(em_interp_axis(&ah, mode, ih, oh, ac, scales[0], wdt) == 0);
        else EM_TRY(em_interp_axis_unit(&ah, wdt) == 0);
        EM_TRY(em_interp_axis(&aw, mode, iw, ow, ac, scales[sp->spatial - 1], wdt) == 0);
        if (gpu) {
            EM_TRY(upsample_gpu(copies, sp->backward, x, y, wdt, planes, &ah, &aw) == 0);
            goto finished;
        }
        const char *xd = em_data(x);
        char *yd = em_data(y);
        bool ok = true;
        Py_BEGIN_ALLOW_THREADS
        if (copies) em_cpu_interp_nearest(xd, yd, em_itemsize(dt), planes, &ah, &aw);
        else if (sp->backward) ok = em_cpu_interp_backward(xd, yd, cdt, planes, &ah, &aw);
        else ok = em_cpu_interp_forward(xd, yd, cdt, planes, &ah, &aw);
        Py_END_ALLOW_THREADS
        EM_CHECK(ok, PyExc_MemoryError, "%s: out of memory for the kernel's scratch rows", sp->name);
    }
finished:
    Py_CLEAR(x);
    em_interp_axis_free(&ah);
    em_interp_axis_free(&aw);
    if (y->dtype != dt) Py_SETREF(y, em_to_dtype(y, dt, false));
    return (PyObject *)y;
fail:
    em_interp_axis_free(&ah);
    em_interp_axis_free(&aw);
    Py_XDECREF(x);
    Py_XDECREF(y);
    return NULL;
}

/* the CPU and CUDA front-ends of each (Note [device slot]) */
#define UPSAMPLE_IMPL(impl, mode, spatial, backward, name)                               \
    static const UpsampleSpec impl##_spec = {mode, spatial, backward, name};             \
    PyObject *em_impl_##impl(EmCall *c) { return upsample(c, &impl##_spec, false); }     \
    PyObject *em_impl_##impl##_cuda(EmCall *c) { return upsample(c, &impl##_spec, true); }
UPSAMPLE_IMPL(upsample_nearest1d, EM_INTERP_NEAREST, 1, false, "upsample_nearest1d")
UPSAMPLE_IMPL(upsample_nearest2d, EM_INTERP_NEAREST, 2, false, "upsample_nearest2d")
UPSAMPLE_IMPL(upsample_nearest_exact1d, EM_INTERP_NEAREST_EXACT, 1, false, "_upsample_nearest_exact1d")
UPSAMPLE_IMPL(upsample_nearest_exact2d, EM_INTERP_NEAREST_EXACT, 2, false, "_upsample_nearest_exact2d")
UPSAMPLE_IMPL(upsample_linear1d, EM_INTERP_LINEAR, 1, false, "upsample_linear1d")
UPSAMPLE_IMPL(upsample_bilinear2d, EM_INTERP_LINEAR, 2, false, "upsample_bilinear2d")
UPSAMPLE_IMPL(upsample_bicubic2d, EM_INTERP_CUBIC, 2, false, "upsample_bicubic2d")
UPSAMPLE_IMPL(upsample_nearest1d_backward, EM_INTERP_NEAREST, 1, true, "upsample_nearest1d_backward")
UPSAMPLE_IMPL(upsample_nearest2d_backward, EM_INTERP_NEAREST, 2, true, "upsample_nearest2d_backward")
UPSAMPLE_IMPL(upsample_nearest_exact1d_backward, EM_INTERP_NEAREST_EXACT, 1, true, "_upsample_nearest_exact1d_backward")
UPSAMPLE_IMPL(upsample_nearest_exact2d_backward, EM_INTERP_NEAREST_EXACT, 2, true, "_upsample_nearest_exact2d_backward")
UPSAMPLE_IMPL(upsample_linear1d_backward, EM_INTERP_LINEAR, 1, true, "upsample_linear1d_backward")
UPSAMPLE_IMPL(upsample_bilinear2d_backward, EM_INTERP_LINEAR, 2, true, "upsample_bilinear2d_backward")
UPSAMPLE_IMPL(upsample_bicubic2d_backward, EM_INTERP_CUBIC, 2, true, "upsample_bicubic2d_backward")
