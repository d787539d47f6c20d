/* conv.c — front-ends of the convolution ops (ops.def, "conv" block):
 *
 *   _im2col(input, kernel_size, dilation, padding, stride)          F.unfold
 *   _col2im(input, output_size, kernel_size, dilation, padding, stride)  F.fold
 *   _convolution(input, weight, bias, stride, padding, dilation, groups)
 *       F.conv1d / conv2d / conv3d on batched input (N, C, L), (N, C, H, W)
 *       or (N, C, D, H, W)
 *   _convolution_backward(grad_output, input, weight, stride, padding,
 *       dilation, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
 *       the fused backward; an output left out by output_mask is an empty
 *       tensor (it never carries a gradient).
 *   _convolution_transpose(input, weight, bias, stride, padding,
 *       output_padding, dilation, groups)   F.conv_transpose1d/2d/3d: the
 *       input gradient of the convolution whose windows are the input's
 *       positions (Note [transposed geometry]), plus the bias.
 *
 * They check arguments with torch's messages, bring the tensors to a
 * contiguous compute dtype (float32 for the half types, int64 for integer
 * convolutions, as torch's CPU kernels do), run the kernels in cpu/conv.c
 * with the GIL released for big work, and cast back. A 1-d or 2-d
 * convolution is a 3-d one over a depth (and height) of one. Formulas: autograd/derivatives_conv.c.
 *
 * On a GPU (Note [CUDA im2col] in csrc/cuda/conv.h) the same plan
 * runs on the device: the backend's im2col / col2im kernels and cuBLAS
 * GEMMs (Note [GPU gemm]) on operands kept in their dtype (halves accumulate
 * in float32 inside cuBLAS), the batch in chunks whose column buffer stays
 * under CONV_COLS_BYTES. Integer convolutions have no GPU kernel: they take
 * Note [CUDA fallback], like a backend without the entries. */
#include "../ember.h"
#include "../cpu/conv.h"
#include "fused_gpu.h"


static PyObject *not_implemented(const char *kernel, EmDType dt) {
    PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", kernel, em_dtype_name(dt));
    return NULL;
}

/* floor((n + 2p - d(k-1) - 1) / s) + 1: the number of window positions
 * (<= 0 when none fit); -1 with RuntimeError when the arithmetic overflows */
static int window_count(int64_t n, int64_t k, int64_t d, int64_t p, int64_t s, int64_t *out) {
    int64_t span, padded, num;
    if (__builtin_mul_overflow(d, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(p, 2, &padded) || __builtin_add_overflow(n, padded, &padded) ||
        __builtin_sub_overflow(padded, span, &num)) {
        PyErr_SetString(PyExc_RuntimeError, "convolution: kernel, dilation or padding too large (integer overflow)");
        return -1;
    }
    *out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    return 0;
}

/* An IntList argument of exactly `n` values (torch's "It is expected ..."). */
static int exact_list(EmCall *c, int i, const char *name, int n, int64_t *vals) {
    int got = 0;
    int64_t tmp[EM_MAX_DIMS];
    if (em_arg_intlist(c, i, &got, tmp) < 0) return -1;
    if (got != n) {
        PyErr_Format(PyExc_RuntimeError, "It is expected %s equals to %d, but got size %d", name, n, got);
        return -1;
    }
    memcpy(vals, tmp, sizeof(int64_t) * (size_t)n);
    return 0;
}

/* torch's im2col/col2im checks of kernel, dilation, padding and stride */
static int check_window(const int64_t *k, const int64_t *d, const int64_t *p, const int64_t *s) {
    if (k[0] <= 0 || k[1] <= 0)
        PyErr_Format(PyExc_RuntimeError, "kernel size should be greater than zero, but got kernel_height: %lld "
                     "kernel_width: %lld", (long long)k[0], (long long)k[1]);
    else if (s[0] <= 0 || s[1] <= 0)
        PyErr_Format(PyExc_RuntimeError, "stride should be greater than zero, but got stride_height: %lld "
                     "stride_width: %lld", (long long)s[0], (long long)s[1]);
    else if (d[0] <= 0 || d[1] <= 0)
        PyErr_Format(PyExc_RuntimeError, "dilation should be greater than zero, but got dilation_height: %lld "
                     "dilation_width: %lld", (long long)d[0], (long long)d[1]);
    else if (p[0] < 0 || p[1] < 0)
        PyErr_Format(PyExc_RuntimeError, "padding should be non-negative, but got pad_height: %lld pad_width: %lld",
                     (long long)p[0], (long long)p[1]);
    else
        return 0;
    return -1;
}

static bool any_zero(const EmTensor *t, int from) {
    for (int i = from; i < t->ndim; i++)
        if (t->sizes[i] == 0) return true;
    return false;
}

/* t as a contiguous tensor of dtype ct (new reference) */
static EmTensor *contiguous_as(EmTensor *t, EmDType ct) {
    EmTensor *a = em_to_dtype(t, ct, false);
    if (!a) return NULL;
    EmTensor *b = em_contiguous(a);
    Py_DECREF(a);
    return b;
}

/* r cast to dt, consuming r */
static EmTensor *finish(EmTensor *r, EmDType dt) {
    if (!r || r->dtype == dt) return r;
    EmTensor *o = em_to_dtype(r, dt, false);
    Py_DECREF(r);
    return o;
}

/* ------------------------------------------------------------------ im2col / col2im */

/* the backend's view of a geometry */
static EmCudaConvGeom cuda_geom(const EmConvGeom *g) {
    return (EmCudaConvGeom){g->C, g->H, g->W, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->oh, g->ow};
}

/* im2col (x (N, C, H, W) -> out (N, C*kh*kw, L)) or col2im (the reverse) of
 * a GPU tensor, in its dtype (bool as float32, as on the CPU); out has
 * nd_out dims of `shape`. New reference. */
static EmTensor *window_gpu(EmTensor *in, const EmConvGeom *g, int64_t N, int nd_out, const int64_t *shape,
                            bool col2im) {
    const EmDType dt = (EmDType)in->dtype, ct = dt == EM_BOOL ? EM_FLOAT32 : dt;
    const EmDevice dev = em_device(in);
    const int64_t L = g->oh * g->ow, rows = g->C * g->kh * g->kw;
    const EmCudaConvGeom cg = cuda_geom(g);
    EmTensor *x = em_fused_operand(in, ct, dev);
    EmTensor *out = x ? em_empty(nd_out, shape, ct, dev) : NULL;
    if (out && out->numel) {
        int rc = col2im ? em_cuda->col2im(dev.index, ct, &cg, N, em_data(x), rows * L, L, em_data(out))
                        : em_cuda->im2col(dev.index, ct, &cg, N, em_data(x), em_data(out), rows * L, L);
        if (rc < 0) {
            em_cuda_error(col2im ? "col2im" : "im2col");
            Py_CLEAR(out);
        }
    }
    Py_XDECREF(x);
    return finish(out, dt);
}

/* the compute dtype of im2col / col2im: float32 for the half types and for
 * bool (torch takes bool: col2im's sums then act as `or`) */
static EmDType window_dtype(EmDType dt) { return dt == EM_BOOL ? EM_FLOAT32 : em_compute_dtype(dt); }

/* (kernel, dilation, padding, stride) of an im2col/col2im call, arguments first..first+3 */
static int window_args(EmCall *c, int first, EmConvGeom *g) {
    int64_t k[2], d[2], p[2], s[2];
    if (exact_list(c, first, "kernel_size", 2, k) < 0 || exact_list(c, first + 1, "dilation", 2, d) < 0 ||
        exact_list(c, first + 2, "padding", 2, p) < 0 || exact_list(c, first + 3, "stride", 2, s) < 0 ||
        check_window(k, d, p, s) < 0)
        return -1;
    g->kh = k[0], g->kw = k[1], g->dh = d[0], g->dw = d[1], g->ph = p[0], g->pw = p[1], g->sh = s[0], g->sw = s[1];
    em_geom_2d(g);
    return 0;
}


/* The front-ends below come in pairs, em_impl_<op> for CPU tensors and
 * em_impl_<op>_cuda for GPU ones (Note [device slot]): the dispatcher picks
 * one from the row; both run one body, which shares torch's checks and
 * takes `gpu` from the slot that called it rather than from a tensor. */
static PyObject *im2col(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0);
    EmConvGeom g;
    if (window_args(c, 1, &g) < 0) return NULL;
    if (gpu && !(em_cuda && em_cuda->im2col)) return em_fused_no_kernel("im2col");
    char sbuf[EM_SHAPE_BUF];
    bool batched = in->ndim == 4;
    if ((in->ndim != 3 && !batched) || any_zero(in, batched ? 1 : 0)) {
        PyErr_Format(PyExc_RuntimeError, "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other "
                     "non-zero dimensions for input, but got: %s",
                     em_shape_str(in->ndim, in->sizes, sbuf, sizeof sbuf));
        return NULL;
    }
    int b = batched ? 1 : 0;
    int64_t N = batched ? in->sizes[0] : 1;
    g.C = in->sizes[b], g.H = in->sizes[b + 1], g.W = in->sizes[b + 2];
    if (window_count(g.H, g.kh, g.dh, g.ph, g.sh, &g.oh) < 0 || window_count(g.W, g.kw, g.dw, g.pw, g.sw, &g.ow) < 0)
        return NULL;
    if (g.oh < 1 || g.ow < 1) {
        PyErr_Format(PyExc_RuntimeError, "Given input with spatial size (%lld, %lld), kernel_size=(%lld, %lld), "
                     "dilation=(%lld, %lld), padding=(%lld, %lld), calculated shape of the array of sliding blocks "
                     "as (%lld, %lld), but its components must be at least one.", (long long)g.H, (long long)g.W,
                     (long long)g.kh, (long long)g.kw, (long long)g.dh, (long long)g.dw, (long long)g.ph,
                     (long long)g.pw, (long long)g.oh, (long long)g.ow);
        return NULL;
    }
    EmDType dt = (EmDType)in->dtype;
    if (!em_is_float(dt) && dt != EM_BOOL) return not_implemented("im2col_out_cpu", dt);
    int64_t shape[3] = {N, 0, 0}, rows, L, kk;
    if (__builtin_mul_overflow(g.kh, g.kw, &kk) || __builtin_mul_overflow(g.C, kk, &rows) ||
        __builtin_mul_overflow(g.oh, g.ow, &L)) {
        PyErr_SetString(PyExc_RuntimeError, "im2col: the column matrix is too large");
        return NULL;
    }
    shape[1] = rows, shape[2] = L;
    if (em_is_meta(in)) /* Note [meta device]: the shape was the work */
        return (PyObject *)em_empty(batched ? 3 : 2, batched ? shape : shape + 1, dt, em_meta());
    if (gpu) return (PyObject *)window_gpu(in, &g, N, batched ? 3 : 2, batched ? shape : shape + 1, false);
    EmDType ct = window_dtype(dt);
    EmTensor *x = contiguous_as(in, ct);
    EmTensor *out = x ? em_empty(batched ? 3 : 2, batched ? shape : shape + 1, ct, em_cpu()) : NULL;
    if (out && out->numel) {
        PyThreadState *ts = out->numel >= 65536 ? PyEval_SaveThread() : NULL;
        em_im2col_batch(ct, &g, N, em_data(x), em_data(out));
        if (ts) PyEval_RestoreThread(ts);
    }
    Py_XDECREF(x);
    return (PyObject *)finish(out, dt);
}

