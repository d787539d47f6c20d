/* norm.c — layer_norm and rms_norm: the trailing `normalized_shape` dims of
 * each row are normalized in one fused pass per row (statistics in double,
 * two passes over the row for an accurate variance, then the affine write),
 * threaded over rows. Half types are computed in float32, as torch's CPU
 * kernels do, a row at a time (norm_rows_half). Complex input raises
 * NotImplementedError (torch's rms_norm is a composite that takes it).
 * Backward formulas: autograd/derivatives_nn.c.
 *
 * _native_layer_norm returns (y, mean, rstd) with mean/rstd shaped
 * input.shape[:axis] + (1,) * len(normalized_shape) (torch's layout) so the
 * formula can reuse them; _rms_norm returns (y, rstd).
 * _native_layer_norm_backward is layer_norm's first-order backward in one
 * pass per row (the formula uses it unless the gradient is itself to be
 * differentiated).
 *
 * GPU tensors run the backend's fused kernels (layer_norm,
 * layer_norm_backward), which read the data in its own dtype and keep the
 * statistics in float32 (float64 for float64): the same outputs, shapes and
 * dtypes as here. Without the kernels: EmNoCudaKernel, before allocating. */
#include "../ember.h"
#include "fused_gpu.h"
#include "device_slot.h"
#include "../cpu/reduce.h" /* EM_CLONES */
#include <math.h>

#ifdef _OPENMP
#include <omp.h>
#define OMP_ROWS _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define OMP_ROWS
#endif

/* One row: statistics over LANES independent accumulators of type A (so the
 * loops vectorize without reassociating sums; float32 rows accumulate in
 * float lanes as torch's kernel does), two passes for an accurate variance,
 * then y = (x - mean) * rstd * w + b; w/b may be NULL; rms: mean 0. */
#define LANES 16
#define NORM_ROW(NAME, T, A)                                                                        \
    EM_CLONES static void NAME(const T *x, T *y, const T *w, const T *b, T *mean_out, T *rstd_out,   \
                               int64_t n, double eps, bool rms) {                                   \
        A acc[LANES] = {0};                                                                         \
        double mean = 0, ss = 0;                                                                    \
        int64_t i = 0;                                                                              \
        if (!rms) {                                                                                 \
            for (; i + LANES <= n; i += LANES)                                                      \
                for (int j = 0; j < LANES; j++) acc[j] += (A)x[i + j];                              \
            for (; i < n; i++) mean += (double)x[i];                                                \
            for (int j = 0; j < LANES; j++) mean += acc[j], acc[j] = 0;                             \
            mean /= (double)n;                                                                      \
        }                                                                                           \
        for (i = 0; i + LANES <= n; i += LANES)                                                     \
            for (int j = 0; j < LANES; j++) {                                                       \
                A d = (A)x[i + j] - (A)mean;                                                        \
                acc[j] += d * d;                                                                    \
            }                                                                                       \
        for (; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);                     \
        for (int j = 0; j < LANES; j++) ss += acc[j];                                               \
        double rstd = 1.0 / sqrt(ss / (double)n + eps);                                             \
        if (mean_out) *mean_out = (T)mean;                                                          \
        *rstd_out = (T)rstd;                                                                        \
        const T m = (T)mean, s = (T)rstd;                                                           \
        if (w && b)                                                                                 \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) * s * w[i] + b[i];                            \
        else if (w)                                                                                 \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) * s * w[i];                                   \
        else if (b)                                                                                 \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) * s + b[i];                                   \
        else                                                                                        \
            for (i = 0; i < n; i++) y[i] = (x[i] - m) * s;                                          \
    }

/* every row, threaded over rows for big inputs */
#define NORM_ROWS(NAME, ROW, T)                                                                     \
    static void NAME(const void *xv, void *yv, const void *wv, const void *bv, void *mv, void *sv,   \
                     int64_t rows, int64_t n, double eps, bool rms) {                               \
        const T *x = xv, *w = wv, *b = bv;                                                          \
        T *y = yv, *mean_out = mv, *rstd_out = sv;                                                  \
        int nt = 1;                                                                                 \
        if (em_num_threads > 1 && rows > 1 && rows * n >= 2 * EM_GRAIN)                             \
            nt = em_num_threads < rows ? em_num_threads : (int)rows;                                \
        OMP_ROWS                                                                                    \
        for (int64_t r = 0; r < rows; r++)                                                          \
            ROW(x + r * n, y + r * n, w, b, mean_out ? mean_out + r : NULL, rstd_out + r, n, eps, rms); \
    }
