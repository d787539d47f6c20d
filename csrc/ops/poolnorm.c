/* poolnorm.c — front-ends of the 2-d pools (max with indices, average,
 * adaptive average) and of batch / group norm, with the fused backward ops
 * their formulas call (autograd/derivatives_poolnorm.c). Kernels:
 * cpu/poolnorm.c (Note [pool planes], Note [norm runs]).
 *
 * Every front-end checks shapes and arguments, brings the input to a
 * contiguous tensor of the compute dtype (float32 for the half types and,
 * for the integer pools torch allows, float64), runs the kernel with the GIL
 * released for big inputs, and casts the result back. nn.functional turns
 * the 1-d pools into these on a height of one, as torch does. */
#include "../ember.h"
#include "../cpu/poolnorm.h"
#include "fused_gpu.h"
#include "device_slot.h"
#include <math.h>

#define BIG_WORK 65536 /* elements above which the GIL is released */


/* The compute dtype of a pool's input, or -1 with NotImplementedError.
 * ints: which integer dtypes torch pools (through float64, exact for them). */
enum { NO_INTS, INT64_ONLY, ALL_INTS };
static int pool_compute_dtype(EmTensor *in, const char *name, int ints) {
    EmDType dt = (EmDType)in->dtype;
    if (em_is_float(dt)) return em_compute_dtype(dt);
    if ((ints == ALL_INTS && em_is_int(dt)) || (ints == INT64_ONLY && dt == EM_INT64)) return EM_FLOAT64;
    PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", name, em_dtype_name(dt));
    return -1;
}

/* in as a contiguous tensor of dtype ct (new reference) */
static EmTensor *contiguous_as(EmTensor *in, EmDType ct) {
    EmTensor *x = em_to_dtype(in, ct, false);
    if (!x) return NULL;
    EmTensor *c = em_contiguous(x);
    Py_DECREF(x);
    return c;
}

/* result (stolen) cast to dtype dt: a new reference */
static EmTensor *cast_back(EmTensor *result, EmDType dt) {
    if (!result) return NULL;
    EmTensor *r = em_to_dtype(result, dt, false);
    Py_DECREF(result);
    return r;
}

/* A 3-d (C, H, W) or 4-d (N, C, H, W) pool input with non-empty H and W:
 * sets the plane count. */
static int pool_input(EmTensor *in, int64_t *planes, bool gpu, bool gpu_kernel) {
    if (gpu && !gpu_kernel) return em_fused_no_kernel("pooling"), -1; /* Note [CUDA nn kernels] */
    bool ok = in->ndim == 3 || in->ndim == 4;
    for (int d = 1; ok && d < in->ndim; d++) ok = in->sizes[d] > 0; /* only dim 0 may be empty */
    if (!ok) {
        char s[256];
        em_shape_str(in->ndim, in->sizes, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                     "for input, but got:%s", s);
        return -1;
    }
    *planes = in->sizes[in->ndim - 3] * (in->ndim == 4 ? in->sizes[0] : 1);
    return 0;
}

/* a (height, width) pair argument */
static int pair_arg(EmCall *c, int i, const char *what, int64_t lo, int64_t out[2]) {
    int n = 0;
    int64_t v[EM_MAX_DIMS];
    if (em_arg_intlist(c, i, &n, v) < 0) return -1;
    if (n == 1) v[1] = v[0];
    else if (n != 2) {
        PyErr_Format(PyExc_RuntimeError, "%s: %s must either be a single int, or a tuple of two ints",
                     c->def->sig.fname, what);
        return -1;
    }
    for (int k = 0; k < 2; k++)
        if (v[k] < lo || v[k] > ((int64_t)1 << 31)) {
            PyErr_Format(PyExc_RuntimeError, "%s: %s must be %s, but got %lld", c->def->sig.fname, what,
                         lo ? "greater than zero" : "non-negative", (long long)v[k]);
            return -1;
        }
    out[0] = v[0];
    out[1] = v[1];
    return 0;
}

/* torch's pooling output size: windows that start inside the input or the
 * left padding (ceil_mode may add one that overhangs the right edge) */
static int64_t pool_out_size(int64_t n, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t span = n + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;
    if (ceil_mode && out > 0 && (out - 1) * s >= n + p) out--;
    return out;
}

/* The geometry shared by max and average pooling (dilation 1 for average). */
typedef struct {
    int64_t k[2], s[2], p[2], d[2], in[2], out[2];
} PoolGeom;

static int pool_geometry(EmCall *c, int ndim, const int64_t *sizes, int ki, int si, int pi, int di, bool ceil_mode, PoolGeom *g) {
    if (pair_arg(c, ki, "kernel_size", 1, g->k) < 0 || pair_arg(c, pi, "padding", 0, g->p) < 0) return -1;
    if (di < 0) g->d[0] = g->d[1] = 1;
    else if (pair_arg(c, di, "dilation", 1, g->d) < 0) return -1;
    int n = 0;
    int64_t v[EM_MAX_DIMS];
    if (em_arg_intlist(c, si, &n, v) < 0) return -1;
    if (n == 0) g->s[0] = g->k[0], g->s[1] = g->k[1]; /* stride=[] means the kernel size, as in torch */
    else if (pair_arg(c, si, "stride", 1, g->s) < 0) return -1;
    for (int a = 0; a < 2; a++) {
        if (g->p[a] > ((g->k[a] - 1) * g->d[a] + 1) / 2) {
            PyErr_Format(PyExc_RuntimeError, "pad should be at most half of effective kernel size, but got "
                         "pad=%lld, kernel_size=%lld and dilation=%lld", (long long)g->p[a], (long long)g->k[a],
                         (long long)g->d[a]);
            return -1;
        }
        g->in[a] = sizes[ndim - 2 + a];
        g->out[a] = pool_out_size(g->in[a], g->k[a], g->s[a], g->p[a], g->d[a], ceil_mode);
    }
    if (g->out[0] < 1 || g->out[1] < 1) {
        PyErr_Format(PyExc_RuntimeError, "Given input size: (%lldx%lldx%lld). Calculated output size: "
                     "(%lldx%lldx%lld). Output size is too small", (long long)sizes[ndim - 3],
                     (long long)g->in[0], (long long)g->in[1], (long long)sizes[ndim - 3],
                     (long long)g->out[0], (long long)g->out[1]);
        return -1;
    }
    return 0;
}

