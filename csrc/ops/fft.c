/* fft.c — front-ends of torch's three FFT primitives (ops.def, "fft" block);
 * ember.fft (python/ember/fft/) writes every transform with them:
 *
 *   _fft_c2c(x, dim, normalization, forward)   complex -> complex
 *   _fft_r2c(x, dim, normalization, onesided)  real -> complex, the last of
 *       `dim` transformed first (keeping n // 2 + 1 outputs when onesided)
 *   _fft_c2r(x, dim, normalization, n)         a half spectrum -> real of
 *       length n along the last of `dim`, the others transformed first
 *
 * normalization: 0 none, 1 by 1/sqrt(N), 2 by 1/N, N the product of the
 * transformed lengths (torch's fft_norm_mode). Each dim is a batch of 1-D
 * transforms of its lines (cpu/fft.c), run in parallel across the lines. */
#include "../ember.h"
#include "../cpu/fft.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------ plans */

/* The plans of recent lengths, made and looked up with the GIL held;
 * threads only read them. */
#define PLAN_CACHE 16
static EmFftPlan *cache[PLAN_CACHE];
static int cache_next;

static EmFftPlan *plan_for(int64_t n) {
    for (int i = 0; i < PLAN_CACHE; i++)
        if (cache[i] && em_fft_plan_length(cache[i]) == n) return cache[i];
    EmFftPlan *p = em_fft_plan_new(n);
    if (!p) {
        PyErr_Format(PyExc_MemoryError, "fft: out of memory planning a transform of length %lld", (long long)n);
        return NULL;
    }
    em_fft_plan_free(cache[cache_next]);
    cache[cache_next] = p;
    cache_next = (cache_next + 1) % PLAN_CACHE;
    return p;
}

/* ------------------------------------------------------------ lines */

/* The 1-D lines of a contiguous tensor along dim d: line j starts at
 * (j / inner) * n * inner + j % inner and steps by inner (in elements). */
typedef struct {
    int64_t n, inner, lines;
} Lines;

static Lines lines_of(const EmTensor *t, int d) {
    Lines l = {t->sizes[d], 1, 1};
    for (int k = d + 1; k < t->ndim; k++) l.inner *= t->sizes[k];
    l.lines = l.n ? t->numel / l.n : 0;
    return l;
}

static inline int64_t line_start(const Lines *l, int64_t j) { return (j / l->inner) * l->n * l->inner + j % l->inner; }

typedef enum { C2C, R2C, C2R } Kind;

/* One transform along a dim: in and out are contiguous; for C2C they are
 * the same tensor (each line is gathered, transformed and written back).
 * R2C reads real lines of length n and writes the first `keep` outputs;
 * C2R reads n / 2 + 1 complex inputs and writes n real outputs. */
typedef struct {
    Kind kind;
    const EmFftPlan *plan;
    bool dbl;
    int sign;
    Lines in, out;
    const char *src;
    char *dst;
    int64_t keep;
    size_t work;
    const EmStop *stop;
} Pass;