NORM_ROW(norm_row_f32, float, float)
NORM_ROW(norm_row_f64, double, double)
NORM_ROWS(norm_rows_f32, norm_row_f32, float)
NORM_ROWS(norm_rows_f64, norm_row_f64, double)

/* Half types: each row widened into float32 scratch of its thread, run
 * through the float32 row and rounded back, so the results are the float32
 * kernel's without float32 copies of the whole input and output. w/b are
 * float32; the statistics float32. -1 when the scratch cannot be had. */
static int norm_rows_half(const void *xv, void *yv, bool bf, const void *wv, const void *bv, void *mv, void *sv,
                          int64_t rows, int64_t n, double eps, bool rms) {
    const uint16_t *x = xv;
    uint16_t *y = yv;
    const float *w = wv, *b = bv;
    float *mean_out = mv, *rstd_out = sv;
    int nt = 1;
    if (em_num_threads > 1 && rows > 1 && rows * n >= 2 * EM_GRAIN)
        nt = em_num_threads < rows ? em_num_threads : (int)rows;
    float *scratch = malloc((size_t)nt * 2 * (size_t)n * sizeof(float));
    if (!scratch) return -1;
    OMP_ROWS
    for (int64_t r = 0; r < rows; r++) {
#ifdef _OPENMP
        float *s = scratch + (size_t)omp_get_thread_num() * 2 * (size_t)n;
#else
        float *s = scratch;
#endif
        em_half_to_f32_run(x + r * n, s, n, bf);
        norm_row_f32(s, s + n, w, b, mean_out ? mean_out + r : NULL, rstd_out + r, n, eps, rms);
        em_f32_to_half_run(s + n, y + r * n, n, bf);
    }
    free(scratch);
    return 0;
}



/* The affine parameter (weight or bias) as a contiguous tensor of the compute
 * dtype, after checking its shape is normalized_shape. */
static EmTensor *affine_param(EmTensor *p, const char *what, int nn, const int64_t *ns, EmDType ct) {
    bool ok = p->ndim == nn;
    for (int i = 0; ok && i < nn; i++) ok = p->sizes[i] == ns[i];
    if (!ok) {
        char a[256], b[256];
        em_shape_str(p->ndim, p->sizes, a, sizeof a);
        em_shape_str(nn, ns, b, sizeof b);
        PyErr_Format(PyExc_RuntimeError, "Expected %s to be of same shape as normalized_shape, but got %s of "
                     "shape %s and normalized_shape = %s", what, what, a, b);
        return NULL;
    }
    EmTensor *t = em_to_dtype(p, ct, false);
    if (!t) return NULL;
    EmTensor *c = em_contiguous(t);
    Py_DECREF(t);
    return c;
}