/* sizes with the last two replaced by (a, b) */
static void with_plane(const EmTensor *t, int64_t a, int64_t b, int64_t *sizes) {
    memcpy(sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    sizes[t->ndim - 2] = a;
    sizes[t->ndim - 1] = b;
}

/* ------------------------------------------------------------------ max pool */

/* max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode) -> (out, indices) */
static PyObject *max_pool2d_with_indices_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *x = NULL, *y = NULL, *idx = NULL;
    PyObject *res = NULL;
    bool ceil_mode;
    int64_t planes, shape[4];
    PoolGeom g;
    int ct = pool_compute_dtype(in, "max_pool2d", ALL_INTS);
    if (ct < 0 || em_arg_bool(c, 5, &ceil_mode) < 0 ||
        pool_input(in, &planes, gpu, em_cuda && em_cuda->max_pool2d) < 0 ||
        pool_geometry(c, in->ndim, in->sizes, 1, 2, 3, 4, ceil_mode, &g) < 0)
        return NULL;
    with_plane(in, g.out[0], g.out[1], shape);
    if (!(x = contiguous_as(in, (EmDType)ct)) || !(y = em_empty(in->ndim, shape, (EmDType)ct, em_device(in))) ||
        !(idx = em_empty(in->ndim, shape, EM_INT64, em_device(in))))
        goto done;
    EmPool2d p = {planes, g.in[0], g.in[1], g.out[0], g.out[1], g.k[0], g.k[1], g.s[0], g.s[1],
                  g.p[0], g.p[1], g.d[0], g.d[1]};
    if (gpu) { /* the same loops on the device */
        EmCudaPool2d gp = {p.planes, p.H, p.W, p.OH, p.OW, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw};
        if (em_cuda->max_pool2d(em_device(in).index, ct, &gp, em_data(x), em_data(y), (int64_t *)em_data(idx)) < 0) {
            em_cuda_error("max_pool2d");
            goto done;
        }
    } else if (planes && !em_is_meta(in)) { /* Note [meta device]: no kernel */
        PyThreadState *ts = planes * g.in[0] * g.in[1] >= BIG_WORK ? PyEval_SaveThread() : NULL;
        em_cpu_max_pool2d(&p, (EmDType)ct, em_data(x), em_data(y), (int64_t *)em_data(idx));
        if (ts) PyEval_RestoreThread(ts);
    }
    y = cast_back(y, (EmDType)in->dtype);
    if (y) res = PyTuple_Pack(2, y, idx);
done:
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(idx);
    return res;
}
EM_DEVICE_SLOTS(_max_pool2d_with_indices, max_pool2d_with_indices_op)

/* The backward on the device: indices checked there, with the CPU's error. */
static PyObject *max_pool_backward_gpu(EmTensor *go, EmTensor *ind, int n, const int64_t *isz, int64_t planes) {
    if (!em_cuda->max_pool2d_backward) return em_fused_no_kernel("max_pool2d_with_indices_backward");
    EmDType ct = em_compute_dtype((EmDType)go->dtype);
    EmTensor *g = NULL, *ix = NULL, *gi = NULL, *work = NULL;
    int64_t two = 2, bad = 0, H = isz[n - 2], W = isz[n - 1];
    EM_TRY(g = contiguous_as(go, ct));
    EM_TRY(ix = em_contiguous(ind));
    EM_TRY(gi = em_empty(n, isz, ct, em_device(go)));
    EM_TRY(work = em_empty(1, &two, EM_INT64, em_device(go)));
    EmCudaPool2d p = {planes, H, W, go->sizes[n - 2], go->sizes[n - 1], 1, 1, 1, 1, 0, 0, 1, 1};
    int rc = em_cuda->max_pool2d_backward(em_device(go).index, ct, &p, em_data(g), (const int64_t *)em_data(ix),
                                          em_data(gi), (int64_t *)em_data(work), &bad);
    EM_TRY(rc >= 0 || em_cuda_error("max_pool2d backward") == 0);
    EM_CHECK(rc == 0, PyExc_RuntimeError,
             "max_pool2d_with_indices_backward: index %lld out of range for an input plane of %lld x %lld",
             (long long)bad, (long long)H, (long long)W);
    Py_DECREF(g);
    Py_DECREF(ix);
    Py_DECREF(work);
    return (PyObject *)cast_back(gi, (EmDType)go->dtype);
fail:
    Py_XDECREF(g);
    Py_XDECREF(ix);
    Py_XDECREF(gi);
    Py_XDECREF(work);
    return NULL;
}

/* max_pool2d_with_indices_backward(grad_output, indices, input_size): the
 * gradient scattered (summed) into the positions the indices name */
static PyObject *max_pool2d_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *ind = em_arg_tensor(c, 1), *g = NULL, *ix = NULL, *gi = NULL;
    int n = 0;
    int64_t isz[EM_MAX_DIMS];
    if (em_arg_intlist(c, 2, &n, isz) < 0) return NULL;
    bool ok = (n == 3 || n == 4) && go->ndim == n && ind->ndim == n && ind->dtype == EM_INT64 && em_is_float(go->dtype);
    for (int d = 0; ok && d < n; d++) ok = go->sizes[d] == ind->sizes[d] && (d >= n - 2 || go->sizes[d] == isz[d]);
    for (int d = 0; ok && d < n; d++) ok = isz[d] >= 0 && isz[d] <= INT32_MAX;
    if (!ok) {
        char a[256], b[256], s[256];
        em_shape_str(go->ndim, go->sizes, a, sizeof a);
        em_shape_str(ind->ndim, ind->sizes, b, sizeof b);
        em_shape_str(n, isz, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "max_pool2d_with_indices_backward: expected a floating grad_output and "
                     "int64 indices of one shape matching input_size %s in all but the last two dims, but got "
                     "grad_output %s (%s) and indices %s (%s)", s, a, em_dtype_name((EmDType)go->dtype), b,
                     em_dtype_name((EmDType)ind->dtype));
        return NULL;
    }
    EmDType ct = em_compute_dtype((EmDType)go->dtype);
    int64_t planes = 1, H = isz[n - 2], W = isz[n - 1];
    for (int d = 0; d < n - 2; d++) planes *= isz[d];
    if (gpu) return max_pool_backward_gpu(go, ind, n, isz, planes);
    if (em_is_meta(go)) return (PyObject *)em_empty(n, isz, (EmDType)go->dtype, em_meta()); /* Note [meta device] */
    if (!(g = contiguous_as(go, ct)) || !(ix = em_contiguous(ind)) || !(gi = em_zeros(n, isz, ct, em_cpu())))
        goto fail;
    const int64_t *iv = (const int64_t *)em_data(ix);
    int64_t count = planes * go->sizes[n - 2] * go->sizes[n - 1];
    for (int64_t i = 0; i < count; i++)
        EM_CHECK(iv[i] >= 0 && iv[i] < H * W, PyExc_RuntimeError,
                 "max_pool2d_with_indices_backward: index %lld out of range for an input plane of %lld x %lld",
                 (long long)iv[i], (long long)H, (long long)W);
    EmPool2d p = {planes, H, W, go->sizes[n - 2], go->sizes[n - 1], 1, 1, 1, 1, 0, 0, 1, 1};
    if (count) {
        PyThreadState *ts = count >= BIG_WORK ? PyEval_SaveThread() : NULL;
        em_cpu_max_pool2d_backward(&p, ct, em_data(g), iv, em_data(gi));
        if (ts) PyEval_RestoreThread(ts);
    }
    Py_DECREF(g);
    Py_DECREF(ix);
    return (PyObject *)cast_back(gi, (EmDType)go->dtype);
