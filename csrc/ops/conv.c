/* conv.c — front-ends of the convolution ops (ops.def, "conv" block):
 *
 *   _im2col(input, kernel_size, dilation, padding, stride)          F.unfold
 *   _col2im(input, output_size, kernel_size, dilation, padding, stride)  F.fold
 *   _convolution(input, weight, bias, stride, padding, dilation, groups)
 *       F.conv1d / F.conv2d on batched input (N, C, L) or (N, C, H, W)
 *   _convolution_backward(grad_output, input, weight, stride, padding,
 *       dilation, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
 *       the fused backward; an output left out by output_mask is an empty
 *       tensor (it never carries a gradient).
 *
 * They check arguments with torch's messages, bring the tensors to a
 * contiguous compute dtype (float32 for the half types, int64 for integer
 * convolutions, as torch's CPU kernels do), run the kernels in cpu/conv.c
 * with the GIL released for big work, and cast back. A 1-d convolution is
 * a 2-d one over a height of one. Formulas: autograd/derivatives_conv.c. */
#include "../ember.h"
#include "../cpu/conv.h"


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
    return 0;
}

PyObject *em_impl__im2col(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0);
    EmConvGeom g;
    if (window_args(c, 1, &g) < 0 || em_check_cpu(in, "im2col") < 0) return NULL;
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
    EmDType ct = window_dtype(dt);
    int64_t shape[3] = {N, 0, 0}, rows, L, kk;
    if (__builtin_mul_overflow(g.kh, g.kw, &kk) || __builtin_mul_overflow(g.C, kk, &rows) ||
        __builtin_mul_overflow(g.oh, g.ow, &L)) {
        PyErr_SetString(PyExc_RuntimeError, "im2col: the column matrix is too large");
        return NULL;
    }
    shape[1] = rows, shape[2] = L;
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

PyObject *em_impl__col2im(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0);
    EmConvGeom g;
    int64_t osz[2];
    if (exact_list(c, 1, "output_size", 2, osz) < 0 || window_args(c, 2, &g) < 0 || em_check_cpu(in, "col2im") < 0)
        return NULL;
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
    EmDType ct = window_dtype(dt);
    int64_t shape[4] = {N, g.C, g.H, g.W};
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

/* ------------------------------------------------------------------ convolution */

/* torch's legacy type names ("torch.FloatTensor") of the weight mismatch message */
static const char *tensor_type(EmDType dt) {
    static const char *names[EM_NUM_DTYPES] = {
        [EM_BOOL] = "torch.BoolTensor", [EM_UINT8] = "torch.ByteTensor", [EM_INT8] = "torch.CharTensor",
        [EM_INT16] = "torch.ShortTensor", [EM_INT32] = "torch.IntTensor", [EM_INT64] = "torch.LongTensor",
        [EM_FLOAT16] = "torch.HalfTensor", [EM_BFLOAT16] = "torch.BFloat16Tensor",
        [EM_FLOAT32] = "torch.FloatTensor", [EM_FLOAT64] = "torch.DoubleTensor"};
    return names[dt];
}

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
    /* a 1-d convolution is a 2-d one of height 1: stride 1, padding 0, dilation 1 there */
    vals[0] = spatial == 1 ? (strcmp(name, "padding") ? 1 : 0) : tmp[0];
    vals[1] = got == 1 ? tmp[0] : tmp[1];
    return 0;
}

/* A parsed convolution call: shapes, the compute dtype, the output size. */
typedef struct {
    EmConvShape s;
    int spatial; /* 1 or 2 */
    EmDType dt, ct;
} ConvCall;

/* Checks of input (N, C, *spatial) and weight (O, C/groups, *kernel) and the
 * conv arguments at positions args..args+3 (stride, padding, dilation, groups). */