static void run_line(const Pass *p, int64_t j, double *buf) {
    const int64_t n = em_fft_plan_length(p->plan);
    const int64_t si = line_start(&p->in, j), so = line_start(&p->out, j);
    const int64_t ii = p->in.inner, io = p->out.inner;
    /* buf: the line in (n complex), the line out (n complex), the plan's scratch */
    if (p->dbl) {
        double *a = buf, *b = buf + 2 * n;
        const double *x = (const double *)p->src;
        double *y = (double *)p->dst;
        if (p->kind == R2C) {
            for (int64_t k = 0; k < n; k++) a[2 * k] = x[si + k * ii], a[2 * k + 1] = 0;
        } else if (p->kind == C2R) {
            int64_t h = n / 2 + 1;
            for (int64_t k = 0; k < h; k++) a[2 * k] = x[2 * (si + k * ii)], a[2 * k + 1] = x[2 * (si + k * ii) + 1];
            for (int64_t k = h; k < n; k++) a[2 * k] = a[2 * (n - k)], a[2 * k + 1] = -a[2 * (n - k) + 1];
        } else {
            for (int64_t k = 0; k < n; k++) a[2 * k] = x[2 * (si + k * ii)], a[2 * k + 1] = x[2 * (si + k * ii) + 1];
        }
        em_fft_c2c_f64(p->plan, a, b, p->sign, b + 2 * n);
        if (p->kind == C2R)
            for (int64_t k = 0; k < n; k++) y[so + k * io] = b[2 * k];
        else
            for (int64_t k = 0; k < p->keep; k++) y[2 * (so + k * io)] = b[2 * k], y[2 * (so + k * io) + 1] = b[2 * k + 1];
    } else {
        float *a = (float *)buf, *b = a + 2 * n;
        const float *x = (const float *)p->src;
        float *y = (float *)p->dst;
        if (p->kind == R2C) {
            for (int64_t k = 0; k < n; k++) a[2 * k] = x[si + k * ii], a[2 * k + 1] = 0;
        } else if (p->kind == C2R) {
            int64_t h = n / 2 + 1;
            for (int64_t k = 0; k < h; k++) a[2 * k] = x[2 * (si + k * ii)], a[2 * k + 1] = x[2 * (si + k * ii) + 1];
            for (int64_t k = h; k < n; k++) a[2 * k] = a[2 * (n - k)], a[2 * k + 1] = -a[2 * (n - k) + 1];
        } else {
            for (int64_t k = 0; k < n; k++) a[2 * k] = x[2 * (si + k * ii)], a[2 * k + 1] = x[2 * (si + k * ii) + 1];
        }
        /* the scratch after the two lines, 16-byte aligned */
        char *w = (char *)(b + 2 * n);
        w += (16 - ((uintptr_t)w & 15)) & 15;
        em_fft_c2c_f32(p->plan, a, b, p->sign, w);
        if (p->kind == C2R)
            for (int64_t k = 0; k < n; k++) y[so + k * io] = b[2 * k];
        else
            for (int64_t k = 0; k < p->keep; k++) y[2 * (so + k * io)] = b[2 * k], y[2 * (so + k * io) + 1] = b[2 * k + 1];
    }
}

static int run_pass(Pass *p) {
    const int64_t n = em_fft_plan_length(p->plan), lines = p->in.lines;
    if (lines == 0 || n == 0) return 0;
    const size_t per = (size_t)(4 * n) * (p->dbl ? sizeof(double) : sizeof(float)) + 16 + p->work;
    double work = (double)lines * (double)n * (log2((double)n) + 1);
    int nt = em_threads_for(lines, work);
    char *bufs = em_alloc_cpu(per * (size_t)nt + 16);
    if (!bufs) {
        PyErr_Format(PyExc_MemoryError, "fft: out of memory for %d line buffers of %zu bytes", nt, per);
        return -1;
    }
    EmStop stop = em_stop_arm_for(work);
    p->stop = &stop;
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t j = 0; j < lines; j++) {
        if (em_stop_now(p->stop)) continue;
#ifdef _OPENMP
        int t = omp_get_thread_num();
#else
        int t = 0;
#endif
        char *b = bufs + (size_t)t * per;
        b += (16 - ((uintptr_t)b & 15)) & 15;
        run_line(p, j, (double *)b);
    }
    Py_END_ALLOW_THREADS
    em_free_cpu(bufs, per * (size_t)nt + 16);
    return em_stop_check(&stop);
}

static int pass_setup(Pass *p, Kind kind, int64_t n, bool dbl, int sign) {
    p->kind = kind;
    p->dbl = dbl;
    p->sign = sign;
    if (!(p->plan = plan_for(n))) return -1;
    p->work = em_fft_work_bytes(p->plan);
    return 0;
}

/* c2c along d of the contiguous complex y, in place */
static int c2c_along(EmTensor *y, int d, int sign) {
    Pass p;
    memset(&p, 0, sizeof p);
    if (y->sizes[d] == 0) return 0;
    if (pass_setup(&p, C2C, y->sizes[d], y->dtype == EM_COMPLEX128, sign) < 0) return -1;
    p.in = p.out = lines_of(y, d);
    p.src = em_data(y);
    p.dst = em_data(y);
    p.keep = y->sizes[d];
    return run_pass(&p);
}

/* ------------------------------------------------------------ arguments */