fail:
    Py_XDECREF(g);
    Py_XDECREF(ix);
    Py_XDECREF(gi);
    return NULL;
}
EM_DEVICE_SLOTS(_max_pool2d_backward, max_pool2d_backward_op)

/* ------------------------------------------------------------------ average pools */

/* The windows of one axis and their divisors. */
typedef struct {
    int64_t *h0, *h1, *w0, *w1;
    double *div;
} Windows;

static void windows_free(Windows *w) {
    PyMem_Free(w->h0);
    PyMem_Free(w->div);
}

static int windows_alloc(Windows *w, int64_t OH, int64_t OW) {
    w->h0 = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * OH + 2 * OW + 1));
    w->div = PyMem_Malloc(sizeof(double) * (size_t)(OH * OW + 1));
    if (!w->h0 || !w->div) {
        windows_free(w);
        PyErr_NoMemory();
        return -1;
    }
    w->h1 = w->h0 + OH;
    w->w0 = w->h1 + OH;
    w->w1 = w->w0 + OW;
    return 0;
}

/* avg_pool2d's windows: [o*s - p, o*s - p + k) capped at n + p (the padded
 * extent, whose size is the count_include_pad divisor), then clamped to the
 * input (whose size is the other divisor) */
static int avg_windows(const PoolGeom *g, bool count_include_pad, int64_t divisor_override, Windows *w) {
    int64_t OH = g->out[0], OW = g->out[1];
    if (windows_alloc(w, OH, OW) < 0) return -1;
    int64_t *lo[2] = {w->h0, w->w0}, *hi[2] = {w->h1, w->w1};
    for (int a = 0; a < 2; a++)
        for (int64_t o = 0; o < g->out[a]; o++) {
            int64_t s = o * g->s[a] - g->p[a], e = s + g->k[a];
            if (e > g->in[a] + g->p[a]) e = g->in[a] + g->p[a];
            lo[a][o] = s < 0 ? 0 : s;
            hi[a][o] = e > g->in[a] ? g->in[a] : e;
        }
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            double d;
            if (divisor_override) {
                d = (double)divisor_override;
            } else if (count_include_pad) {
                int64_t sh = oh * g->s[0] - g->p[0], sw = ow * g->s[1] - g->p[1];
                int64_t eh = sh + g->k[0] > g->in[0] + g->p[0] ? g->in[0] + g->p[0] : sh + g->k[0];
                int64_t ew = sw + g->k[1] > g->in[1] + g->p[1] ? g->in[1] + g->p[1] : sw + g->k[1];
                d = (double)((eh - sh) * (ew - sw));
            } else {
                d = (double)((w->h1[oh] - w->h0[oh]) * (w->w1[ow] - w->w0[ow]));
            }
            w->div[oh * OW + ow] = d;
        }
    return 0;
}

/* adaptive windows: output o of `out` covers [floor(o n / out), ceil((o + 1) n / out)) */
static int adaptive_windows(const int64_t in[2], const int64_t out[2], Windows *w) {
    if (windows_alloc(w, out[0], out[1]) < 0) return -1;
    int64_t *lo[2] = {w->h0, w->w0}, *hi[2] = {w->h1, w->w1};
    for (int a = 0; a < 2; a++)
        for (int64_t o = 0; o < out[a]; o++) {
            lo[a][o] = (o * in[a]) / out[a];
            hi[a][o] = ((o + 1) * in[a] + out[a] - 1) / out[a];
        }
    for (int64_t oh = 0; oh < out[0]; oh++)
        for (int64_t ow = 0; ow < out[1]; ow++)
            w->div[oh * out[1] + ow] = (double)((w->h1[oh] - w->h0[oh]) * (w->w1[ow] - w->w0[ow]));
    return 0;
}

/* Forward (g NULL) or backward of an average pool over windows w:
 * in -> [.., OH, OW], or grad [.., OH, OW] -> [.., H, W]. */
static PyObject *avg_run(EmTensor *src, EmDType ct, EmDType out_dt, int ndim, const int64_t *out_shape,
                         int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, Windows *w, bool backward,
                         bool gpu) {
    EmTensor *x = NULL, *y = NULL, *wt = NULL, *dv = NULL;
    if (gpu && !em_cuda->avg_pool2d) {
        windows_free(w);
        return em_fused_no_kernel("avg_pool2d");
    }
    if (em_is_meta(src)) { /* Note [meta device]: the result's shape only */
        y = em_empty(ndim, out_shape, out_dt, em_meta());
        goto done;
    }
    if (!(x = contiguous_as(src, ct))) goto done;
    if (gpu) { /* the windows go up, the device sums them */
        int dev = em_device(src).index;
        int64_t nw = 2 * OH + 2 * OW + 1, nd = OH * OW + 1;
        EmDevice d = em_device(src);
        if (!(y = em_empty(ndim, out_shape, ct, d)) || !(wt = em_empty(1, &nw, EM_INT64, d)) ||
            !(dv = em_empty(1, &nd, EM_FLOAT64, d)))
            goto gpu_fail;
        if (em_cuda->memcpy(em_data(wt), dev, w->h0, -1, sizeof(int64_t) * (size_t)(nw - 1), false) < 0 ||
            em_cuda->memcpy(em_data(dv), dev, w->div, -1, sizeof(double) * (size_t)(nd - 1), false) < 0 ||
            em_cuda->avg_pool2d(dev, ct, planes, H, W, OH, OW, (const int64_t *)em_data(wt),
                                (const double *)em_data(dv), em_data(x), em_data(y), backward) < 0) {
            em_cuda_error("avg_pool2d");
            goto gpu_fail;
        }
        y = cast_back(y, out_dt);
        goto done;
    gpu_fail:
        Py_CLEAR(y);
        goto done;
    }
    y = backward ? em_zeros(ndim, out_shape, ct, em_cpu()) : em_empty(ndim, out_shape, ct, em_cpu());
    if (!y) goto done;
    EmAvgPool p = {planes, H, W, OH, OW, w->h0, w->h1, w->w0, w->w1, w->div};
    if (planes && OH && OW) {
        PyThreadState *ts = planes * (H * W + OH * OW) >= BIG_WORK ? PyEval_SaveThread() : NULL;
        if (backward) em_cpu_avg_pool2d_backward(&p, ct, em_data(x), em_data(y));
        else em_cpu_avg_pool2d(&p, ct, em_data(x), em_data(y));
        if (ts) PyEval_RestoreThread(ts);
    }
    y = cast_back(y, out_dt);
done:
    Py_XDECREF(x);
    Py_XDECREF(wt);
    Py_XDECREF(dv);
    windows_free(w);
    return (PyObject *)y;
}

static int divisor_arg(EmCall *c, int i, int64_t *out) {
    *out = 0;
    if (em_arg_is_none(c, i)) return 0;
    if (em_arg_int(c, i, out) < 0) return -1;
    if (*out == 0) {
        PyErr_SetString(PyExc_RuntimeError, "divisor must be not zero");
        return -1;
    }
    return 0;
}

/* avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
static PyObject *avg_pool2d_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0);
    bool ceil_mode, cip;
    int64_t planes, div, shape[4];
    PoolGeom g;
    Windows w;
    int ct = pool_compute_dtype(in, "avg_pool2d", INT64_ONLY);
    if (ct < 0 || em_arg_bool(c, 4, &ceil_mode) < 0 || em_arg_bool(c, 5, &cip) < 0 || divisor_arg(c, 6, &div) < 0 ||
        pool_input(in, &planes, gpu, em_cuda && em_cuda->avg_pool2d) < 0 ||
        pool_geometry(c, in->ndim, in->sizes, 1, 2, 3, -1, ceil_mode, &g) < 0 ||
        avg_windows(&g, cip, div, &w) < 0)
        return NULL;
    with_plane(in, g.out[0], g.out[1], shape);
    return avg_run(in, (EmDType)ct, (EmDType)in->dtype, in->ndim, shape, planes, g.in[0], g.in[1], g.out[0], g.out[1],
                   &w, false, gpu);
}
EM_DEVICE_SLOTS(_avg_pool2d, avg_pool2d_op)

/* A grad_output [.., OH, OW] and an input_size [.., H, W] that agree on the
 * leading dims; sets planes. */
static int backward_shapes(EmCall *c, EmTensor *go, int *n, int64_t *isz, int64_t *planes) {
    if (em_arg_intlist(c, 1, n, isz) < 0) return -1;
    bool ok = (*n == 3 || *n == 4) && go->ndim == *n && em_is_float(go->dtype);
    for (int d = 0; ok && d < *n; d++)
        ok = isz[d] >= 0 && (d >= *n - 2 ? isz[d] <= INT32_MAX : go->sizes[d] == isz[d]);
    if (!ok) {
        char a[256], s[256];
        em_shape_str(go->ndim, go->sizes, a, sizeof a);
        em_shape_str(*n, isz, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "%s: grad_output of shape %s (%s) does not fit input_size %s",
                     c->def->sig.fname, a, em_dtype_name((EmDType)go->dtype), s);
        return -1;
    }
    *planes = 1;
    for (int d = 0; d < *n - 2; d++) *planes *= isz[d];
    return 0;
}

/* avg_pool2d_backward(grad_output, input_size, kernel_size, stride, padding, ceil_mode,
 * count_include_pad, divisor_override) */
static PyObject *avg_pool2d_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0);
    bool ceil_mode, cip;
    int n;
    int64_t planes, div, isz[EM_MAX_DIMS];
    PoolGeom g;
    Windows w;
    if (backward_shapes(c, go, &n, isz, &planes) < 0 || em_arg_bool(c, 5, &ceil_mode) < 0 ||
        em_arg_bool(c, 6, &cip) < 0 || divisor_arg(c, 7, &div) < 0)
        return NULL;
    if (pool_geometry(c, n, isz, 2, 3, 4, -1, ceil_mode, &g) < 0) return NULL; /* the forward's geometry */
    if (go->sizes[n - 2] != g.out[0] || go->sizes[n - 1] != g.out[1]) {
        PyErr_Format(PyExc_RuntimeError, "avg_pool2d_backward: expected grad_output of %lld x %lld positions for "
                     "this input_size, but got %lld x %lld", (long long)g.out[0], (long long)g.out[1],
                     (long long)go->sizes[n - 2], (long long)go->sizes[n - 1]);
        return NULL;
    }
    if (avg_windows(&g, cip, div, &w) < 0) return NULL;
    return avg_run(go, em_compute_dtype((EmDType)go->dtype), (EmDType)go->dtype, n, isz, planes, isz[n - 2],
                   isz[n - 1], g.out[0], g.out[1], &w, true, gpu);
}
EM_DEVICE_SLOTS(_avg_pool2d_backward, avg_pool2d_backward_op)

/* adaptive_avg_pool2d(input, output_size) */
static PyObject *adaptive_avg_pool2d_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0);
    int n = 0;
    int64_t os[EM_MAX_DIMS], shape[4], planes;
    Windows w;
    if (em_arg_intlist(c, 1, &n, os) < 0) return NULL;
    if (n == 1) os[1] = os[0];
    else if (n != 2) {
        PyErr_SetString(PyExc_RuntimeError, "adaptive_avg_pool2d: output_size must be 2");
        return NULL;
    }
    if (os[0] > INT32_MAX || os[1] > INT32_MAX) { /* keeps the window arithmetic in range */
        PyErr_Format(PyExc_RuntimeError, "adaptive_avg_pool2d: output_size {%lld, %lld} is too large",
                     (long long)os[0], (long long)os[1]);
        return NULL;
    }
    if (os[0] < 0 || os[1] < 0) {
        PyErr_Format(PyExc_RuntimeError, "adaptive_avg_pool2d: elements of output_size must be greater than or "
                     "equal to 0 but received {%lld, %lld}", (long long)os[0], (long long)os[1]);
        return NULL;
    }
    if (gpu && !em_cuda->avg_pool2d) return em_fused_no_kernel("adaptive_avg_pool2d");
    if (in->ndim != 3 && in->ndim != 4) {
        PyErr_Format(PyExc_RuntimeError, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %d", in->ndim);
        return NULL;
    }
    for (int d = 1; d < in->ndim; d++)
        if (in->sizes[d] == 0) {
            char s[256];
            em_shape_str(in->ndim, in->sizes, s, sizeof s);
            PyErr_Format(PyExc_RuntimeError, "adaptive_avg_pool2d(): Expected input to have non-zero size for "
                         "non-batch dimensions, but input has sizes %s with dimension %d being empty", s, d);
            return NULL;
        }
    int ct = pool_compute_dtype(in, "adaptive_avg_pool2d", NO_INTS);
    if (ct < 0) return NULL;
    planes = in->sizes[in->ndim - 3] * (in->ndim == 4 ? in->sizes[0] : 1);
    int64_t isz[2] = {in->sizes[in->ndim - 2], in->sizes[in->ndim - 1]};
    if (adaptive_windows(isz, os, &w) < 0) return NULL;
    with_plane(in, os[0], os[1], shape);
    return avg_run(in, (EmDType)ct, (EmDType)in->dtype, in->ndim, shape, planes, isz[0], isz[1], os[0], os[1], &w,
                   false, gpu);
}
EM_DEVICE_SLOTS(_adaptive_avg_pool2d, adaptive_avg_pool2d_op)

/* adaptive_avg_pool2d_backward(grad_output, input_size) */
static PyObject *adaptive_avg_pool2d_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0);
    int n;
    int64_t planes, isz[EM_MAX_DIMS];
    Windows w;
    if (backward_shapes(c, go, &n, isz, &planes) < 0) return NULL;
    int64_t in2[2] = {isz[n - 2], isz[n - 1]}, out2[2] = {go->sizes[n - 2], go->sizes[n - 1]};
    if (adaptive_windows(in2, out2, &w) < 0) return NULL;
    return avg_run(go, em_compute_dtype((EmDType)go->dtype), (EmDType)go->dtype, n, isz, planes, in2[0], in2[1],
                   out2[0], out2[1], &w, true, gpu);
}
EM_DEVICE_SLOTS(_adaptive_avg_pool2d_backward, adaptive_avg_pool2d_backward_op)