PyObject *em_impl__im2col(EmCall *c) { return im2col(c, false); }
PyObject *em_impl__im2col_cuda(EmCall *c) { return im2col(c, true); }

static PyObject *col2im(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0);
    EmConvGeom g;
    int64_t osz[2];
    if (exact_list(c, 1, "output_size", 2, osz) < 0 || window_args(c, 2, &g) < 0) return NULL;
    if (gpu && !(em_cuda && em_cuda->col2im)) return em_fused_no_kernel("col2im");
    char sbuf[EM_SHAPE_BUF];
    bool batched = in->ndim == 3;
    if ((in->ndim != 2 && !batched) || any_zero(in, batched ? 1 : 0)) {
        PyErr_Format(PyExc_RuntimeError, "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size "
                     "and non-zero dimensions for input, but got: %s",
                     em_shape_str(in->ndim, in->sizes, sbuf, sizeof sbuf));
        return NULL;
    }
    int b = batched ? 1 : 0;
    int64_t N = batched ? in->sizes[0] : 1, rows = in->sizes[b], L = in->sizes[b + 1], kk;
    if (__builtin_mul_overflow(g.kh, g.kw, &kk)) kk = INT64_MAX;
    if (rows % kk != 0) {
        PyErr_Format(PyExc_RuntimeError, "Expected size of input's dimension 1 to be divisible by the product of "
                     "kernel_size, but got input.size(1)=%lld and kernel_size=(%lld, %lld).", (long long)rows,
                     (long long)g.kh, (long long)g.kw);
        return NULL;
    }
    g.C = rows / kk, g.H = osz[0], g.W = osz[1];
    if (window_count(g.H, g.kh, g.dh, g.ph, g.sh, &g.oh) < 0 || window_count(g.W, g.kw, g.dw, g.pw, g.sw, &g.ow) < 0)
        return NULL;
    int64_t blocks;
    if (__builtin_mul_overflow(g.oh, g.ow, &blocks)) blocks = -1;
    if (g.oh < 1 || g.ow < 1 || blocks != L) {
        PyErr_Format(PyExc_RuntimeError, "Given output_size=(%lld, %lld), kernel_size=(%lld, %lld), dilation=(%lld, "
                     "%lld), padding=(%lld, %lld), stride=(%lld, %lld), expected size of input's dimension 2 to match "
                     "the calculated number of sliding blocks %lld * %lld = %lld, but got input.size(2)=%lld.",
                     (long long)g.H, (long long)g.W, (long long)g.kh, (long long)g.kw, (long long)g.dh,
                     (long long)g.dw, (long long)g.ph, (long long)g.pw, (long long)g.sh, (long long)g.sw,
                     (long long)g.oh, (long long)g.ow, (long long)blocks, (long long)L);
        return NULL;
    }
    EmDType dt = (EmDType)in->dtype;
    if (!em_is_float(dt) && dt != EM_BOOL) return not_implemented("col2im_out_cpu", dt);
    int64_t shape[4] = {N, g.C, g.H, g.W};
    if (em_is_meta(in)) /* Note [meta device] */
        return (PyObject *)em_empty(batched ? 4 : 3, batched ? shape : shape + 1, dt, em_meta());
    if (gpu) return (PyObject *)window_gpu(in, &g, N, batched ? 4 : 3, batched ? shape : shape + 1, true);
    EmDType ct = window_dtype(dt);
    EmTensor *x = contiguous_as(in, ct);
    EmTensor *out = x ? em_empty(batched ? 4 : 3, batched ? shape : shape + 1, ct, em_cpu()) : NULL;
    if (out && out->numel) {
        PyThreadState *ts = x->numel >= 65536 ? PyEval_SaveThread() : NULL;
        em_col2im_batch(ct, &g, N, em_data(x), em_data(out));
        if (ts) PyEval_RestoreThread(ts);
    }
    Py_XDECREF(x);
    return (PyObject *)finish(out, dt);
}