/* Shared front: (input, normalized_shape, weight, [bias,] eps) -> outputs. */
static PyObject *normalize(EmCall *c, bool gpu, bool rms) {
    EmTensor *in = em_arg_tensor(c, 0), *w = em_arg_tensor(c, 2), *b = rms ? NULL : em_arg_tensor(c, 3);
    int64_t ns[EM_MAX_DIMS];
    int nn = 0;
    double eps;
    if (em_arg_intlist(c, 1, &nn, ns) < 0) return NULL;
    if (rms && em_arg_is_none(c, 3)) {
        eps = in->dtype == EM_FLOAT64 ? 2.220446049250313e-16
              : in->dtype == EM_FLOAT16 ? 0.0009765625 : in->dtype == EM_BFLOAT16 ? 0.0078125 : 1.1920928955078125e-07;
    } else if (em_arg_float(c, rms ? 3 : 4, &eps) < 0) {
        return NULL;
    }
    if (nn < 1) {
        PyErr_SetString(PyExc_RuntimeError, "Expected normalized_shape to be at least 1-dimensional, i.e., "
                                            "containing at least one element, but got normalized_shape = []");
        return NULL;
    }
    bool fits = in->ndim >= nn;
    for (int i = 0; fits && i < nn; i++) fits = in->sizes[in->ndim - nn + i] == ns[i];
    if (!fits) {
        char a[256], s[256];
        em_shape_str(nn, ns, a, sizeof a);
        em_shape_str(in->ndim, in->sizes, s, sizeof s);
        PyErr_Format(PyExc_RuntimeError, "Given normalized_shape=%s, expected input with shape [*, %s, but got "
                     "input of size%s", a, a + 1, s);
        return NULL;
    }
    if (!em_is_real_float(in->dtype)) { /* complex too: torch's kernels are real */
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'",
                     rms ? "rms_norm" : "LayerNormKernelImpl", em_dtype_name((EmDType)in->dtype));
        return NULL;
    }
    EmDType dt = (EmDType)in->dtype, ct = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    EmDevice dev = em_device(in);
    if (gpu && !em_cuda->layer_norm) return em_fused_no_kernel(rms ? "rms_norm" : "native_layer_norm");
    int axis = in->ndim - nn;
    int64_t rows = 1, n = 1, stat_shape[EM_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) {
        if (d < axis) rows *= in->sizes[d];
        else n *= in->sizes[d];
        stat_shape[d] = d < axis ? in->sizes[d] : 1;
    }
    EmTensor *x = NULL, *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
    PyObject *res = NULL;
    /* the GPU kernel reads and writes the data's own dtype, and so does the
     * CPU's half path (norm_rows_half) */
    if (!(x = em_to_dtype(in, dt, false)) || !(xc = em_contiguous(x))) goto done;
    if (w && !(wc = affine_param(w, "weight", nn, ns, ct))) goto done;
    if (b && !(bc = affine_param(b, "bias", nn, ns, ct))) goto done;
    if (!(y = em_empty(in->ndim, in->sizes, dt, dev))) goto done;
    if (!rms && !(mean = em_empty(in->ndim, stat_shape, ct, dev))) goto done;
    if (!(rstd = em_empty(in->ndim, stat_shape, ct, dev))) goto done;
    if (em_is_meta(in)) {
        /* Note [meta device]: the results' shapes were the work */
    } else if (gpu && rows && n) {
        if (em_cuda->layer_norm(dev.index, dt, em_data(y), mean ? em_data(mean) : NULL, em_data(rstd),
                                em_data(xc), wc ? em_data(wc) : NULL, bc ? em_data(bc) : NULL, rows, n, eps) < 0) {
            em_cuda_error(rms ? "rms_norm" : "native_layer_norm");
            goto done;
        }
    } else if (rows && n) {
        PyThreadState *ts = rows * n >= 65536 ? PyEval_SaveThread() : NULL;
        int rc = 0;
        if (dt == EM_FLOAT16 || dt == EM_BFLOAT16)
            rc = norm_rows_half(em_data(xc), em_data(y), dt == EM_BFLOAT16, wc ? em_data(wc) : NULL,
                                bc ? em_data(bc) : NULL, mean ? em_data(mean) : NULL, em_data(rstd), rows, n, eps, rms);
        else if (ct == EM_FLOAT32)
            norm_rows_f32(em_data(xc), em_data(y), wc ? em_data(wc) : NULL, bc ? em_data(bc) : NULL,
                          mean ? em_data(mean) : NULL, em_data(rstd), rows, n, eps, rms);
        else
            norm_rows_f64(em_data(xc), em_data(y), wc ? em_data(wc) : NULL, bc ? em_data(bc) : NULL,
                          mean ? em_data(mean) : NULL, em_data(rstd), rows, n, eps, rms);
        if (ts) PyEval_RestoreThread(ts);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    } else if (rows) { /* empty rows: the statistics of nothing */
        EmScalar nan = {'f', {.f = NAN}};
        if (em_fill_(rstd, nan) < 0 || (mean && em_fill_(mean, nan) < 0)) goto done;
    }
    res = rms ? PyTuple_Pack(2, y, rstd) : PyTuple_Pack(3, y, mean, rstd);
done:
    Py_XDECREF(x);
    Py_XDECREF(xc);
    Py_XDECREF(wc);
    Py_XDECREF(bc);
    Py_XDECREF(y);
    Py_XDECREF(mean);
    Py_XDECREF(rstd);
    return res;
}

static PyObject *layer_norm_op(EmCall *c, bool gpu) { return normalize(c, gpu, false); }
static PyObject *rms_norm_op(EmCall *c, bool gpu) { return normalize(c, gpu, true); }
EM_DEVICE_SLOTS(_native_layer_norm, layer_norm_op)
EM_DEVICE_SLOTS(_rms_norm, rms_norm_op)

/* ------------------------------------------------------------ backward */

/* One row of layer_norm's backward, x̂ = (x - mean)·rstd, gw = g·w:
 *   dx = rstd·(gw - mean(gw) - x̂·mean(gw·x̂)),
 * and the row's share of dw = Σ g·x̂ and db = Σ g added to dw/db. */