/* ------------------------------------------------------------------ batch / group norm */

/* Host <-> device copies of n doubles (dev: the GPU side; -1 both host). 0 / -1. */
static int copy_doubles(double *dst, int dst_dev, const double *src, int src_dev, int64_t n) {
    if (n <= 0) return 0;
    if (dst_dev < 0 && src_dev < 0) {
        memcpy(dst, src, sizeof(double) * (size_t)n);
        return 0;
    }
    if (em_cuda->memcpy(dst, dst_dev, src, src_dev, sizeof(double) * (size_t)n, false) < 0)
        return em_cuda_error("norm statistics copy");
    return 0;
}

/* t's n values as host doubles (t has n elements; it may live on a GPU) */
static int read_doubles(EmTensor *t, double *out, int64_t n) {
    EmTensor *d = contiguous_as(t, EM_FLOAT64);
    if (!d) return -1;
    /* not dispatch: a copy to the host from wherever t lives */
    int rc = copy_doubles(out, -1, (const double *)em_data(d), em_is_cpu(d) ? -1 : em_device(d).index, n);
    Py_DECREF(d);
    return rc;
}

/* A new tensor of `ndim` sizes on `dev` holding n host doubles, as dtype dt. */
static EmTensor *tensor_on(const double *v, int ndim, const int64_t *sizes, EmDType dt, EmDevice dev) {
    EmTensor *t = em_empty(ndim, sizes, EM_FLOAT64, dev);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= sizes[d];
    if (!t) return NULL;
    if (copy_doubles((double *)em_data(t), dev.type == EM_CPU ? -1 : dev.index, v, -1, n) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return cast_back(t, dt);
}
static EmTensor *tensor_of(const double *v, int ndim, const int64_t *sizes, EmDType dt) {
    return tensor_on(v, ndim, sizes, dt, em_cpu());
}

/* ---- Note [norm runs] on the input's device. The CPU kernels run with the
 * GIL released for big inputs; on a GPU (Note [CUDA nn kernels]) the
 * host coefficient arrays go up, the backend's run kernels run, and the
 * per-run sums come back, so the front-ends below combine runs on the host
 * for either device. x, g, y: contiguous tensors of the compute dtype. */
enum { RUNS_SUM, RUNS_SS, RUNS_DOT, RUNS_AFFINE, RUNS_AFFINE2 };

/* kind's inputs p0..p2 (host, R each: center, or a, b, c) and outputs o1, o2 (host, R). 0 / -1. */
static int runs(bool gpu, int kind, EmTensor *g, EmTensor *x, EmTensor *y, int64_t R, int64_t S, const double *p0,
                const double *p1, const double *p2, double *o1, double *o2) {
    EmDType ct = (EmDType)x->dtype;
    if (!gpu) {
        PyThreadState *ts = R * S >= BIG_WORK ? PyEval_SaveThread() : NULL;
        switch (kind) {
        case RUNS_SUM: em_cpu_runs_sum(ct, em_data(x), R, S, o1); break;
        case RUNS_SS: em_cpu_runs_centered_ss(ct, em_data(x), R, S, p0, o1); break;
        case RUNS_DOT: em_cpu_runs_dot(ct, em_data(g), em_data(x), R, S, p0, o1, o2); break;
        case RUNS_AFFINE: em_cpu_runs_affine(ct, em_data(x), em_data(y), R, S, p0, p1); break;
        default: em_cpu_runs_affine2(ct, em_data(g), em_data(x), em_data(y), R, S, p0, p1, p2); break;
        }
        if (ts) PyEval_RestoreThread(ts);
        return 0;
    }
    if (R == 0) return 0;
    int dev = em_device(x).index, rc = -1;
    int64_t n = 5 * R;
    EmTensor *work = em_empty(1, &n, EM_FLOAT64, em_device(x)); /* p0, p1, p2, o1, o2 */
    if (!work) return -1;
    double *w = (double *)em_data(work);
    const double *ps[3] = {p0, p1, p2};
    for (int i = 0; i < 3; i++)
        if (ps[i] && copy_doubles(w + i * R, dev, ps[i], -1, R) < 0) goto done;
    if (kind <= RUNS_DOT) {
        if (em_cuda->norm_runs_stats(dev, ct, kind == RUNS_DOT ? em_data(g) : NULL, em_data(x), R, S,
                                     kind == RUNS_SUM ? NULL : w, w + 3 * R, w + 4 * R) < 0) {
            em_cuda_error("norm runs");
            goto done;
        }
        if (copy_doubles(o1, -1, w + 3 * R, dev, R) < 0 || (o2 && copy_doubles(o2, -1, w + 4 * R, dev, R) < 0))
            goto done;
    } else {
        /* affine: y = p0 x + p1 is affine2's b x + c without g */
        bool two = kind == RUNS_AFFINE2;
        if (em_cuda->norm_runs_affine(dev, ct, em_data(y), two ? em_data(g) : NULL, em_data(x), R, S,
                                      two ? w : NULL, two ? w + R : w, two ? w + 2 * R : w + R) < 0) {
            em_cuda_error("norm runs affine");
            goto done;
        }
    }
    rc = 0;
done:
    Py_DECREF(work);
    return rc;
}

/* The (N, C, S) view of a norm's input; checks dims and dtype. A GPU input
 * runs natively when the backend has the run kernels (EmNoCudaKernel
 * otherwise: Note [CUDA fallback]). */
static int norm_input(bool gpu, EmTensor *in, const char *name, int64_t *N, int64_t *C, int64_t *S) {
    if (gpu ? !em_cuda->norm_runs_stats || !em_cuda->norm_runs_affine
            : !em_is_meta(in) && em_check_cpu(in, name) < 0) {
        if (gpu) PyErr_Format(EmNoCudaKernel, "\"%s\" has no CUDA kernel in this backend", name);
        return -1;
    }
    if (in->ndim < 2) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected 2D or more input (got %dD input)", name, in->ndim);
        return -1;
    }
    if (!em_is_float(in->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", name,
                     em_dtype_name((EmDType)in->dtype));
        return -1;
    }
    *N = in->sizes[0];
    *C = in->sizes[1];
    *S = 1;
    for (int d = 2; d < in->ndim; d++) *S *= in->sizes[d];
    return 0;
}

/* a per-channel vector of C elements (or all `fill` when t is NULL); out
 * NULL checks the count only (Note [meta device]: there is nothing to read) */