PyObject *em_impl__col2im(EmCall *c) { return col2im(c, false); }
PyObject *em_impl__col2im_cuda(EmCall *c) { return col2im(c, true); }

/* ------------------------------------------------------------------ convolution */

/* A stride/padding/dilation list: one value for every spatial dim, or one for all. */
static int spatial_list(EmCall *c, int i, const char *name, int spatial, int64_t *vals) {
    int got = 0;
    int64_t tmp[EM_MAX_DIMS];
    if (em_arg_intlist(c, i, &got, tmp) < 0) return -1;
    if (got != spatial && got != 1) {
        char buf[EM_SHAPE_BUF];
        PyErr_Format(PyExc_RuntimeError, "expected %s to be a single integer value or a list of %d values to match "
                     "the convolution dimensions, but got %s=%s", name, spatial, name,
                     em_shape_str(got, tmp, buf, sizeof buf));
        return -1;
    }
    /* vals: (depth, height, width); a 1-d or 2-d convolution is a 3-d one
     * of depth (and height) one: stride 1, padding 0, dilation 1 there */
    const int64_t unit = strcmp(name, "padding") && strcmp(name, "output_padding") ? 1 : 0;
    for (int k = 0; k < 3; k++) {
        int j = k - (3 - spatial); /* the argument's axis */
        vals[k] = j < 0 ? unit : tmp[got == 1 ? 0 : j];
    }
    return 0;
}

/* the backend has what the GPU convolution needs */
static bool conv_gpu_ready(void) { return em_cuda && em_cuda->gemm && em_cuda->im2col && em_cuda->col2im; }

/* A parsed convolution call: shapes, the compute dtype, the output size. */
typedef struct {
    EmConvShape s;
    int spatial; /* 1, 2 or 3 */
    EmDType dt, ct;
} ConvCall;

/* Checks of input (N, C, *spatial) and weight (O, C/groups, *kernel) and the
 * conv arguments at positions args..args+3 (stride, padding, dilation, groups). */
static int conv_setup(EmCall *c, EmTensor *in, EmTensor *w, int args, bool gpu, ConvCall *cc) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int64_t st[3], pd[3], dl[3], groups;
    if (em_arg_int(c, args + 3, &groups) < 0) return -1;
    /* the GPU plan is 2-d: a 3-d convolution takes Note [CUDA fallback] */
    if (gpu && (!conv_gpu_ready() || w->ndim == 5)) return em_fused_no_kernel("convolution"), -1;
    if (w->ndim < 3 || w->ndim > 5) {
        PyErr_Format(PyExc_RuntimeError, "convolution: expected a 3-d, 4-d or 5-d weight (1-d, 2-d or 3-d "
                     "convolution), but got "
                     "weight of size %s", em_shape_str(w->ndim, w->sizes, a, sizeof a));
        return -1;
    }
    cc->spatial = w->ndim - 2;
    if (spatial_list(c, args, "stride", cc->spatial, st) < 0 ||
        spatial_list(c, args + 1, "padding", cc->spatial, pd) < 0 ||
        spatial_list(c, args + 2, "dilation", cc->spatial, dl) < 0)
        return -1;
    const char *bad = NULL;
    if (pd[0] < 0 || pd[1] < 0 || pd[2] < 0) bad = "negative padding is not supported";
    else if (st[0] <= 0 || st[1] <= 0 || st[2] <= 0) bad = "non-positive stride is not supported";
    else if (dl[0] <= 0 || dl[1] <= 0 || dl[2] <= 0) bad = "non-positive dilation is not supported";
    else if (groups <= 0) bad = "non-positive groups is not supported";
    if (bad) {
        PyErr_SetString(PyExc_RuntimeError, bad);
        return -1;
    }
    if (in->ndim != w->ndim) {
        PyErr_Format(PyExc_RuntimeError, "Expected %d-dimensional input for %d-dimensional weight %s, but got "
                     "%d-dimensional input of size %s instead", w->ndim, w->ndim,
                     em_shape_str(w->ndim, w->sizes, a, sizeof a),
                     in->ndim, em_shape_str(in->ndim, in->sizes, b, sizeof b));
        return -1;
    }
    if (w->sizes[0] < groups) {
        PyErr_Format(PyExc_RuntimeError, "Given groups=%lld, expected weight to be at least %lld at dimension 0, but "
                     "got weight of size %s instead", (long long)groups, (long long)groups,
                     em_shape_str(w->ndim, w->sizes, a, sizeof a));
        return -1;
    }
    if (w->sizes[0] % groups) {
        PyErr_Format(PyExc_RuntimeError, "Given groups=%lld, expected weight to be divisible by %lld at dimension 0, "
                     "but got weight of size [%s] instead", (long long)groups, (long long)groups,
                     em_shape_str(w->ndim, w->sizes, a, sizeof a));
        return -1;
    }
    int64_t cin;
    if (__builtin_mul_overflow(w->sizes[1], groups, &cin)) cin = -1;
    if (in->sizes[1] != cin) {
        PyErr_Format(PyExc_RuntimeError, "Given groups=%lld, weight of size %s, expected input%s to have %lld "
                     "channels, but got %lld channels instead", (long long)groups,
                     em_shape_str(w->ndim, w->sizes, a, sizeof a), em_shape_str(in->ndim, in->sizes, b, sizeof b),
                     (long long)cin, (long long)in->sizes[1]);
        return -1;
    }
    EmConvGeom *g = &cc->s.g;
    const int sp = cc->spatial, nd = in->ndim;
    g->C = in->sizes[1], g->W = in->sizes[nd - 1], g->H = sp >= 2 ? in->sizes[nd - 2] : 1;
    g->D = sp == 3 ? in->sizes[2] : 1;
    g->kw = w->sizes[nd - 1], g->kh = sp >= 2 ? w->sizes[nd - 2] : 1, g->kd = sp == 3 ? w->sizes[2] : 1;
    g->sd = st[0], g->sh = st[1], g->sw = st[2], g->pd = pd[0], g->ph = pd[1], g->pw = pd[2];
    g->dd = dl[0], g->dh = dl[1], g->dw = dl[2];
    if (window_count(g->D, g->kd, g->dd, g->pd, g->sd, &g->od) < 0 ||
        window_count(g->H, g->kh, g->dh, g->ph, g->sh, &g->oh) < 0 ||
        window_count(g->W, g->kw, g->dw, g->pw, g->sw, &g->ow) < 0)
        return -1;
    if (g->od < 1 || g->oh < 1 || g->ow < 1) {
        int64_t padded[3] = {g->D + 2 * g->pd, g->H + 2 * g->ph, g->W + 2 * g->pw};
        int64_t kern[3] = {g->dd * (g->kd - 1) + 1, g->dh * (g->kh - 1) + 1, g->dw * (g->kw - 1) + 1};
        char ps[96] = "", ks[96] = "";
        for (int k = 3 - sp; k < 3; k++) { /* "(a x b x c)" over the convolution's dims */
            size_t lp = strlen(ps), lk = strlen(ks);
            snprintf(ps + lp, sizeof ps - lp, "%s%lld", k > 3 - sp ? " x " : "", (long long)padded[k]);
            snprintf(ks + lk, sizeof ks - lk, "%s%lld", k > 3 - sp ? " x " : "", (long long)kern[k]);
        }
        PyErr_Format(PyExc_RuntimeError, "Calculated padded input size per channel: (%s). Kernel size: (%s). "
                     "Kernel size can't be greater than actual input size", ps, ks);
        return -1;
    }
    cc->s.N = in->sizes[0];
    cc->s.O = w->sizes[0];
    cc->s.groups = groups;
    cc->dt = (EmDType)in->dtype;
    if (w->dtype != in->dtype) {
        /* torch's legacy type names: torch.FloatTensor */
        PyErr_Format(PyExc_RuntimeError, "Input type (torch.%sTensor) and weight type (torch.%sTensor) should be the "
                     "same or input should be a MKLDNN tensor and weight is a dense tensor", em_dtype_name(cc->dt),
                     em_dtype_name((EmDType)w->dtype));
        return -1;
    }
    if (cc->dt == EM_BOOL) {
        not_implemented("slow_conv2d_cpu", cc->dt);
        return -1;
    }
    cc->ct = em_is_float(cc->dt) ? em_compute_dtype(cc->dt) : EM_INT64;
    return 0;
}