#define LN_BWD_ROW(NAME, T)                                                                         \
    EM_CLONES static void NAME(const T *g, const T *x, T mean, T rstd, const T *w, T *dx, T *dw,     \
                               T *db, int64_t n) {                                                  \
        T s1 = 0, s2 = 0;                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                           \
            T xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];                               \
            s1 += gw;                                                                               \
            s2 += gw * xh;                                                                          \
            dw[i] += g[i] * xh;                                                                     \
            db[i] += g[i];                                                                          \
        }                                                                                           \
        const T m1 = s1 / (T)n, m2 = s2 / (T)n;                                                     \
        for (int64_t i = 0; i < n; i++) {                                                           \
            T xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];                               \
            dx[i] = rstd * (gw - m1 - xh * m2);                                                     \
        }                                                                                           \
    }
LN_BWD_ROW(ln_bwd_row_f32, float)
LN_BWD_ROW(ln_bwd_row_f64, double)

/* Every row, threaded: each thread sums its rows' dw/db into its own slice
 * of `part` (nt x 2n, zeroed), which are then added up in order. */
#define LN_BWD_ROWS(NAME, ROW, T)                                                                   \
    static void NAME(const void *gv, const void *xv, const void *mv, const void *sv, const void *wv,  \
                     void *dxv, void *dwv, void *dbv, void *partv, int nt, int64_t rows, int64_t n) { \
        const T *g = gv, *x = xv, *mean = mv, *rstd = sv, *w = wv;                                  \
        T *dx = dxv, *dw = dwv, *db = dbv, *part = partv;                                           \
        OMP_ROWS                                                                                    \
        for (int t = 0; t < nt; t++) {                                                              \
            int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;                                   \
            T *pw = part + (size_t)t * 2 * n, *pb = pw + n;                                         \
            for (int64_t r = r0; r < r1; r++)                                                       \
                ROW(g + r * n, x + r * n, mean[r], rstd[r], w, dx + r * n, pw, pb, n);              \
        }                                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                           \
            T sw = 0, sb = 0;                                                                       \
            for (int t = 0; t < nt; t++) sw += part[(size_t)t * 2 * n + i], sb += part[(size_t)t * 2 * n + n + i]; \
            dw[i] = sw;                                                                             \
            db[i] = sb;                                                                             \
        }                                                                                           \
    }
LN_BWD_ROWS(ln_bwd_rows_f32, ln_bwd_row_f32, float)
LN_BWD_ROWS(ln_bwd_rows_f64, ln_bwd_row_f64, double)

/* a contiguous copy of t in dtype ct whose shape must be `want` */
static EmTensor *operand(EmTensor *t, const char *what, int nd, const int64_t *want, EmDType ct) {
    bool ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->sizes[i] == want[i];
    if (!ok) {
        char a[256], b[256];
        em_shape_str(t->ndim, t->sizes, a, sizeof a);
        em_shape_str(nd, want, b, sizeof b);
        PyErr_Format(PyExc_RuntimeError, "native_layer_norm_backward: expected %s of shape %s, but got %s", what,
                     b, a);
        return NULL;
    }
    EmTensor *c = em_to_dtype(t, ct, false), *r = c ? em_contiguous(c) : NULL;
    Py_XDECREF(c);
    return r;
}