static int channel_vec(EmTensor *t, int64_t C, double fill, const char *what, double *out) {
    if (!out) {
        int64_t n = 1;
        for (int d = 0; t && d < t->ndim; d++) n *= t->sizes[d];
        if (t && n != C) {
            PyErr_Format(PyExc_RuntimeError, "%s should contain %lld elements not %lld", what, (long long)C,
                         (long long)n);
            return -1;
        }
        return 0;
    }
    if (!t) {
        for (int64_t c = 0; c < C; c++) out[c] = fill;
        return 0;
    }
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
    if (n != C) {
        PyErr_Format(PyExc_RuntimeError, "%s should contain %lld elements not %lld", what, (long long)C, (long long)n);
        return -1;
    }
    return read_doubles(t, out, C);
}

/* Note [meta device]: a norm's results on meta, (out of in's shape in dt,
 * two statistics of `shape` in st): the shapes the kernels would fill */
static PyObject *meta_norm_results(const EmTensor *in, EmDType dt, int nd, const int64_t *shape, EmDType st) {
    EmTensor *r[3] = {em_empty(in->ndim, in->sizes, dt, em_meta()), em_empty(nd, shape, st, em_meta()),
                      em_empty(nd, shape, st, em_meta())};
    PyObject *res = r[0] && r[1] && r[2] ? PyTuple_Pack(3, r[0], r[1], r[2]) : NULL;
    for (int i = 0; i < 3; i++) Py_XDECREF(r[i]);
    return res;
}

/* doubles for the coefficient arrays: `k` blocks of n each */
static double *doubles(int64_t k, int64_t n) {
    double *p = PyMem_Calloc((size_t)(k * n + 1), sizeof(double));
    if (!p) PyErr_NoMemory();
    return p;
}

/* running = (1 - momentum) running + momentum value, written into t in place */
static int update_running(EmTensor *t, const double *value, int64_t C, double momentum) {
    double *v = doubles(1, C);
    if (!v || read_doubles(t, v, C) < 0) {
        PyMem_Free(v);
        return -1;
    }
    for (int64_t c = 0; c < C; c++) v[c] = (1 - momentum) * v[c] + momentum * value[c];
    EmTensor *nv = tensor_of(v, t->ndim, t->sizes, EM_FLOAT64);
    PyMem_Free(v);
    if (!nv) return -1;
    int rc = em_copy_(t, (PyObject *)nv);
    Py_DECREF(nv);
    if (rc == 0) em_bump_version(t);
    return rc;
}

/* native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)
 *   -> (out, save_mean [C], save_invstd [C]): the batch's statistics when
 * training (the running ones move toward them, the variance unbiased), the
 * running ones otherwise */
static PyObject *native_batch_norm_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 1), *b = em_arg_tensor(c, 2);
    EmTensor *rm = em_arg_tensor(c, 3), *rv = em_arg_tensor(c, 4), *x = NULL, *y = NULL, *sm = NULL, *si = NULL;
    PyObject *res = NULL;
    bool training;
    double momentum, eps, *ch = NULL, *run = NULL;
    int64_t N, C, S;
    if (norm_input(gpu, in, "batch_norm", &N, &C, &S) < 0 || em_arg_bool(c, 5, &training) < 0 ||
        em_arg_float(c, 6, &momentum) < 0 || em_arg_float(c, 7, &eps) < 0)
        return NULL;
    if (!training && (!rm || !rv)) {
        PyErr_SetString(PyExc_RuntimeError, "running_mean and running_var must be defined in evaluation mode");
        return NULL;
    }
    int64_t R = N * C, M = N * S;
    EmDType dt = (EmDType)in->dtype, ct = em_compute_dtype(dt);
    if (em_is_meta(in)) { /* Note [meta device]: sizes checked, nothing read, no running statistic written */
        if (channel_vec(w, C, 1.0, "weight", NULL) < 0 || channel_vec(b, C, 0.0, "bias", NULL) < 0 ||
            channel_vec(rm, C, 0.0, "running_mean", NULL) < 0 || channel_vec(rv, C, 0.0, "running_var", NULL) < 0)
            return NULL;
        return meta_norm_results(in, dt, 1, &C, ct);
    }
    /* per channel: mean, invstd, weight, bias, scratch (running values) */
    if (!(ch = doubles(5, C)) || !(run = doubles(3, R))) goto done;
    double *mean = ch, *invstd = ch + C, *wv = ch + 2 * C, *bv = ch + 3 * C, *tmp = ch + 4 * C;
    double *ra = run, *rb = run + R, *rs = run + 2 * R;
    if (channel_vec(w, C, 1.0, "weight", wv) < 0 || channel_vec(b, C, 0.0, "bias", bv) < 0) goto done;
    if (rm && channel_vec(rm, C, 0.0, "running_mean", tmp) < 0) goto done;
    if (rv && channel_vec(rv, C, 0.0, "running_var", tmp) < 0) goto done;
    memset(tmp, 0, sizeof(double) * (size_t)C); /* (it held the checked running stats) */
    if (!(x = contiguous_as(in, ct)) || !(y = em_empty(in->ndim, in->sizes, ct, em_device(in)))) goto done;
    if (training) {
        if (runs(gpu, RUNS_SUM, NULL, x, NULL, R, S, NULL, NULL, NULL, rs, NULL) < 0) goto done;
        for (int64_t r = 0; r < R; r++) mean[r % C] += rs[r];
        for (int64_t k = 0; k < C; k++) mean[k] /= (double)M;
        for (int64_t r = 0; r < R; r++) ra[r] = mean[r % C];
        if (runs(gpu, RUNS_SS, NULL, x, NULL, R, S, ra, NULL, NULL, rs, NULL) < 0) goto done;
        for (int64_t r = 0; r < R; r++) tmp[r % C] += rs[r];
        for (int64_t k = 0; k < C; k++) tmp[k] /= (double)M, invstd[k] = 1.0 / sqrt(tmp[k] + eps);
    }
    if (training) {
        if (rm && update_running(rm, mean, C, momentum) < 0) goto done;
        for (int64_t k = 0; k < C; k++) tmp[k] *= (double)M / (double)(M - 1); /* unbiased */
        if (rv && update_running(rv, tmp, C, momentum) < 0) goto done;
    } else {
        if (read_doubles(rm, mean, C) < 0 || read_doubles(rv, invstd, C) < 0) goto done;
        for (int64_t k = 0; k < C; k++) invstd[k] = 1.0 / sqrt(invstd[k] + eps);
    }
    for (int64_t r = 0; r < R; r++) {
        int64_t k = r % C;
        ra[r] = invstd[k] * wv[k];
        rb[r] = bv[k] - mean[k] * ra[r];
    }
    if (runs(gpu, RUNS_AFFINE, NULL, x, y, R, S, ra, rb, NULL, NULL, NULL) < 0) goto done;
    int64_t cshape[1] = {C};
    y = cast_back(y, dt);
    if (y && (sm = tensor_on(mean, 1, cshape, ct, em_device(in))) &&
        (si = tensor_on(invstd, 1, cshape, ct, em_device(in))))
        res = PyTuple_Pack(3, y, sm, si);