/* the output's (or grad_output's) shape: (N, O, [[od,] oh,] ow) */
static int out_shape(const ConvCall *cc, int64_t *shape) {
    const int64_t o[3] = {cc->s.g.od, cc->s.g.oh, cc->s.g.ow};
    shape[0] = cc->s.N, shape[1] = cc->s.O;
    for (int k = 0; k < cc->spatial; k++) shape[2 + k] = o[3 - cc->spatial + k];
    return cc->spatial + 2;
}

static double conv_work(const ConvCall *cc) {
    const EmConvGeom *g = &cc->s.g;
    return (double)cc->s.N * (double)cc->s.O * (double)(g->C / cc->s.groups) * (double)g->kd * (double)g->kh *
           (double)g->kw * (double)g->od * (double)g->oh * (double)g->ow;
}

/* ------------------------------------------------------------------ convolution on a GPU */

/* Bytes of column matrix one chunk of images may take (the batch is split
 * into chunks that fit; one image always goes). */
#define CONV_COLS_BYTES ((int64_t)256 << 20)

/* The sizes of the GPU drivers (cpu/conv.c's Plan, in elements). */
typedef struct {
    int dev;
    EmDType dt;
    int64_t isz, L, K, Og, CK, xstep, ystep, nc; /* nc: images per chunk */
    bool direct;                                 /* 1x1, stride 1, no padding: x is its own column matrix */
    EmCudaConvGeom cg;
} GpuPlan;

static GpuPlan gpu_plan(const ConvCall *cc, EmDevice dev) {
    const EmConvGeom *g = &cc->s.g;
    GpuPlan p;
    p.dev = dev.index;
    p.dt = cc->dt;
    p.isz = em_dtype_info[cc->dt].itemsize;
    p.L = g->oh * g->ow;
    p.K = g->C / cc->s.groups * g->kh * g->kw;
    p.Og = cc->s.O / cc->s.groups;
    p.CK = g->C * g->kh * g->kw;
    p.xstep = g->C * g->H * g->W;
    p.ystep = cc->s.O * p.L;
    p.direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
               g->oh == g->H && g->ow == g->W; /* a transposed geometry may have more image than windows */
    const int64_t per = p.CK * p.L * p.isz; /* column bytes of one image */
    p.nc = per > 0 ? CONV_COLS_BYTES / per : cc->s.N;
    if (p.nc > cc->s.N) p.nc = cc->s.N;
    if (p.nc < 1) p.nc = 1;
    p.cg = cuda_geom(g);
    return p;
}

/* Note [GPU gemm]'s entry, row-major operands already swapped by the caller; 0 / -1 */
static int gpu_gemm(const GpuPlan *p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const char *a, int64_t lda,
                    int64_t sa, const char *b, int64_t ldb, int64_t sb, double beta, char *c, int64_t ldc, int64_t sc,
                    int64_t batch) {
    if (em_cuda->gemm(p->dev, p->dt, ta, tb, m, n, k, 1.0, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch,
                      em_allow_tf32) < 0)
        return em_cuda_error("convolution gemm");
    return 0;
}

/* a scratch buffer of n elements of the plan's dtype on its device */
static EmTensor *gpu_scratch(const GpuPlan *p, int64_t n) {
    return em_empty(1, &n, p->dt, (EmDevice){EM_CUDA, (int8_t)p->dev});
}

/* images [n0, n0 + b) of a contiguous (N, ch, L...) tensor as a contiguous (ch, b, L) one (new reference) */
static EmTensor *images_transposed(EmTensor *t, int64_t ch, int64_t L, int64_t n0, int64_t b) {
    int64_t shape[3] = {t->sizes[0], ch, L};
    const int64_t perm[3] = {1, 0, 2};
    EmTensor *v = em_reshape(t, 3, shape), *n = v ? em_narrow(v, 0, n0, b) : NULL;
    EmTensor *q = n ? em_permute(n, 3, perm) : NULL, *r = q ? em_contiguous(q) : NULL;
    Py_XDECREF(v);
    Py_XDECREF(n);
    Py_XDECREF(q);
    return r;
}

/* y (N, O, L) = conv(x, w) + bias: per chunk of images, im2col and one
 * strided-batched GEMM per group, y[n, grp] (Og, L) = w[grp] (Og, K) @
 * cols[n, grp] (K, L), added to the bias written first (beta 1). */