/* (grad_out, input, normalized_shape, mean, rstd, weight?) -> (grad_input, grad_weight, grad_bias) */
static PyObject *native_layer_norm_backward_op(EmCall *c, bool gpu) {
    EmTensor *g = em_arg_tensor(c, 0), *in = em_arg_tensor(c, 1), *m = em_arg_tensor(c, 3),
             *s = em_arg_tensor(c, 4), *w = em_arg_tensor(c, 5);
    int64_t ns[EM_MAX_DIMS], stat[EM_MAX_DIMS];
    int nn = 0;
    if (em_arg_intlist(c, 2, &nn, ns) < 0) return NULL;
    bool fits = nn >= 1 && in->ndim >= nn;
    for (int i = 0; fits && i < nn; i++) fits = in->sizes[in->ndim - nn + i] == ns[i];
    if (!fits) {
        char a[256], b[256];
        em_shape_str(nn, ns, a, sizeof a);
        em_shape_str(in->ndim, in->sizes, b, sizeof b);
        PyErr_Format(PyExc_RuntimeError, "native_layer_norm_backward: normalized_shape %s does not end input's "
                     "shape %s", a, b);
        return NULL;
    }
    if (!em_is_float(in->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"LayerNormBackwardKernelImpl\" not implemented for '%s'",
                     em_dtype_name((EmDType)in->dtype));
        return NULL;
    }
    EmDType dt = (EmDType)in->dtype, ct = dt == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    EmDevice dev = em_device(in);
    if (gpu && !em_cuda->layer_norm_backward) return em_fused_no_kernel("native_layer_norm_backward");
    int axis = in->ndim - nn;
    int64_t rows = 1, n = 1;
    for (int d = 0; d < in->ndim; d++) {
        if (d < axis) rows *= in->sizes[d];
        else n *= in->sizes[d];
        stat[d] = d < axis ? in->sizes[d] : 1;
    }
    int nt = 1;
    if (em_num_threads > 1 && rows > 1 && rows * n >= 2 * EM_GRAIN)
        nt = em_num_threads < rows ? em_num_threads : (int)rows;
    EmTensor *gc = NULL, *xc = NULL, *mc = NULL, *sc = NULL, *wc = NULL, *dx = NULL, *dw = NULL, *db = NULL,
             *part = NULL, *dxo = NULL, *dwo = NULL, *dbo = NULL;
    PyObject *res = NULL;
    int64_t psize = (int64_t)nt * 2 * n;
    EmDType xt = gpu ? dt : ct; /* the GPU kernel reads g and x in their own dtype */
    if (!(gc = operand(g, "grad_out", in->ndim, in->sizes, xt)) || !(xc = operand(in, "input", in->ndim, in->sizes, xt)) ||
        !(mc = operand(m, "mean", in->ndim, stat, ct)) || !(sc = operand(s, "rstd", in->ndim, stat, ct)) ||
        (w && !(wc = operand(w, "weight", nn, ns, ct))))
        goto done;
    if (gpu) {
        if (!(dx = em_empty(in->ndim, in->sizes, dt, dev)) || !(dw = em_empty(nn, ns, ct, dev)) ||
            !(db = em_empty(nn, ns, ct, dev)))
            goto done;
        if (n > 0) {
            if (em_cuda->layer_norm_backward(dev.index, dt, em_data(dx), em_data(dw), em_data(db), em_data(gc),
                                             em_data(xc), em_data(mc), em_data(sc), wc ? em_data(wc) : NULL,
                                             rows, n) < 0) {
                em_cuda_error("native_layer_norm_backward");
                goto done;
            }
        }
        goto convert;
    }
    if (!(dx = em_empty(in->ndim, in->sizes, ct, dev)) || !(dw = em_empty(nn, ns, ct, dev)) ||
        !(db = em_empty(nn, ns, ct, dev)))
        goto done;
    if (em_is_meta(in)) goto convert; /* Note [meta device] */
    if (!(part = em_zeros(1, &psize, ct, em_cpu()))) goto done;
    {
        PyThreadState *ts = rows * n >= 65536 ? PyEval_SaveThread() : NULL;
        if (ct == EM_FLOAT32)
            ln_bwd_rows_f32(em_data(gc), em_data(xc), em_data(mc), em_data(sc), wc ? em_data(wc) : NULL,
                            em_data(dx), em_data(dw), em_data(db), em_data(part), nt, rows, n);
        else
            ln_bwd_rows_f64(em_data(gc), em_data(xc), em_data(mc), em_data(sc), wc ? em_data(wc) : NULL,
                            em_data(dx), em_data(dw), em_data(db), em_data(part), nt, rows, n);
        if (ts) PyEval_RestoreThread(ts);
    }
convert:;
    EmDType pdt = w ? (EmDType)w->dtype : dt;
    if ((dxo = em_to_dtype(dx, dt, false)) && (dwo = em_to_dtype(dw, pdt, false)) && (dbo = em_to_dtype(db, pdt, false)))
        res = PyTuple_Pack(3, dxo, dwo, dbo);
done:
    Py_XDECREF(gc);
    Py_XDECREF(xc);
    Py_XDECREF(mc);
    Py_XDECREF(sc);
    Py_XDECREF(wc);
    Py_XDECREF(dx);
    Py_XDECREF(dw);
    Py_XDECREF(db);
    Py_XDECREF(part);
    Py_XDECREF(dxo);
    Py_XDECREF(dwo);
    Py_XDECREF(dbo);
    return res;
}
EM_DEVICE_SLOTS(_native_layer_norm_backward, native_layer_norm_backward_op)