done:
    PyMem_Free(ch);
    PyMem_Free(run);
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(sm);
    Py_XDECREF(si);
    return res;
}
EM_DEVICE_SLOTS(_native_batch_norm, native_batch_norm_op)

/* The gradient's tuple (gx, gw, gb): gx from per-run coefficients
 * gx = a g + b x + c, gw / gb per channel. */
static PyObject *norm_grads(bool gpu, EmTensor *g, EmTensor *x, EmTensor *in, int64_t R, int64_t S, const double *ra,
                            const double *rb, const double *rc, const double *gw, const double *gb, int64_t C) {
    EmDType dt = (EmDType)in->dtype, ct = em_compute_dtype(dt);
    EmTensor *gx = em_empty(in->ndim, in->sizes, ct, em_device(in)), *tw = NULL, *tb = NULL;
    PyObject *res = NULL;
    if (!gx) return NULL;
    if (runs(gpu, RUNS_AFFINE2, g, x, gx, R, S, ra, rb, rc, NULL, NULL) < 0) {
        Py_DECREF(gx);
        return NULL;
    }
    int64_t cshape[1] = {C};
    gx = cast_back(gx, dt);
    if (gx && (tw = tensor_on(gw, 1, cshape, dt, em_device(in))) && (tb = tensor_on(gb, 1, cshape, dt, em_device(in))))
        res = PyTuple_Pack(3, gx, tw, tb);
    Py_XDECREF(gx);
    Py_XDECREF(tw);
    Py_XDECREF(tb);
    return res;
}

/* grad_output and input of one shape, as contiguous compute-dtype tensors */
static int grad_and_input(EmTensor *go, EmTensor *in, const char *name, EmTensor **g, EmTensor **x) {
    bool same = go->ndim == in->ndim && em_is_float(go->dtype);
    for (int d = 0; same && d < in->ndim; d++) same = go->sizes[d] == in->sizes[d];
    if (!same) {
        char a[256], s[256];
        em_shape_str(go->ndim, go->sizes, a, sizeof a);
        em_shape_str(in->ndim, in->sizes, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "%s: expected grad_out of the input's shape %s, but got %s", name, s, a);
        return -1;
    }
    EmDType ct = em_compute_dtype((EmDType)in->dtype);
    if (!(*g = contiguous_as(go, ct))) return -1;
    if (!(*x = contiguous_as(in, ct))) {
        Py_CLEAR(*g);
        return -1;
    }
    return 0;
}

/* native_batch_norm_backward(grad_out, input, weight, save_mean, save_invstd, train) -> (gx, gw, gb):
 *   gw = sum(g xh), gb = sum(g) per channel (xh = (x - mean) invstd);
 *   gx = w invstd (g - mean(g) - xh mean(g xh))  when training, w invstd g otherwise */
static PyObject *native_batch_norm_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *w = em_arg_tensor(c, 2);
    EmTensor *smt = em_arg_tensor(c, 3), *sit = em_arg_tensor(c, 4), *g = NULL, *x = NULL;
    PyObject *res = NULL;
    bool train;
    double *ch = NULL, *run = NULL;
    int64_t N, C, S;
    if (norm_input(gpu, in, "batch_norm_backward", &N, &C, &S) < 0 || em_arg_bool(c, 5, &train) < 0) return NULL;
    int64_t R = N * C, M = N * S;
    if (em_is_meta(in)) { /* Note [meta device] */
        if (channel_vec(w, C, 1.0, "weight", NULL) < 0 || channel_vec(smt, C, 0, "save_mean", NULL) < 0 ||
            channel_vec(sit, C, 0, "save_invstd", NULL) < 0 ||
            grad_and_input(go, in, "batch_norm_backward", &g, &x) < 0)
            return NULL;
        Py_DECREF(g);
        Py_DECREF(x);
        return meta_norm_results(in, (EmDType)in->dtype, 1, &C, (EmDType)in->dtype);
    }
    if (!(ch = doubles(6, C)) || !(run = doubles(4, R))) goto done;
    double *mean = ch, *invstd = ch + C, *wv = ch + 2 * C, *sg = ch + 3 * C, *dot = ch + 4 * C, *gw = ch + 5 * C;
    double *ra = run, *rb = run + R, *rc = run + 2 * R, *rs = run + 3 * R;
    if (channel_vec(w, C, 1.0, "weight", wv) < 0 || channel_vec(smt, C, 0, "save_mean", mean) < 0 ||
        channel_vec(sit, C, 0, "save_invstd", invstd) < 0 || grad_and_input(go, in, "batch_norm_backward", &g, &x) < 0)
        goto done;
    for (int64_t r = 0; r < R; r++) rc[r] = mean[r % C];
    if (runs(gpu, RUNS_DOT, g, x, NULL, R, S, rc, NULL, NULL, rs, rb) < 0) goto done;
    for (int64_t r = 0; r < R; r++) sg[r % C] += rs[r], dot[r % C] += rb[r];
    for (int64_t r = 0; r < R; r++) {
        int64_t k = r % C;
        double a = wv[k] * invstd[k], q = train ? invstd[k] * invstd[k] * dot[k] / (double)M : 0;
        ra[r] = a;
        rb[r] = -a * q;
        rc[r] = train ? a * (q * mean[k] - sg[k] / (double)M) : 0;
    }
    for (int64_t k = 0; k < C; k++) gw[k] = dot[k] * invstd[k];
    res = norm_grads(gpu, g, x, in, R, S, ra, rb, rc, gw, sg, C);
done:
    PyMem_Free(ch);
    PyMem_Free(run);
    Py_XDECREF(g);
    Py_XDECREF(x);
    return res;
}
EM_DEVICE_SLOTS(_native_batch_norm_backward, native_batch_norm_backward_op)

/* the group count and the channels per group */
static int groups_of(EmCall *c, int i, EmTensor *in, int64_t C, int64_t *G) {
    if (em_arg_int(c, i, G) < 0) return -1;
    if (*G <= 0 || C % *G) {
        char s[256];
        em_shape_str(in->ndim, in->sizes, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "Expected number of channels in input to be divisible by num_groups, but "
                     "got input of shape %s and num_groups=%lld", s, (long long)*G);
        return -1;
    }
    return 0;
}

static int group_affine_vec(EmTensor *t, EmTensor *in, int64_t C, double fill, const char *what, double *out) {
    int64_t n = 1;
    for (int d = 0; t && d < t->ndim; d++) n *= t->sizes[d];
    if (t && (t->ndim != 1 || n != C)) {
        char a[256], s[256];
        em_shape_str(t->ndim, t->sizes, a, sizeof a);
        em_shape_str(in->ndim, in->sizes, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "Expected %s to be a vector of size equal to the number of channels in "
                     "input, but got %s of shape %s and input of shape %s", what, what, a, s);
        return -1;
    }
    return channel_vec(t, C, fill, what, out);
}