static EmTensor *conv_forward_gpu(const ConvCall *cc, EmTensor *in, EmTensor *w, EmTensor *bias, int nd,
                                  const int64_t *shape) {
    const EmDevice dev = em_device(in);
    const GpuPlan p = gpu_plan(cc, dev);
    const int64_t N = cc->s.N, G = cc->s.groups;
    EmTensor *x = NULL, *wc = NULL, *y = NULL, *cols = NULL;
    if (!em_is_float(cc->dt)) return em_fused_no_kernel("convolution"); /* integer: the CPU's int64 kernels */
    if (!(x = em_fused_operand(in, p.dt, dev)) || !(wc = em_fused_operand(w, p.dt, dev)) ||
        !(y = em_empty(nd, shape, p.dt, dev)))
        goto fail;
    if (y->numel == 0) goto done;
    if (bias) { /* y[n, o, ...] = bias[o] */
        int64_t bshape[3] = {cc->s.O, 1, 1};
        EmTensor *b = em_reshape(bias, nd - 1, bshape);
        int rc = b ? em_copy_(y, (PyObject *)b) : -1;
        Py_XDECREF(b);
        if (rc < 0) goto fail;
    } else if (p.K == 0 && em_fill_(y, (EmScalar){'i', {0}}) < 0) {
        goto fail;
    }
    if (p.K == 0) goto done; /* no input channels: the bias (or zeros) alone */
    if (!p.direct && !(cols = gpu_scratch(&p, p.nc * p.CK * p.L))) goto fail;
    const int64_t nc = p.direct ? N : p.nc, isz = p.isz;
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t b = nc < N - n0 ? nc : N - n0;
        const char *src = em_data(x) + n0 * p.xstep * isz;
        int64_t sstep = p.xstep;
        if (!p.direct) {
            if (em_cuda->im2col(p.dev, p.dt, &p.cg, b, src, em_data(cols), p.CK * p.L, p.L) < 0) {
                em_cuda_error("im2col");
                goto fail;
            }
            src = em_data(cols);
            sstep = p.CK * p.L;
        }
        for (int64_t grp = 0; grp < G; grp++)
            if (gpu_gemm(&p, false, false, p.L, p.Og, p.K, src + grp * p.K * p.L * isz, p.L, sstep,
                         em_data(wc) + grp * p.Og * p.K * isz, p.K, 0, bias ? 1.0 : 0.0,
                         em_data(y) + (n0 * p.ystep + grp * p.Og * p.L) * isz, p.L, p.ystep, b) < 0)
                goto fail;
    }
    goto done;
fail:
    Py_CLEAR(y);
done:
    Py_XDECREF(x);
    Py_XDECREF(wc);
    Py_XDECREF(cols);
    return y;
}

/* gx (N, C, H, W): per chunk, colg[n, grp] (K, L) = w[grp]^T @ gy[n, grp]
 * (one strided-batched GEMM per group), then col2im; a direct convolution's
 * GEMM writes gx itself. */
static int conv_grad_input_gpu(const ConvCall *cc, const GpuPlan *p, EmTensor *g, EmTensor *wc, EmTensor *gx) {
    const int64_t N = cc->s.N, G = cc->s.groups, isz = p->isz, nc = p->direct ? N : p->nc;
    EmTensor *colg = p->direct ? NULL : gpu_scratch(p, p->nc * p->CK * p->L);
    int rc = -1;
    if (!p->direct && !colg) return -1;
    for (int64_t n0 = 0; n0 < N; n0 += nc) {
        const int64_t b = nc < N - n0 ? nc : N - n0;
        char *dst = p->direct ? em_data(gx) + n0 * p->xstep * isz : em_data(colg);
        const int64_t dstep = p->direct ? p->xstep : p->CK * p->L;
        for (int64_t grp = 0; grp < G; grp++)
            if (gpu_gemm(p, false, true, p->L, p->K, p->Og, em_data(g) + (n0 * p->ystep + grp * p->Og * p->L) * isz,
                         p->L, p->ystep, em_data(wc) + grp * p->Og * p->K * isz, p->K, 0, 0.0,
                         dst + grp * p->K * p->L * isz, p->L, dstep, b) < 0)
                goto done;
        if (!p->direct && em_cuda->col2im(p->dev, p->dt, &p->cg, b, em_data(colg), p->CK * p->L, p->L,
                                          em_data(gx) + n0 * p->xstep * isz) < 0) {
            em_cuda_error("col2im");
            goto done;
        }
    }
    rc = 0;
done:
    Py_XDECREF(colg);
    return rc;
}

/* gw (O, K) = the sum over images of gy[n, grp] (Og, L) @ cols[n, grp]^T:
 * per chunk of b images the columns are laid out (C*kh*kw, b*L) and gy
 * transposed to (O, b*L), so one GEMM batched over the groups sums the
 * chunk, gw[grp] (+)= gyT[grp] (Og, b*L) @ colsT[grp]^T (b*L, K). */