static int conv_setup(EmCall *c, EmTensor *in, EmTensor *w, int args, ConvCall *cc) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int64_t st[2], pd[2], dl[2], groups;
    if (em_arg_int(c, args + 3, &groups) < 0) return -1;
    if (em_check_cpu(in, "convolution") < 0 || em_check_cpu(w, "convolution") < 0) return -1;
    if (w->ndim != 3 && w->ndim != 4) {
        PyErr_Format(PyExc_RuntimeError, "convolution: expected a 3-d or 4-d weight (1-d or 2-d convolution), but got "
                     "weight of size %s", em_shape_str(w->ndim, w->sizes, a, sizeof a));
        return -1;
    }
    cc->spatial = w->ndim - 2;
    if (spatial_list(c, args, "stride", cc->spatial, st) < 0 ||
        spatial_list(c, args + 1, "padding", cc->spatial, pd) < 0 ||
        spatial_list(c, args + 2, "dilation", cc->spatial, dl) < 0)
        return -1;
    const char *bad = NULL;
    if (pd[0] < 0 || pd[1] < 0) bad = "negative padding is not supported";
    else if (st[0] <= 0 || st[1] <= 0) bad = "non-positive stride is not supported";
    else if (dl[0] <= 0 || dl[1] <= 0) bad = "non-positive dilation is not supported";
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
    bool one = cc->spatial == 1;
    g->C = in->sizes[1], g->H = one ? 1 : in->sizes[2], g->W = in->sizes[in->ndim - 1];
    g->kh = one ? 1 : w->sizes[2], g->kw = w->sizes[w->ndim - 1];
    g->sh = st[0], g->sw = st[1], g->ph = pd[0], g->pw = pd[1], g->dh = dl[0], g->dw = dl[1];
    if (window_count(g->H, g->kh, g->dh, g->ph, g->sh, &g->oh) < 0 ||
        window_count(g->W, g->kw, g->dw, g->pw, g->sw, &g->ow) < 0)
        return -1;
    if (g->oh < 1 || g->ow < 1) {
        int64_t padded[2] = {g->H + 2 * g->ph, g->W + 2 * g->pw};
        int64_t kern[2] = {g->dh * (g->kh - 1) + 1, g->dw * (g->kw - 1) + 1};
        if (one)
            PyErr_Format(PyExc_RuntimeError, "Calculated padded input size per channel: (%lld). Kernel size: (%lld). "
                         "Kernel size can't be greater than actual input size", (long long)padded[1],
                         (long long)kern[1]);
        else
            PyErr_Format(PyExc_RuntimeError, "Calculated padded input size per channel: (%lld x %lld). Kernel size: "
                         "(%lld x %lld). Kernel size can't be greater than actual input size", (long long)padded[0],
                         (long long)padded[1], (long long)kern[0], (long long)kern[1]);
        return -1;
    }
    cc->s.N = in->sizes[0];
    cc->s.O = w->sizes[0];
    cc->s.groups = groups;
    cc->dt = (EmDType)in->dtype;
    if (w->dtype != in->dtype) {
        PyErr_Format(PyExc_RuntimeError, "Input type (%s) and weight type (%s) should be the same or input should be a "
                     "MKLDNN tensor and weight is a dense tensor", tensor_type(cc->dt), tensor_type((EmDType)w->dtype));
        return -1;
    }
    if (cc->dt == EM_BOOL) {
        not_implemented("slow_conv2d_cpu", cc->dt);
        return -1;
    }
    cc->ct = em_is_float(cc->dt) ? em_compute_dtype(cc->dt) : EM_INT64;
    return 0;
}

/* the output's (or grad_output's) shape: (N, O, [oh,] ow) */
static int out_shape(const ConvCall *cc, int64_t *shape) {
    shape[0] = cc->s.N, shape[1] = cc->s.O;
    if (cc->spatial == 2) shape[2] = cc->s.g.oh;
    shape[cc->spatial + 1] = cc->s.g.ow;
    return cc->spatial + 2;
}

static double conv_work(const ConvCall *cc) {
    const EmConvGeom *g = &cc->s.g;
    return (double)cc->s.N * (double)cc->s.O * (double)(g->C / cc->s.groups) * (double)g->kh * (double)g->kw *
           (double)g->oh * (double)g->ow;
}

PyObject *em_impl__convolution(EmCall *c) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 1), *bias = em_arg_tensor(c, 2);
    ConvCall cc;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (conv_setup(c, in, w, 3, &cc) < 0) return NULL;
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
    int64_t shape[4];
    int nd = out_shape(&cc, shape);
    EmTensor *x = NULL, *wc = NULL, *bc = NULL, *y = NULL;
    if (!(x = contiguous_as(in, cc.ct)) || !(wc = contiguous_as(w, cc.ct)) ||
        (bias && !(bc = contiguous_as(bias, cc.ct))))
        goto done;
    if (!(y = em_empty(nd, shape, cc.ct, em_cpu()))) goto done;
    if (y->numel) {
        PyThreadState *ts = conv_work(&cc) >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = em_conv_forward(cc.ct, &cc.s, em_data(x), em_data(wc), bc ? em_data(bc) : NULL, em_data(y));
        if (ts) PyEval_RestoreThread(ts);
        if (rc < 0) {
            PyErr_NoMemory();
            Py_CLEAR(y);
        }
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    return (PyObject *)finish(y, cc.dt);
}

PyObject *em_impl__convolution_backward(EmCall *c) {
    EmTensor *gy = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *w = em_arg_tensor(c, 2);
    ConvCall cc;
    int64_t mask[3];
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (exact_list(c, 7, "output_mask", 3, mask) < 0 || conv_setup(c, in, w, 3, &cc) < 0) return NULL;
    int64_t shape[4];
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
    int64_t zero = 0, O = cc.s.O;
    EmTensor *g = NULL, *x = NULL, *wc = NULL, *res[3] = {NULL, NULL, NULL};
    PyObject *tuple = NULL;
    if (!(g = contiguous_as(gy, cc.ct)) || !(x = contiguous_as(in, cc.ct)) || !(wc = contiguous_as(w, cc.ct)))
        goto done;
    const EmTensor *like[3] = {in, w, NULL};
    for (int k = 0; k < 3; k++) {
        if (!mask[k]) res[k] = em_empty(1, &zero, cc.ct, em_cpu());
        else if (k < 2) res[k] = em_empty(like[k]->ndim, like[k]->sizes, cc.ct, em_cpu());
        else res[k] = em_empty(1, &O, cc.ct, em_cpu());
        if (!res[k]) goto done;
    }
    {
        PyThreadState *ts = conv_work(&cc) >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = em_conv_backward(cc.ct, &cc.s, em_data(g), em_data(x), em_data(wc),
                                  mask[0] && res[0]->numel ? em_data(res[0]) : NULL,
                                  mask[1] && res[1]->numel ? em_data(res[1]) : NULL,
                                  mask[2] && res[2]->numel ? em_data(res[2]) : NULL);
        if (ts) PyEval_RestoreThread(ts);
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