/* native_group_norm(input, weight, bias, group, eps) -> (out, mean [N, G], rstd [N, G]) */
static PyObject *native_group_norm_op(EmCall *c, bool gpu) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 1), *b = em_arg_tensor(c, 2);
    EmTensor *x = NULL, *y = NULL, *tm = NULL, *tr = NULL;
    PyObject *res = NULL;
    double eps, *ch = NULL, *run = NULL;
    int64_t N, C, S, G;
    if (norm_input(gpu, in, "GroupNormKernelImpl", &N, &C, &S) < 0 || groups_of(c, 3, in, C, &G) < 0 ||
        em_arg_float(c, 4, &eps) < 0)
        return NULL;
    int64_t R = N * C, D = C / G, NG = N * G;
    double cnt = (double)(D * S);
    EmDType dt = (EmDType)in->dtype, ct = em_compute_dtype(dt);
    if (em_is_meta(in)) { /* Note [meta device] */
        int64_t gshape[2] = {N, G};
        if (group_affine_vec(w, in, C, 1.0, "weight", NULL) < 0 || group_affine_vec(b, in, C, 0.0, "bias", NULL) < 0)
            return NULL;
        return meta_norm_results(in, dt, 2, gshape, ct);
    }
    if (!(ch = doubles(2, C)) || !(run = doubles(5, R > NG ? R : NG))) goto done;
    double *wv = ch, *bv = ch + C;
    double *ra = run, *rb = run + R, *rs = run + 2 * R, *mean = run + 3 * R, *rstd = run + 4 * R;
    if (group_affine_vec(w, in, C, 1.0, "weight", wv) < 0 || group_affine_vec(b, in, C, 0.0, "bias", bv) < 0) goto done;
    if (!(x = contiguous_as(in, ct)) || !(y = em_empty(in->ndim, in->sizes, ct, em_device(in)))) goto done;
    if (runs(gpu, RUNS_SUM, NULL, x, NULL, R, S, NULL, NULL, NULL, rs, NULL) < 0) goto done;
    for (int64_t r = 0; r < R; r++) mean[r / D] += rs[r]; /* run r = (n, c) is in group r / D */
    for (int64_t q = 0; q < NG; q++) mean[q] /= cnt;
    for (int64_t r = 0; r < R; r++) ra[r] = mean[r / D];
    if (runs(gpu, RUNS_SS, NULL, x, NULL, R, S, ra, NULL, NULL, rs, NULL) < 0) goto done;
    for (int64_t r = 0; r < R; r++) rstd[r / D] += rs[r];
    for (int64_t q = 0; q < NG; q++) rstd[q] = 1.0 / sqrt(rstd[q] / cnt + eps);
    for (int64_t r = 0; r < R; r++) {
        int64_t k = r % C, q = r / D;
        ra[r] = rstd[q] * wv[k];
        rb[r] = bv[k] - mean[q] * ra[r];
    }
    if (runs(gpu, RUNS_AFFINE, NULL, x, y, R, S, ra, rb, NULL, NULL, NULL) < 0) goto done;
    int64_t gshape[2] = {N, G};
    y = cast_back(y, dt);
    if (y && (tm = tensor_on(mean, 2, gshape, ct, em_device(in))) &&
        (tr = tensor_on(rstd, 2, gshape, ct, em_device(in))))
        res = PyTuple_Pack(3, y, tm, tr);
done:
    PyMem_Free(ch);
    PyMem_Free(run);
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(tm);
    Py_XDECREF(tr);
    return res;
}
EM_DEVICE_SLOTS(_native_group_norm, native_group_norm_op)

/* native_group_norm_backward(grad_out, input, mean, rstd, weight, group) -> (gx, gw, gb):
 * per group, with gw = g w and xh = (x - mean) rstd,
 *   gx = rstd (gw - mean(gw) - xh mean(gw xh)),
 * per channel dw = sum(g xh), db = sum(g) */
static PyObject *native_group_norm_backward_op(EmCall *c, bool gpu) {
    EmTensor *go = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *tm = em_arg_tensor(c, 2);
    EmTensor *tr = em_arg_tensor(c, 3), *w = em_arg_tensor(c, 4), *g = NULL, *x = NULL;
    PyObject *res = NULL;
    double *ch = NULL, *run = NULL;
    int64_t N, C, S, G;
    if (norm_input(gpu, in, "group_norm_backward", &N, &C, &S) < 0 || groups_of(c, 5, in, C, &G) < 0) return NULL;
    int64_t R = N * C, D = C / G, NG = N * G, big = R > NG ? R : NG;
    double cnt = (double)(D * S);
    if (em_is_meta(in)) { /* Note [meta device] */
        if (group_affine_vec(w, in, C, 1.0, "weight", NULL) < 0 || channel_vec(tm, NG, 0, "mean", NULL) < 0 ||
            channel_vec(tr, NG, 0, "rstd", NULL) < 0 || grad_and_input(go, in, "group_norm_backward", &g, &x) < 0)
            return NULL;
        Py_DECREF(g);
        Py_DECREF(x);
        return meta_norm_results(in, (EmDType)in->dtype, 1, &C, (EmDType)in->dtype);
    }
    if (!(ch = doubles(3, C)) || !(run = doubles(9, big))) goto done;
    double *wv = ch, *gw = ch + C, *gb = ch + 2 * C;
    double *ra = run, *rb = run + big, *rc = run + 2 * big, *sg = run + 3 * big, *sgc = run + 4 * big;
    double *mean = run + 5 * big, *rstd = run + 6 * big, *m1 = run + 7 * big, *m2 = run + 8 * big;
    if (group_affine_vec(w, in, C, 1.0, "weight", wv) < 0 || channel_vec(tm, NG, 0, "mean", mean) < 0 ||
        channel_vec(tr, NG, 0, "rstd", rstd) < 0 || grad_and_input(go, in, "group_norm_backward", &g, &x) < 0)
        goto done;
    for (int64_t r = 0; r < R; r++) rc[r] = mean[r / D];
    if (runs(gpu, RUNS_DOT, g, x, NULL, R, S, rc, NULL, NULL, sg, sgc) < 0) goto done;
    for (int64_t r = 0; r < R; r++) {
        int64_t k = r % C, q = r / D;
        gb[k] += sg[r];
        gw[k] += sgc[r] * rstd[q];
        m1[q] += wv[k] * sg[r] / cnt;
        m2[q] += wv[k] * sgc[r] * rstd[q] / cnt;
    }
    for (int64_t r = 0; r < R; r++) {
        int64_t k = r % C, q = r / D;
        ra[r] = rstd[q] * wv[k];
        rb[r] = -rstd[q] * rstd[q] * m2[q];
        rc[r] = rstd[q] * (rstd[q] * m2[q] * mean[q] - m1[q]);
    }
    res = norm_grads(gpu, g, x, in, R, S, ra, rb, rc, gw, gb, C);
done:
    PyMem_Free(ch);
    PyMem_Free(run);
    Py_XDECREF(g);
    Py_XDECREF(x);
    return res;
}
EM_DEVICE_SLOTS(_native_group_norm_backward, native_group_norm_backward_op)