static int conv_grad_weight_gpu(const ConvCall *cc, const GpuPlan *p, EmTensor *g, EmTensor *x, EmTensor *gw) {
    const int64_t N = cc->s.N, G = cc->s.groups, isz = p->isz;
    EmTensor *cols = p->direct ? NULL : gpu_scratch(p, p->nc * p->CK * p->L);
    int rc = -1;
    if (!p->direct && !cols) return -1;
    for (int64_t n0 = 0; n0 < N; n0 += p->nc) {
        const int64_t b = p->nc < N - n0 ? p->nc : N - n0;
        EmTensor *xt = NULL, *gt = images_transposed(g, cc->s.O, p->L, n0, b);
        if (!gt) goto done;
        const char *colsT;
        if (p->direct) {
            if (!(xt = images_transposed(x, cc->s.g.C, p->L, n0, b))) {
                Py_DECREF(gt);
                goto done;
            }
            colsT = em_data(xt);
        } else {
            if (em_cuda->im2col(p->dev, p->dt, &p->cg, b, em_data(x) + n0 * p->xstep * isz, em_data(cols), p->L,
                                b * p->L) < 0) {
                Py_DECREF(gt);
                em_cuda_error("im2col");
                goto done;
            }
            colsT = em_data(cols);
        }
        int r = gpu_gemm(p, true, false, p->K, p->Og, b * p->L, colsT, b * p->L, p->K * b * p->L, em_data(gt), b * p->L,
                         p->Og * b * p->L, n0 ? 1.0 : 0.0, em_data(gw), p->K, p->Og * p->K, G);
        Py_DECREF(gt);
        Py_XDECREF(xt);
        if (r < 0) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(cols);
    return rc;
}

/* (gx, gw, gb) on the GPU; outputs left out by mask are empty tensors */
static PyObject *conv_backward_gpu(const ConvCall *cc, EmTensor *gy, EmTensor *in, EmTensor *w, const int64_t *mask) {
    const EmDevice dev = em_device(in);
    const GpuPlan p = gpu_plan(cc, dev);
    int64_t zero = 0;
    EmTensor *g = NULL, *x = NULL, *wc = NULL, *res[3] = {NULL, NULL, NULL};
    PyObject *tuple = NULL;
    if (!em_is_float(cc->dt)) return em_fused_no_kernel("convolution_backward");
    if (!(g = em_fused_operand(gy, p.dt, dev)) || (mask[1] && !(x = em_fused_operand(in, p.dt, dev))) ||
        !(wc = em_fused_operand(w, p.dt, dev))) /* x feeds gw alone (a transposed convolution has none) */
        goto done;
    for (int k = 0; k < 3; k++) {
        if (!mask[k]) {
            res[k] = em_empty(1, &zero, p.dt, dev);
        } else if (k == 0) {
            res[k] = em_empty(in->ndim, in->sizes, p.dt, dev);
            if (res[k] && res[k]->numel && conv_grad_input_gpu(cc, &p, g, wc, res[k]) < 0) goto done;
        } else if (k == 1) {
            res[k] = cc->s.N == 0 ? em_zeros(w->ndim, w->sizes, p.dt, dev) : em_empty(w->ndim, w->sizes, p.dt, dev);
            if (res[k] && res[k]->numel && cc->s.N && conv_grad_weight_gpu(cc, &p, g, x, res[k]) < 0) goto done;
        } else { /* gb: the sum of gy over the images and positions (the device's reduction) */
            int64_t to[3] = {cc->s.O, 1, 1}, O = cc->s.O;
            EmTensor *s = em_sum_to(g, g->ndim - 1, to);
            res[k] = s ? em_reshape(s, 1, &O) : NULL;
            Py_XDECREF(s);
        }
        if (!res[k]) goto done;
    }
    tuple = PyTuple_Pack(3, res[0], res[1], res[2]);
done:
    Py_XDECREF(g);
    Py_XDECREF(x);
    Py_XDECREF(wc);
    for (int k = 0; k < 3; k++) Py_XDECREF(res[k]);
    return tuple;
}

/* x and w in channels-last order, y channels-last (Note [memory format]):
 * the layout torch returns, computed without transposing the images. */
static EmTensor *in_channels_last(EmTensor *t, EmDType ct) {
    EmTensor *a = em_to_dtype(t, ct, false), *r = NULL;
    if (!a) return NULL;
    if (em_is_contiguous_as(a, EM_CHANNELS_LAST)) return a; /* NHWC memory order is all the kernel needs */
    int64_t strides[4];
    em_memory_format_strides(EM_CHANNELS_LAST, 4, a->sizes, strides);
    r = em_empty_strided(4, a->sizes, strides, ct, em_cpu());
    if (r && em_copy_(r, (PyObject *)a) < 0) Py_CLEAR(r);
    Py_DECREF(a);
    return r;
}

/* The CPU forward: operands in the kernel's layout (contiguous, or
 * channels-last for em_conv_forward_nhwc), Ctrl-C armed and the GIL released
 * for real work. */
static EmTensor *conv_forward_cpu(const ConvCall *cc, EmTensor *in, EmTensor *w, EmTensor *bias, int nd,
                                  const int64_t *shape, bool channels_last) {
    EmTensor *x = NULL, *wc = NULL, *bc = NULL, *y = NULL;
    EmTensor *(*layout)(EmTensor *, EmDType) = channels_last ? in_channels_last : contiguous_as;
    int64_t strides[5];
    em_memory_format_strides(channels_last ? EM_CHANNELS_LAST : EM_CONTIGUOUS_FORMAT, nd, shape, strides);
    if (!(x = layout(in, cc->ct)) || !(wc = layout(w, cc->ct)) || (bias && !(bc = contiguous_as(bias, cc->ct))))
        goto done;
    if (!(y = em_empty_strided(nd, shape, strides, cc->ct, em_cpu()))) goto done;
    if (y->numel) {
        EmStop stop = em_stop_arm_for(conv_work(cc) / 64);
        em_stop_current = &stop;
        PyThreadState *ts = conv_work(cc) >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = (channels_last ? em_conv_forward_nhwc : em_conv_forward)(
            cc->ct, &cc->s, em_data(x), em_data(wc), bc ? em_data(bc) : NULL, em_data(y));
        if (ts) PyEval_RestoreThread(ts);
        em_stop_current = NULL;
        if (rc < 0) PyErr_NoMemory();
        if (rc < 0 || em_stop_check(&stop) < 0) Py_CLEAR(y);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return finish(y, cc->dt);
}

static PyObject *convolution(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 1), *bias = em_arg_tensor(c, 2);
    ConvCall cc;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (conv_setup(c, in, w, 3, gpu, &cc) < 0) return NULL;
    if (bias && (bias->ndim != 1 || bias->sizes[0] != cc.s.O)) {
        PyErr_Format(PyExc_RuntimeError, "Given weight of size %s, expected bias to be 1-dimensional with %lld "
                     "elements, but got bias of size %s instead", em_shape_str(w->ndim, w->sizes, a, sizeof a),
                     (long long)cc.s.O, em_shape_str(bias->ndim, bias->sizes, b, sizeof b));
        return NULL;
    }
    if (bias && bias->dtype != in->dtype) {
        PyErr_Format(PyExc_RuntimeError, "Input type (%s) and bias type (%s) should be the same", em_dtype_ctype(cc.dt),
                     em_dtype_ctype((EmDType)bias->dtype));
        return NULL;
    }
    int64_t shape[5];
    int nd = out_shape(&cc, shape);
    if (em_is_meta(in)) return (PyObject *)em_empty(nd, shape, cc.dt, em_meta()); /* Note [meta device] */
    if (gpu) return (PyObject *)conv_forward_gpu(&cc, in, w, bias, nd, shape);
    /* channels-last operands: the NHWC kernel (Note [memory format]) */
    bool channels_last = nd == 4 && em_conv_nhwc_supported(cc.ct, &cc.s) &&
                         (em_suggest_memory_format(in) == EM_CHANNELS_LAST ||
                          em_suggest_memory_format(w) == EM_CHANNELS_LAST);
    return (PyObject *)conv_forward_cpu(&cc, in, w, bias, nd, shape, channels_last);
}

PyObject *em_impl__convolution(EmCall *c) { return convolution(c, false); }
PyObject *em_impl__convolution_cuda(EmCall *c) { return convolution(c, true); }

static PyObject *convolution_backward(EmCall *c, bool gpu) {
    EmTensor *gy = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *w = em_arg_tensor(c, 2);
    ConvCall cc;
    int64_t mask[3];
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (exact_list(c, 7, "output_mask", 3, mask) < 0 || conv_setup(c, in, w, 3, gpu, &cc) < 0) return NULL;
    int64_t shape[5];
    int nd = out_shape(&cc, shape);
    bool fits = gy->ndim == nd;
    for (int i = 0; fits && i < nd; i++) fits = gy->sizes[i] == shape[i];
    if (!fits) {
        PyErr_Format(PyExc_RuntimeError, "convolution_backward: expected grad_output of size %s, but got %s",
                     em_shape_str(nd, shape, a, sizeof a), em_shape_str(gy->ndim, gy->sizes, b, sizeof b));
        return NULL;
    }
    if (gy->dtype != in->dtype) {
        PyErr_Format(PyExc_RuntimeError, "convolution_backward: expected grad_output of dtype %s, but got %s",
                     em_dtype_name(cc.dt), em_dtype_name((EmDType)gy->dtype));
        return NULL;
    }
    if (gpu) return conv_backward_gpu(&cc, gy, in, w, mask);
    int64_t zero = 0, O = cc.s.O;
    if (em_is_meta(gy)) { /* Note [meta device]: the gradients' shapes, as below */
        EmTensor *m[3] = {NULL, NULL, NULL};
        const EmTensor *like[3] = {in, w, NULL};
        PyObject *tuple = NULL;
        for (int k = 0; k < 3; k++)
            if (!(m[k] = !mask[k] ? em_empty(1, &zero, cc.dt, em_meta())
                                  : em_empty(k < 2 ? like[k]->ndim : 1, k < 2 ? like[k]->sizes : &O, cc.dt, em_meta())))
                goto meta_done;
        tuple = PyTuple_Pack(3, m[0], m[1], m[2]);
    meta_done:
        for (int k = 0; k < 3; k++) Py_XDECREF(m[k]);
        return tuple;
    }
    EmTensor *g = NULL, *x = NULL, *wc = NULL, *res[3] = {NULL, NULL, NULL};
    PyObject *tuple = NULL;
    /* channels-last operands: the NHWC kernel, as the forward (Note [memory format]) */
    bool channels_last = nd == 4 && em_conv_nhwc_supported(cc.ct, &cc.s) &&
                         (em_suggest_memory_format(in) == EM_CHANNELS_LAST ||
                          em_suggest_memory_format(w) == EM_CHANNELS_LAST);
    EmTensor *(*layout)(EmTensor *, EmDType) = channels_last ? in_channels_last : contiguous_as;
    EmMemoryFormat f = channels_last ? EM_CHANNELS_LAST : EM_CONTIGUOUS_FORMAT;
    /* the input's values only feed gw: a transposed convolution (gx alone)
     * passes a broadcast stand-in of the right shape, never copied */
    if (!(g = layout(gy, cc.ct)) || (mask[1] && !(x = layout(in, cc.ct))) || !(wc = layout(w, cc.ct))) goto done;
    const EmTensor *like[3] = {in, w, NULL};
    for (int k = 0; k < 3; k++) {
        if (!mask[k]) res[k] = em_empty(1, &zero, cc.ct, em_cpu());
        else if (k < 2) res[k] = em_empty_in_format(like[k]->ndim, like[k]->sizes, cc.ct, em_cpu(), f);
        else res[k] = em_empty(1, &O, cc.ct, em_cpu());
        if (!res[k]) goto done;
    }
    {
        EmStop stop = em_stop_arm_for(conv_work(&cc) / 64);
        em_stop_current = &stop;
        PyThreadState *ts = conv_work(&cc) >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = (channels_last ? em_conv_backward_nhwc : em_conv_backward)(
                                  cc.ct, &cc.s, em_data(g), x ? em_data(x) : NULL, em_data(wc),
                                  mask[0] && res[0]->numel ? em_data(res[0]) : NULL,
                                  mask[1] && res[1]->numel ? em_data(res[1]) : NULL,
                                  mask[2] && res[2]->numel ? em_data(res[2]) : NULL);
        if (ts) PyEval_RestoreThread(ts);
        em_stop_current = NULL;
        if (rc == 0 && em_stop_check(&stop) < 0) goto done;
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (int k = 0; k < 3; k++)
        if (!(res[k] = finish(res[k], cc.dt))) goto done;
    tuple = PyTuple_Pack(3, res[0], res[1], res[2]);
done:
    Py_XDECREF(g);
    Py_XDECREF(x);
    Py_XDECREF(wc);
    for (int k = 0; k < 3; k++) Py_XDECREF(res[k]);
    return tuple;
}

PyObject *em_impl__convolution_backward(EmCall *c) { return convolution_backward(c, false); }
PyObject *em_impl__convolution_backward_cuda(EmCall *c) { return convolution_backward(c, true); }

/* ------------------------------------------------------------------ transposed convolution */

/* Note [transposed geometry]: y = conv_transpose(x, w) is the input gradient
 * of the convolution of an image of y's size whose windows are x's
 * positions: EmConvGeom with C = C_out, (D, H, W) = y's spatial size and
 * (od, oh, ow) = x's, set directly rather than counted from the image
 * (with output_padding >= stride, allowed below the dilation, counting
 * would find more windows than x has; col2im leaves the rows no window
 * reaches at zero). em_conv_backward's input gradient then computes y. */

/* y (N, O, L) += b[o] */
static void add_bias(EmDType ct, char *y, const char *b, int64_t N, int64_t O, int64_t L) {
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            const int64_t at = (n * O + o) * L;
            if (ct == EM_FLOAT32)
                for (int64_t l = 0; l < L; l++) ((float *)y)[at + l] += ((const float *)b)[o];
            else
                for (int64_t l = 0; l < L; l++) ((double *)y)[at + l] += ((const double *)b)[o];
        }
}

/* A transposed convolution on a GPU: the input gradient of the convolution
 * whose geometry it is (conv_grad_input_gpu: GEMMs, then col2im), plus the
 * bias. 3-d geometries (the backend's im2col is 2-d) and integer dtypes take
 * the CPU fallback (EmNoCudaKernel, before anything is allocated). */
static PyObject *conv_transpose_gpu(const ConvCall *cc, EmTensor *in, EmTensor *w, EmTensor *bias, int nd,
                                    const int64_t *shape) {
    if (cc->spatial == 3 || !em_is_float(cc->dt) || !conv_gpu_ready())
        return em_fused_no_kernel("convolution_transpose"); /* Note [CUDA fallback] */
    const EmDevice dev = em_device(in);
    const GpuPlan p = gpu_plan(cc, dev);
    EmTensor *g = NULL, *wc = NULL, *y = NULL, *b = NULL;
    PyObject *res = NULL;
    if (!(g = em_fused_operand(in, p.dt, dev)) || !(wc = em_fused_operand(w, p.dt, dev)) ||
        !(y = em_empty(nd, shape, p.dt, dev)))
        goto done;
    if (y->numel && conv_grad_input_gpu(cc, &p, g, wc, y) < 0) goto done;
    if (bias) { /* y[n, o, ...] += bias[o] */
        int64_t bshape[4] = {cc->s.g.C, 1, 1, 1};
        PyObject *args[2] = {(PyObject *)y, NULL};
        if (!(b = em_reshape(bias, nd - 1, bshape))) goto done;
        args[1] = (PyObject *)b;
        res = (PyObject *)em_op_t(EM_OP_add, 2, args);
        goto done;
    }
    res = Py_NewRef((PyObject *)y);
done:
    Py_XDECREF(g);
    Py_XDECREF(wc);
    Py_XDECREF(y);
    Py_XDECREF(b);
    return res;
}

/* _convolution_transpose(input, weight, bias, stride, padding, output_padding, dilation, groups):
 * input (N, C_in, *spatial), weight (C_in, C_out / groups, *kernel) -> (N, C_out, *out), out =
 * (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1. nn/_conv_nd.py
 * checks the arguments first with torch's messages; these checks keep direct calls safe. */
static PyObject *convolution_transpose(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 1), *bias = em_arg_tensor(c, 2);
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int64_t st[3], pd[3], op[3], dl[3], groups;
    if (em_arg_int(c, 7, &groups) < 0) return NULL;
    /* the tensors share one device: the dispatcher checked (Note [device slot]) */
    if (w->ndim < 3 || w->ndim > 5 || in->ndim != w->ndim) {
        PyErr_Format(PyExc_RuntimeError, "Expected %d-dimensional input for %d-dimensional weight %s, but got "
                     "%d-dimensional input of size %s instead", w->ndim, w->ndim,
                     em_shape_str(w->ndim, w->sizes, a, sizeof a), in->ndim,
                     em_shape_str(in->ndim, in->sizes, b, sizeof b));
        return NULL;
    }
    const int sp = w->ndim - 2;
    if (spatial_list(c, 3, "stride", sp, st) < 0 || spatial_list(c, 4, "padding", sp, pd) < 0 ||
        spatial_list(c, 5, "output_padding", sp, op) < 0 || spatial_list(c, 6, "dilation", sp, dl) < 0)
        return NULL;
    const char *bad = NULL;
    for (int k = 0; k < 3 && !bad; k++) {
        if (st[k] <= 0) bad = "non-positive stride is not supported";
        else if (pd[k] < 0) bad = "negative padding is not supported";
        else if (op[k] < 0) bad = "negative output_padding is not supported";
        else if (dl[k] <= 0) bad = "non-positive dilation is not supported";
        else if (op[k] >= st[k] && op[k] >= dl[k]) bad = "output padding must be smaller than either stride or dilation";
    }
    if (!bad && groups <= 0) bad = "non-positive groups is not supported";
    if (bad) {
        PyErr_SetString(PyExc_RuntimeError, bad);
        return NULL;
    }
    const int64_t cin = w->sizes[0];
    if (cin < groups || cin % groups) {
        PyErr_Format(PyExc_RuntimeError, "Given groups=%lld, expected weight to be %s %lld at dimension 0, but got "
                     "weight of size %s instead", (long long)groups, cin < groups ? "at least" : "divisible by",
                     (long long)groups, em_shape_str(w->ndim, w->sizes, a, sizeof a));
        return NULL;
    }
    if (in->sizes[1] != cin) {
        PyErr_Format(PyExc_RuntimeError, "Given transposed=1, weight of size %s, expected input%s to have %lld "
                     "channels, but got %lld channels instead", em_shape_str(w->ndim, w->sizes, a, sizeof a),
                     em_shape_str(in->ndim, in->sizes, b, sizeof b), (long long)cin, (long long)in->sizes[1]);
        return NULL;
    }
    int64_t cout;
    if (__builtin_mul_overflow(w->sizes[1], groups, &cout)) {
        PyErr_SetString(PyExc_RuntimeError, "convolution_transpose: too many output channels");
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->sizes[0] != cout)) {
        PyErr_Format(PyExc_RuntimeError, "Given transposed=1, weight of size %s, expected bias to be 1-dimensional "
                     "with %lld elements, but got bias of size %s instead",
                     em_shape_str(w->ndim, w->sizes, a, sizeof a), (long long)cout,
                     em_shape_str(bias->ndim, bias->sizes, b, sizeof b));
        return NULL;
    }
    const EmDType dt = (EmDType)in->dtype;
    if (w->dtype != dt || (bias && bias->dtype != dt)) {
        PyErr_Format(PyExc_RuntimeError, "expected scalar type %s but found %s", em_dtype_name(dt),
                     em_dtype_name((EmDType)(w->dtype != dt ? w->dtype : bias->dtype)));
        return NULL;
    }
    if (!em_is_float(dt)) return not_implemented(sp == 3 ? "slow_conv_transpose3d_out_cpu"
                                                          : "slow_conv_transpose2d_out_cpu", dt);
    /* the geometry (depth, height, width; unit axes for 1-d / 2-d) */
    int64_t isz[3] = {1, 1, 1}, ksz[3] = {1, 1, 1}, osz[3];
    for (int k = 0; k < sp; k++) isz[3 - sp + k] = in->sizes[2 + k], ksz[3 - sp + k] = w->sizes[2 + k];
    for (int k = 0; k < 3; k++) {
        int64_t v, t, p2;
        if (__builtin_mul_overflow(isz[k] - 1, st[k], &v) || __builtin_mul_overflow(ksz[k] - 1, dl[k], &t) ||
            __builtin_add_overflow(v, t, &v) || __builtin_mul_overflow(pd[k], 2, &p2) ||
            __builtin_sub_overflow(v, p2, &v) || __builtin_add_overflow(v, op[k], &v) ||
            __builtin_add_overflow(v, 1, &v)) {
            PyErr_SetString(PyExc_RuntimeError, "convolution_transpose: output size too large (integer overflow)");
            return NULL;
        }
        osz[k] = v;
    }
    if (osz[0] <= 0 || osz[1] <= 0 || osz[2] <= 0) {
        PyErr_Format(PyExc_RuntimeError, "Given input size per channel: %s. Calculated output size per channel: "
                     "%s. Output size is too small", em_shape_str(sp, isz + 3 - sp, a, sizeof a),
                     em_shape_str(sp, osz + 3 - sp, b, sizeof b));
        return NULL;
    }
    ConvCall cc = {.spatial = sp, .dt = dt, .ct = em_compute_dtype(dt)};
    EmConvGeom *g = &cc.s.g;
    g->C = cout, g->D = osz[0], g->H = osz[1], g->W = osz[2];
    g->kd = ksz[0], g->kh = ksz[1], g->kw = ksz[2];
    g->sd = st[0], g->sh = st[1], g->sw = st[2], g->pd = pd[0], g->ph = pd[1], g->pw = pd[2];
    g->dd = dl[0], g->dh = dl[1], g->dw = dl[2];
    g->od = isz[0], g->oh = isz[1], g->ow = isz[2];
    cc.s.N = in->sizes[0], cc.s.O = cin, cc.s.groups = groups;
    int64_t shape[5] = {cc.s.N, cout};
    for (int k = 0; k < sp; k++) shape[2 + k] = osz[3 - sp + k];
    if (em_is_meta(in)) return (PyObject *)em_empty(sp + 2, shape, dt, em_meta()); /* Note [meta device] */
    if (gpu) return conv_transpose_gpu(&cc, in, w, bias, sp + 2, shape);
    EmTensor *x = NULL, *wc = NULL, *bc = NULL, *y = NULL;
    if (!(x = contiguous_as(in, cc.ct)) || !(wc = contiguous_as(w, cc.ct)) ||
        (bias && !(bc = contiguous_as(bias, cc.ct))) || !(y = em_empty(sp + 2, shape, cc.ct, em_cpu())))
        goto done;
    if (y->numel) {
        EmStop stop = em_stop_arm_for(conv_work(&cc) / 64);
        em_stop_current = &stop;
        PyThreadState *ts = conv_work(&cc) >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = em_conv_backward(cc.ct, &cc.s, em_data(x), NULL, em_data(wc), em_data(y), NULL, NULL);
        if (rc == 0 && bc) add_bias(cc.ct, em_data(y), em_data(bc), cc.s.N, cout, g->D * g->H * g->W);
        if (ts) PyEval_RestoreThread(ts);
        em_stop_current = NULL;
        if (rc < 0) PyErr_NoMemory();
        if (rc < 0 || em_stop_check(&stop) < 0) Py_CLEAR(y);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)finish(y, dt);
}

PyObject *em_impl__convolution_transpose(EmCall *c) { return convolution_transpose(c, false); }
PyObject *em_impl__convolution_transpose_cuda(EmCall *c) { return convolution_transpose(c, true); }