static int read_dims(EmCall *c, int i, const EmTensor *x, int *nd, int *dims) {
    int64_t v[EM_MAX_DIMS];
    if (em_arg_intlist(c, i, nd, v) < 0) return -1;
    uint64_t seen = 0;
    for (int k = 0; k < *nd; k++) {
        int64_t d = v[k] < 0 ? v[k] + x->ndim : v[k];
        EM_CHECK(d >= 0 && d < x->ndim, PyExc_IndexError,
                 "Dimension out of range (expected to be in range of [%d, %d], but got %lld)", -x->ndim,
                 x->ndim - 1, (long long)v[k]);
        EM_CHECK(!(seen >> d & 1), PyExc_RuntimeError, "FFT dims must be unique");
        seen |= 1ull << d;
        dims[k] = (int)d;
        EM_CHECK(x->sizes[d] >= 1, PyExc_RuntimeError, "Invalid number of data points (%lld) specified",
                 (long long)x->sizes[d]);
    }
    return 0;
fail:
    return -1;
}

static int read_norm(EmCall *c, int i, int64_t *norm) {
    if (em_arg_int(c, i, norm) < 0) return -1;
    EM_CHECK(*norm >= 0 && *norm <= 2, PyExc_ValueError, "Invalid normalization mode: %lld", (long long)*norm);
    return 0;
fail:
    return -1;
}

/* scale the contiguous y in place by the normalization of the transformed lengths */
static void normalize(EmTensor *y, int64_t norm, double count) {
    if (norm == 0 || count <= 0) return;
    double f = norm == 1 ? 1.0 / sqrt(count) : 1.0 / count;
    int64_t m = y->numel * (em_is_complex(y->dtype) ? 2 : 1);
    if (em_complex_part((EmDType)y->dtype) == EM_FLOAT64) {
        double *v = (double *)em_data(y);
        for (int64_t i = 0; i < m; i++) v[i] *= f;
    } else {
        float *v = (float *)em_data(y);
        for (int64_t i = 0; i < m; i++) v[i] = (float)(v[i] * f);
    }
}

static EmTensor *meta_result(int ndim, const int64_t *sizes, EmDType dt, EmDevice dev) {
    return em_empty(ndim, sizes, dt, dev);
}

static int check_input(const EmTensor *x, bool complex_in, const char *op) {
    if (complex_in)
        EM_CHECK(em_is_complex(x->dtype), PyExc_RuntimeError, "%s expects a complex input tensor, but got %s", op,
                 em_dtype_name(x->dtype));
    else
        EM_CHECK(x->dtype == EM_FLOAT32 || x->dtype == EM_FLOAT64, PyExc_RuntimeError,
                 "%s expects a float or double input tensor, but got %s", op, em_dtype_name(x->dtype));
    return 0;
fail:
    return -1;
}

/* ------------------------------------------------------------ front-ends */

PyObject *em_impl__fft_c2c(EmCall *c) {
    EmTensor *x = em_arg_tensor(c, 0), *y = NULL;
    int nd, dims[EM_MAX_DIMS];
    int64_t norm;
    bool forward;
    EM_TRY(read_dims(c, 1, x, &nd, dims) == 0 && read_norm(c, 2, &norm) == 0 && em_arg_bool(c, 3, &forward) == 0);
    EM_TRY(check_input(x, true, "_fft_c2c") == 0);
    if (em_is_meta(x)) return (PyObject *)meta_result(x->ndim, x->sizes, (EmDType)x->dtype, em_device(x));
    EM_TRY(em_check_cpu(x, "_fft_c2c") == 0);
    EM_TRY(y = em_empty(x->ndim, x->sizes, (EmDType)x->dtype, em_cpu()));
    EM_TRY(em_copy_(y, (PyObject *)x) == 0);
    double count = 1;
    for (int k = 0; k < nd; k++) {
        EM_TRY(c2c_along(y, dims[k], forward ? -1 : 1) == 0);
        count *= (double)x->sizes[dims[k]];
    }
    normalize(y, norm, count);
    return (PyObject *)y;
fail:
    Py_XDECREF(y);
    return NULL;
}

PyObject *em_impl__fft_r2c(EmCall *c) {
    EmTensor *x = em_arg_tensor(c, 0), *xc = NULL, *y = NULL;
    int nd, dims[EM_MAX_DIMS];
    int64_t norm;
    bool onesided;
    EM_TRY(read_dims(c, 1, x, &nd, dims) == 0 && read_norm(c, 2, &norm) == 0 && em_arg_bool(c, 3, &onesided) == 0);
    EM_TRY(check_input(x, false, "_fft_r2c") == 0);
    EM_CHECK(nd > 0, PyExc_RuntimeError, "_fft_r2c needs at least one dim to transform");
    const int last = dims[nd - 1];
    int64_t shape[EM_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->sizes[d];
    const int64_t n = x->sizes[last];
    shape[last] = onesided ? n / 2 + 1 : n;
    EmDType ct = em_complex_of((EmDType)x->dtype);
    if (em_is_meta(x)) return (PyObject *)meta_result(x->ndim, shape, ct, em_device(x));
    EM_TRY(em_check_cpu(x, "_fft_r2c") == 0);
    EM_TRY(xc = em_contiguous(x));
    EM_TRY(y = em_empty(x->ndim, shape, ct, em_cpu()));
    if (n > 0 && y->numel > 0) {
        Pass p;
        memset(&p, 0, sizeof p);
        EM_TRY(pass_setup(&p, R2C, n, x->dtype == EM_FLOAT64, -1) == 0);
        p.in = lines_of(xc, last);
        p.out = lines_of(y, last);
        p.src = em_data(xc);
        p.dst = em_data(y);
        p.keep = shape[last];
        EM_TRY(run_pass(&p) == 0);
    }
    double count = (double)n;
    for (int k = 0; k + 1 < nd; k++) {
        EM_TRY(c2c_along(y, dims[k], -1) == 0);
        count *= (double)x->sizes[dims[k]];
    }
    normalize(y, norm, count);
    Py_DECREF(xc);
    return (PyObject *)y;
fail:
    Py_XDECREF(xc);
    Py_XDECREF(y);
    return NULL;
}

PyObject *em_impl__fft_c2r(EmCall *c) {
    EmTensor *x = em_arg_tensor(c, 0), *t = NULL, *y = NULL;
    int nd, dims[EM_MAX_DIMS];
    int64_t norm, n;
    EM_TRY(read_dims(c, 1, x, &nd, dims) == 0 && read_norm(c, 2, &norm) == 0 && em_arg_int(c, 3, &n) == 0);
    EM_TRY(check_input(x, true, "_fft_c2r") == 0);
    EM_CHECK(nd > 0, PyExc_RuntimeError, "_fft_c2r needs at least one dim to transform");
    const int last = dims[nd - 1];
    EM_CHECK(n >= 1, PyExc_RuntimeError, "Invalid number of data points (%lld) specified", (long long)n);
    EM_CHECK(x->sizes[last] == n / 2 + 1, PyExc_RuntimeError,
             "_fft_c2r: expected %lld inputs along dim %d for %lld outputs, got %lld", (long long)(n / 2 + 1), last,
             (long long)n, (long long)x->sizes[last]);
    int64_t shape[EM_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->sizes[d];
    shape[last] = n;
    EmDType rt = em_complex_part((EmDType)x->dtype);
    if (em_is_meta(x)) return (PyObject *)meta_result(x->ndim, shape, rt, em_device(x));
    EM_TRY(em_check_cpu(x, "_fft_c2r") == 0);
    EM_TRY(t = em_empty(x->ndim, x->sizes, (EmDType)x->dtype, em_cpu()));
    EM_TRY(em_copy_(t, (PyObject *)x) == 0);
    double count = (double)n;
    for (int k = 0; k + 1 < nd; k++) {
        EM_TRY(c2c_along(t, dims[k], 1) == 0);
        count *= (double)x->sizes[dims[k]];
    }
    EM_TRY(y = em_empty(x->ndim, shape, rt, em_cpu()));
    if (y->numel > 0) {
        Pass p;
        memset(&p, 0, sizeof p);
        EM_TRY(pass_setup(&p, C2R, n, x->dtype == EM_COMPLEX128, 1) == 0);
        p.in = lines_of(t, last);
        p.out = lines_of(y, last);
        p.src = em_data(t);
        p.dst = em_data(y);
        EM_TRY(run_pass(&p) == 0);
    }
    normalize(y, norm, count);
    Py_DECREF(t);
    return (PyObject *)y;
fail:
    Py_XDECREF(t);
    Py_XDECREF(y);
    return NULL;
}
