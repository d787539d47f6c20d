/* cuda_fake.c — Note [fake CUDA]: a test double of the CUDA backend whose
 * two "devices" are ordinary host memory, built as its own extension,
 * ember._cuda_fake (never part of ember._C). Tests switch it on with
 * `_C._cuda_use_backend("ember._cuda_fake")` (tests/cuda_common.py) to
 * exercise everything above the kernels on a machine without a GPU: device
 * bookkeeping, copies between devices, the CPU fallback of Note [CUDA
 * fallback], autograd across devices, modules and optimizers on 'cuda',
 * memory statistics, streams and events. Its kernels are the CPU ones, so
 * it says nothing about ember._cuda's own kernels: those are checked on a
 * real GPU.
 *
 * It reaches the core the two ways any backend does: it hands ember._C its
 * EmCudaBackend through the capsule `ember._cuda_fake._backend`, exactly as
 * ember._cuda does, and it borrows the core's CPU kernels, casts and host
 * tensors through Note [host API] (csrc/host_api.h): ember._C exports no C
 * symbol to link against, and a second copy of the CPU kernels compiled in
 * here would double half of the C build for a test double. The kernel table
 * a launch names is found by that name (Note [kernel registry]), so the
 * backend ABI carries nothing for the double.
 *
 * Memory of a fake device is filled with a garbage pattern on allocation
 * and on free, so a path that reads device memory before writing it, or
 * after freeing it, shows up as wrong numbers. And the pointers it hands
 * out are tagged with a high bit that makes them non-canonical addresses:
 * host code that dereferences "device" memory directly (which would crash
 * on a real GPU) crashes here too, instead of silently working. The fake's
 * own entry points remove the tag before touching the bytes. */

/* ember.h's inline helpers (em_itemsize, em_data) read the core's dtype
 * table, which is not linkable from here: they read the one the host API
 * points to instead (set at import, before any entry runs). */
#define em_dtype_info (*em_fake_dtype_info)
#include "../host_api.h"
#undef em_dtype_info
#include "../cuda/philox.h"
#include "../cuda/sort_logic.h"
#include <math.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

const EmDTypeInfo (*em_fake_dtype_info)[EM_NUM_DTYPES];
static const EmHostApi *host; /* Note [host API] */

#define FAKE_DEVICES 2
#define FAKE_TAG ((uintptr_t)1 << 62)
static void *untag(const void *p) { return (void *)((uintptr_t)p - FAKE_TAG); }
static void *dev_ptr(const void *p, int dev) { return dev >= 0 ? untag(p) : (void *)p; }

static int current = 0;
static EmCudaMemoryStats stats[FAKE_DEVICES];
static char error_buf[256];

static const char *fake_last_error(void) { return error_buf; }
static int fake_fail(const char *msg) {
    snprintf(error_buf, sizeof error_buf, "%s", msg);
    return -1;
}

static int fake_device_count(void) { return FAKE_DEVICES; }
static int fake_current_device(void) { return current; }
static int fake_set_device(int dev) {
    if (dev < 0 || dev >= FAKE_DEVICES) return fake_fail("invalid device ordinal");
    current = dev;
    return 0;
}
static int fake_device_props(int dev, EmCudaDeviceProps *p) {
    snprintf(p->name, sizeof p->name, "ember fake CUDA device %d", dev);
    p->total_memory = (int64_t)1 << 30;
    p->major = 9;
    p->minor = 0;
    p->multi_processor_count = 1;
    p->l2_cache_size = 1 << 20;
    p->warp_size = 32;
    return 0;
}
static int fake_synchronize(int dev) { return 0; }

static void *fake_alloc(int dev, size_t nbytes, EmCudaStream s) {
    if (dev < 0 || dev >= FAKE_DEVICES) return fake_fail("invalid device ordinal"), NULL;
    if ((int64_t)nbytes > ((int64_t)1 << 30) - stats[dev].allocated) {
        stats[dev].num_ooms++;
        return fake_fail("the fake device holds at most 1 GiB"), NULL;
    }
    char *p = malloc(nbytes ? nbytes : 1);
    if (!p) return fake_fail("host malloc failed"), NULL;
    memset(p, 0xA5, nbytes);
    EmCudaMemoryStats *st = &stats[dev];
    st->allocated += (int64_t)nbytes;
    st->reserved += (int64_t)nbytes;
    if (st->allocated > st->max_allocated) st->max_allocated = st->allocated;
    if (st->reserved > st->max_reserved) st->max_reserved = st->reserved;
    return p + FAKE_TAG;
}
static void fake_free(int dev, void *tagged, size_t nbytes, EmCudaStream s) {
    void *p = untag(tagged);
    memset(p, 0x5A, nbytes);
    free(p);
    stats[dev].allocated -= (int64_t)nbytes;
    stats[dev].reserved -= (int64_t)nbytes;
}
static void fake_memory_stats(int dev, EmCudaMemoryStats *out) { *out = stats[dev]; }
/* the fake's devices report 1 GiB (fake_device_props); what the caching
 * allocator holds counts as used, as the driver would see it */
static int fake_mem_get_info(int dev, int64_t *free_bytes, int64_t *total_bytes) {
    *total_bytes = (int64_t)1 << 30;
    *free_bytes = *total_bytes - stats[dev].reserved > 0 ? *total_bytes - stats[dev].reserved : 0;
    return 0;
}
static void fake_reset_peak(int dev) {
    stats[dev].max_allocated = stats[dev].allocated;
    stats[dev].max_reserved = stats[dev].reserved;
}
static int fake_empty_cache(void) { return 0; }
static void *fake_host_alloc(size_t n) { return malloc(n ? n : 1); }
/* Note [record_stream]: the fake runs everything at once, so nothing waits;
 * the calls are counted for the tests (ember._cuda_fake.counters). */
static int64_t record_stream_calls;
static int fake_record_stream(int dev, void *ptr, EmCudaStream s) {
    if (dev < 0 || dev >= FAKE_DEVICES) return fake_fail("invalid device ordinal");
    record_stream_calls++;
    return 0;
}
static void fake_host_free(void *p) { free(p); }

static int fake_memcpy(void *dst, int dd, const void *src, int sd, size_t n, bool nb) {
    memmove(dev_ptr(dst, dd), dev_ptr(src, sd), n);
    return 0;
}

/* Streams are counters, events remember when they were recorded. */
static intptr_t next_handle = 1;
static int fake_stream_create(int dev, int prio, EmCudaStream *out) {
    *out = (EmCudaStream)next_handle++;
    return 0;
}
static void fake_stream_destroy(int dev, EmCudaStream s) {}
static int fake_stream_sync(int dev, EmCudaStream s) { return 0; }
static int fake_stream_query(int dev, EmCudaStream s) { return 1; }
static EmCudaStream current_streams[FAKE_DEVICES];
static EmCudaStream fake_current_stream(int dev) { return current_streams[dev]; }
static int fake_set_current_stream(int dev, EmCudaStream s) {
    current_streams[dev] = s;
    return 0;
}
static int fake_stream_wait_event(int dev, EmCudaStream s, EmCudaEvent e) { return 0; }

typedef struct {
    bool timing, recorded;
    double t;
} FakeEvent;
static int fake_event_create(int dev, bool timing, EmCudaEvent *out) {
    FakeEvent *e = calloc(1, sizeof(FakeEvent));
    if (!e) return fake_fail("out of host memory");
    e->timing = timing;
    *out = e;
    return 0;
}
static void fake_event_destroy(int dev, EmCudaEvent e) { free(e); }
static int fake_event_record(int dev, EmCudaEvent ev, EmCudaStream s) {
    FakeEvent *e = ev;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    e->recorded = true;
    return 0;
}
static int fake_event_sync(int dev, EmCudaEvent e) { return 0; }
static int fake_event_query(int dev, EmCudaEvent e) { return 1; }
static int fake_event_elapsed(int dev, EmCudaEvent a, EmCudaEvent b, float *ms) {
    FakeEvent *x = a, *y = b;
    if (!x->timing || !y->timing)
        return fake_fail("Both events must be created with argument 'enable_timing=True'.");
    if (!x->recorded || !y->recorded)
        return fake_fail("Both events must be recorded before calculating elapsed time.");
    *ms = (float)(y->t - x->t);
    return 0;
}

/* The strided copy-and-cast, done by the CPU copy on host views of the
 * fake device memory. Strides may be negative (flip reads a reversed alias):
 * each view starts at its lowest element. */
static int fake_span(int ndim, const int64_t *sizes, const int64_t *strides, int64_t *lo, int64_t *extent) {
    int64_t pos[EM_MAX_DIMS];
    *lo = 0;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            *extent = 0;
            return 0;
        }
        pos[d] = strides[d] < 0 ? -strides[d] : strides[d];
        if (strides[d] < 0) *lo += (sizes[d] - 1) * strides[d];
    }
    return host->extent_checked(ndim, sizes, pos, extent);
}

static int fake_copy_strided(int dev, int ndim, const int64_t *sizes, void *dst, int dst_dtype,
                             const int64_t *dst_strides, const void *src, int src_dtype,
                             const int64_t *src_strides) {
    int64_t dext, sext, dlo, slo;
    if (fake_span(ndim, sizes, dst_strides, &dlo, &dext) < 0 || fake_span(ndim, sizes, src_strides, &slo, &sext) < 0) {
        PyErr_Clear();
        return fake_fail("bad strides");
    }
    EmTensor *d = host->host_view((char *)untag(dst) + dlo * em_itemsize(dst_dtype), dext * em_itemsize(dst_dtype),
                                  -dlo, ndim, sizes, dst_strides, (EmDType)dst_dtype);
    EmTensor *s = d ? host->host_view((char *)untag(src) + slo * em_itemsize(src_dtype), sext * em_itemsize(src_dtype),
                                      -slo, ndim, sizes, src_strides, (EmDType)src_dtype)
                    : NULL;
    int r = d && s ? host->copy_(d, (PyObject *)s) : -1;
    Py_XDECREF(d);
    Py_XDECREF(s);
    if (r < 0) {
        PyErr_Clear();
        return fake_fail("strided copy failed");
    }
    return 0;
}

/* Note [CUDA elementwise] on the fake: the same launch description, run by
 * the CPU loops of the kernel table it names — or, when the environment
 * names EMBER_FAKE_CUDA_KERNELS (a host build of csrc/cuda/elementwise.cu,
 * -DEM_CUDA_EW_HOST_TEST) as the fake is switched on, by the CUDA kernels'
 * own code run on the host, so tests/test_cuda_elementwise.py checks them
 * against the CPU without a GPU. */
static bool (*host_has_elementwise)(const char *, int);
static int (*host_elementwise)(int, const EmCudaElementwise *);
static const char *(*host_last_error)(void);

static void fake_load_host_kernels(void) {
    host_has_elementwise = NULL;
    host_elementwise = NULL;
    const char *path = getenv("EMBER_FAKE_CUDA_KERNELS");
    void *lib = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) return;
    *(void **)&host_has_elementwise = dlsym(lib, "em_cuda_has_elementwise");
    *(void **)&host_elementwise = dlsym(lib, "em_cuda_elementwise");
    *(void **)&host_last_error = dlsym(lib, "em_cuda_ew_host_last_error");
    if (!host_has_elementwise || !host_elementwise || !host_last_error)
        host_has_elementwise = NULL, host_elementwise = NULL;
}

static bool fake_has_elementwise(const char *kernel, int compute_dtype) {
    return host_has_elementwise ? host_has_elementwise(kernel, compute_dtype) : true;
}
static int fake_elementwise(int dev, const EmCudaElementwise *launch) {
    EmCudaElementwise e = *launch;
    for (int op = 0; op < e.nops; op++)
        if (e.data[op]) e.data[op] = untag(e.data[op]);
    if (host_elementwise)
        return host_elementwise(dev, &e) < 0 ? fake_fail(host_last_error()) : 0;
    const EmKernels *k = host->kernels_find(e.kernel);
    if (!k || host->iter_run_prepared(k, &e) < 0) return fake_fail("no CPU kernel");
    return 0;
}

/* gemm (column-major, as cuBLAS): C = op(X) op(Y) is, read row-major,
 * C^T = op(Y)^T op(X)^T, which the CPU GEMM computes. Halves go through a
 * plain float loop (tests are small). */
static float load_half(const void *p, int dtype, int64_t i) {
    uint16_t v = ((const uint16_t *)p)[i];
    return dtype == EM_FLOAT16 ? em_f16_to_f32(v) : em_bf16_to_f32(v);
}
static int fake_gemm(int dev, int dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                     const void *a, int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb,
                     double beta, void *c, int64_t ldc, int64_t sc, int64_t batch, bool tf32) {
    int isz = em_itemsize(dtype);
    for (int64_t i = 0; i < batch; i++) {
        const char *A = (const char *)untag(a) + i * sa * isz, *B = (const char *)untag(b) + i * sb * isz;
        char *C = (char *)untag(c) + i * sc * isz;
        if (dtype == EM_FLOAT32 || dtype == EM_FLOAT64) {
            EmScalar al = {'f', {.f = alpha}}, be = {'f', {.f = beta}};
            host->gemm_ex((EmDType)dtype, tb, ta, n, m, k, B, ldb, A, lda, C, ldc, al, be, false);
            continue;
        }
        if (dtype != EM_FLOAT16 && dtype != EM_BFLOAT16) return fake_fail("gemm: unsupported dtype");
        for (int64_t col = 0; col < n; col++)
            for (int64_t row = 0; row < m; row++) {
                float acc = 0;
                for (int64_t p = 0; p < k; p++)
                    acc += load_half(A, dtype, ta ? p + row * lda : row + p * lda) *
                           load_half(B, dtype, tb ? col + p * ldb : p + col * ldb);
                uint16_t *out = (uint16_t *)C + row + col * ldc;
                float old = beta != 0 ? load_half(C, dtype, row + col * ldc) : 0.0f;
                float v = (float)(alpha * acc + beta * old);
                *out = dtype == EM_FLOAT16 ? em_f32_to_f16(v) : em_f32_to_bf16(v);
            }
    }
    return 0;
}

/* Note [GPU random numbers]: the same Philox stream the GPU kernels draw. */
static int fake_random_fill(int dev, int kind, int dtype, void *out, int64_t numel, uint64_t seed,
                            uint64_t offset, double a, double b, int64_t from, uint64_t range) {
    char *p = untag(out);
    int per = em_philox_per_block(kind, dtype, range), isz = em_itemsize(dtype);
    for (int64_t j = 0; j * per < numel; j++) {
        EmPhilox4 w = em_philox_block(seed, offset, (uint64_t)j);
        for (int i = 0; i < per && j * per + i < numel; i++) {
            int64_t iv = 0;
            double v = em_philox_value(w, i, kind, dtype, a, b, range, from, &iv);
            EmScalar s = em_is_float(dtype) ? (EmScalar){'f', {.f = v}}
                         : (EmScalar){'i', {.i = kind == EM_RANDOM_INTEGER ? iv : (int64_t)v}};
            host->scalar_store(s, (EmDType)dtype, p + (j * per + i) * isz);
        }
    }
    return 0;
}

/* ---- fused nn kernels on the fake (cudafused): the CPU kernels, or plain
 * double loops where the CPU ones are private to their front-end, on host
 * views of the untagged memory. Each call is counted by name, so tests can
 * tell the native path ran and not Note [CUDA fallback]
 * (ember._cuda_fake.kernel_calls()). */
static const char *fused_names[] = {"softmax", "softmax_backward", "layer_norm", "layer_norm_backward",
                                    "cross_entropy", "cross_entropy_backward", "adam", "embedding",
                                    "embedding_backward", "attention_forward", "attention_backward",
                                    "attention_forward_ex", "attention_backward_ex"};
enum { NFUSED = sizeof fused_names / sizeof fused_names[0] };
static int64_t fused_calls[NFUSED];

/* d[names[i]] = calls[i] for the n entries of one group; -1 with an exception */
static int put_counts(PyObject *d, const char *const *names, const int64_t *calls, int n) {
    for (int i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(calls[i]);
        int r = v ? PyDict_SetItemString(d, names[i], v) : -1;
        Py_XDECREF(v);
        if (r < 0) return -1;
    }
    return 0;
}

static PyObject *fake_kernel_calls(PyObject *m, PyObject *unused) {
    PyObject *d = PyDict_New();
    if (d && put_counts(d, fused_names, fused_calls, NFUSED) < 0) Py_CLEAR(d);
    return d;
}

/* n elements of dtype at device pointer p, as a 1-d host tensor converted to
 * float64 (new reference; NULL with an exception). */
static EmTensor *fake_load(const void *p, int64_t n, int dtype) {
    EmTensor *v = host->host_view(untag(p), n * em_itemsize((EmDType)dtype), 0, 1, &n, NULL, (EmDType)dtype);
    EmTensor *d = v ? host->to_dtype(v, EM_FLOAT64, true) : NULL;
    Py_XDECREF(v);
    return d;
}

/* n float64 values at src into device pointer p as dtype. 0 / -1. */
static int fake_store(void *p, int64_t n, int dtype, const double *src) {
    EmTensor *v = host->host_view(untag(p), n * em_itemsize((EmDType)dtype), 0, 1, &n, NULL, (EmDType)dtype);
    EmTensor *s = v ? host->host_view((void *)src, n * 8, 0, 1, &n, NULL, EM_FLOAT64) : NULL;
    int r = s ? host->copy_(v, (PyObject *)s) : -1;
    Py_XDECREF(v);
    Py_XDECREF(s);
    return r;
}

static EmTensor *fake_f64(int64_t n) { return host->empty(1, &n, EM_FLOAT64, em_cpu()); }
#define F64(t) ((double *)em_data(t))

/* Python errors inside an entry become the backend's error message. */
static int fake_done(int r, const char *what) {
    if (r >= 0) return r;
    PyErr_Clear();
    return fake_fail(what);
}

static int fake_softmax(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n, int64_t inner,
                        bool lg) {
    fused_calls[0]++;
    int64_t total = outer * n * inner;
    EmTensor *x = fake_load(in, total, dtype), *y = fake_f64(total);
    int r = -1;
    if (x && y && host->softmax(em_data(x), em_data(y), EM_FLOAT64, outer, n, inner, lg) == 0)
        r = fake_store(out, total, dtype, F64(y));
    Py_XDECREF(x);
    Py_XDECREF(y);
    return fake_done(r, "softmax failed");
}

static int fake_softmax_backward(int dev, int dtype, void *gi, const void *g, const void *y, int64_t outer,
                                 int64_t n, int64_t inner, bool lg) {
    fused_calls[1]++;
    int64_t total = outer * n * inner;
    EmTensor *gd = fake_load(g, total, dtype), *yd = fake_load(y, total, dtype), *o = fake_f64(total);
    int r = -1;
    if (gd && yd && o && host->softmax_backward(em_data(gd), em_data(yd), em_data(o), EM_FLOAT64, outer, n, inner,
                                                lg) == 0)
        r = fake_store(gi, total, dtype, F64(o));
    Py_XDECREF(gd);
    Py_XDECREF(yd);
    Py_XDECREF(o);
    return fake_done(r, "softmax backward failed");
}

static int stat_dtype(int dtype) { return dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32; }

static int fake_layer_norm(int dev, int dtype, void *y, void *mean, void *rstd, const void *x, const void *w,
                           const void *b, int64_t rows, int64_t n, double eps) {
    fused_calls[2]++;
    int ct = stat_dtype(dtype);
    EmTensor *xd = fake_load(x, rows * n, dtype), *wd = w ? fake_load(w, n, ct) : NULL,
             *bd = b ? fake_load(b, n, ct) : NULL, *yd = fake_f64(rows * n), *md = fake_f64(rows),
             *sd = fake_f64(rows);
    int r = -1;
    if (!xd || (w && !wd) || (b && !bd) || !yd || !md || !sd) goto done;
    for (int64_t i = 0; i < rows; i++) {
        const double *xr = F64(xd) + i * n;
        double mu = 0, ss = 0;
        if (mean) {
            for (int64_t j = 0; j < n; j++) mu += xr[j];
            mu /= (double)n;
        }
        for (int64_t j = 0; j < n; j++) ss += (xr[j] - mu) * (xr[j] - mu);
        double rs = 1.0 / sqrt(ss / (double)n + eps);
        F64(md)[i] = mu;
        F64(sd)[i] = rs;
        for (int64_t j = 0; j < n; j++)
            F64(yd)[i * n + j] = (xr[j] - mu) * rs * (w ? F64(wd)[j] : 1.0) + (b ? F64(bd)[j] : 0.0);
    }
    r = fake_store(y, rows * n, dtype, F64(yd)) < 0 || fake_store(rstd, rows, ct, F64(sd)) < 0 ||
        (mean && fake_store(mean, rows, ct, F64(md)) < 0) ? -1 : 0;
done:
    Py_XDECREF(xd);
    Py_XDECREF(wd);
    Py_XDECREF(bd);
    Py_XDECREF(yd);
    Py_XDECREF(md);
    Py_XDECREF(sd);
    return fake_done(r, "layer_norm failed");
}

static int fake_layer_norm_backward(int dev, int dtype, void *dx, void *dw, void *db, const void *g, const void *x,
                                    const void *mean, const void *rstd, const void *w, int64_t rows, int64_t n) {
    fused_calls[3]++;
    int ct = stat_dtype(dtype);
    EmTensor *gd = fake_load(g, rows * n, dtype), *xd = fake_load(x, rows * n, dtype), *md = fake_load(mean, rows, ct),
             *sd = fake_load(rstd, rows, ct), *wd = w ? fake_load(w, n, ct) : NULL, *dxd = fake_f64(rows * n),
             *dwd = fake_f64(n), *dbd = fake_f64(n);
    int r = -1;
    if (!gd || !xd || !md || !sd || (w && !wd) || !dxd || !dwd || !dbd) goto done;
    memset(em_data(dwd), 0, (size_t)n * sizeof(double));
    memset(em_data(dbd), 0, (size_t)n * sizeof(double));
    for (int64_t i = 0; i < rows; i++) {
        const double *gr = F64(gd) + i * n, *xr = F64(xd) + i * n, mu = F64(md)[i], rs = F64(sd)[i];
        double s1 = 0, s2 = 0;
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - mu) * rs, gw = gr[j] * (w ? F64(wd)[j] : 1.0);
            s1 += gw;
            s2 += gw * xh;
            F64(dwd)[j] += gr[j] * xh;
            F64(dbd)[j] += gr[j];
        }
        for (int64_t j = 0; j < n; j++) {
            double xh = (xr[j] - mu) * rs, gw = gr[j] * (w ? F64(wd)[j] : 1.0);
            F64(dxd)[i * n + j] = rs * (gw - s1 / (double)n - xh * s2 / (double)n);
        }
    }
    r = fake_store(dx, rows * n, dtype, F64(dxd)) < 0 || fake_store(dw, n, ct, F64(dwd)) < 0 || fake_store(db, n, ct, F64(dbd)) < 0
            ? -1 : 0;
done:
    Py_XDECREF(gd);
    Py_XDECREF(xd);
    Py_XDECREF(md);
    Py_XDECREF(sd);
    Py_XDECREF(wd);
    Py_XDECREF(dxd);
    Py_XDECREF(dwd);
    Py_XDECREF(dbd);
    return fake_done(r, "layer_norm backward failed");
}

/* The CPU kernels' view of a cross-entropy launch, on float64 logits and weights. */
static int fake_xent_setup(EmXent *p, EmTensor **xd, EmTensor **wd, int dtype, const void *x, const int64_t *t,
                           const void *w, int64_t N, int64_t C, int64_t inner, int64_t ignore, double e,
                           int64_t *bad) {
    *xd = fake_load(x, N * C * inner, dtype);
    *wd = w ? fake_load(w, C, stat_dtype(dtype)) : NULL;
    if (!*xd || (w && !*wd)) return -1;
    *p = (EmXent){{em_data(*xd), untag(t), *wd ? em_data(*wd) : NULL, EM_FLOAT64, N, C, inner, ignore}, e};
    int64_t k = host->nll_check(&p->nll);
    if (k >= 0) *bad = ((const int64_t *)untag(t))[k];
    return k >= 0 ? 1 : 0;
}

static int fake_cross_entropy(int dev, int dtype, void *loss, void *lse, const void *x, const int64_t *target,
                              const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                              double smoothing, int reduction, double *work, int64_t *bad) {
    fused_calls[4]++;
    int ct = stat_dtype(dtype);
    int64_t m = N * inner;
    EmXent p;
    EmTensor *xd = NULL, *wd = NULL, *ld = fake_f64(m), *terms = fake_f64(2 * m + 1);
    int r = ld && terms ? fake_xent_setup(&p, &xd, &wd, dtype, x, target, weight, N, C, inner, ignore, smoothing, bad)
                        : -1;
    if (r != 0) goto done;
    r = host->xent_forward(&p, em_data(ld), F64(terms), F64(terms) + m) < 0 ? -1 : 0;
    if (r == 0) r = fake_store(lse, m, ct, F64(ld));
    if (r == 0 && reduction == 0) {
        r = fake_store(loss, m, ct, F64(terms)); /* the first m of them */
    } else if (r == 0) {
        double total = 0, total_w = 0;
        for (int64_t k = 0; k < m; k++) total += F64(terms)[k], total_w += F64(terms)[m + k];
        F64(terms)[0] = reduction == 1 ? total / total_w : total;
        r = fake_store(loss, 1, ct, F64(terms));
    }
done:
    Py_XDECREF(xd);
    Py_XDECREF(wd);
    Py_XDECREF(ld);
    Py_XDECREF(terms);
    return fake_done(r, "cross_entropy failed");
}

static int fake_cross_entropy_backward(int dev, int dtype, void *gi, const void *grad, const void *x,
                                       const int64_t *target, const void *weight, const void *lse, int64_t N,
                                       int64_t C, int64_t inner, int64_t ignore, double smoothing, int reduction,
                                       double *work, int64_t *bad) {
    fused_calls[5]++;
    int ct = stat_dtype(dtype);
    int64_t m = N * inner;
    EmXent p;
    EmTensor *xd = NULL, *wd = NULL, *gd = fake_load(grad, reduction == 0 ? m : 1, ct), *ld = fake_load(lse, m, ct),
             *s = fake_f64(m + 1), *o = fake_f64(N * C * inner);
    int r = gd && ld && s && o
                ? fake_xent_setup(&p, &xd, &wd, dtype, x, target, weight, N, C, inner, ignore, smoothing, bad)
                : -1;
    if (r != 0) goto done;
    double tw = 0;
    const int64_t *t = untag(target);
    for (int64_t k = 0; k < m; k++)
        if (t[k] != ignore) tw += wd ? F64(wd)[t[k]] : 1.0;
    for (int64_t k = 0; k < m; k++)
        F64(s)[k] = F64(gd)[reduction == 0 ? k : 0] * (reduction == 1 ? 1.0 / tw : 1.0);
    r = host->xent_backward(&p, em_data(ld), F64(s), em_data(o)) < 0 ? -1 : 0;
    if (r == 0) r = fake_store(gi, N * C * inner, dtype, F64(o));
done:
    Py_XDECREF(xd);
    Py_XDECREF(wd);
    Py_XDECREF(gd);
    Py_XDECREF(ld);
    Py_XDECREF(s);
    Py_XDECREF(o);
    return fake_done(r, "cross_entropy backward failed");
}

static int fake_adam(int dev, const EmCudaAdam *a) {
    fused_calls[6]++;
    for (int k = 0; k < a->n; k++)
        host->adam_step(a->dtypes[k], untag(a->params[k]), untag(a->grads[k]), untag(a->exp_avgs[k]),
                         untag(a->exp_avg_sqs[k]), a->max_exp_avg_sqs ? untag(a->max_exp_avg_sqs[k]) : NULL,
                         a->numels[k], a->lr, a->beta1, a->beta2, a->weight_decay, a->eps, a->steps[k], a->maximize,
                         a->decoupled);
    return 0;
}

static int64_t fake_index(const void *idx, int idx_dtype, int64_t k) {
    return idx_dtype == EM_INT32 ? ((const int32_t *)untag(idx))[k] : ((const int64_t *)untag(idx))[k];
}

static int fake_embedding(int dev, int dtype, void *out, const void *weight, const void *indices, int idx_dtype,
                          int64_t n_idx, int64_t num_weights, int64_t dim, int64_t *bad) {
    fused_calls[7]++;
    for (int64_t k = 0; k < n_idx; k++) {
        int64_t i = fake_index(indices, idx_dtype, k);
        if (i < 0 || i >= num_weights) {
            *bad = i;
            return 1;
        }
    }
    size_t row = (size_t)dim * (size_t)em_itemsize((EmDType)dtype);
    for (int64_t k = 0; k < n_idx; k++)
        memcpy((char *)untag(out) + k * row, (const char *)untag(weight) + fake_index(indices, idx_dtype, k) * row, row);
    return 0;
}

static int fake_embedding_backward(int dev, int dtype, void *gw, const void *g, const void *indices, int idx_dtype,
                                   int64_t n_idx, int64_t num_weights, int64_t dim, int64_t padding_idx,
                                   bool scale_grad_by_freq) {
    fused_calls[8]++;
    EmTensor *gd = fake_load(g, n_idx * dim, dtype), *acc = fake_f64(num_weights * dim), *cnt = fake_f64(num_weights);
    int r = -1;
    if (!gd || !acc || !cnt) goto done;
    memset(em_data(acc), 0, (size_t)(num_weights * dim) * sizeof(double));
    memset(em_data(cnt), 0, (size_t)num_weights * sizeof(double));
    for (int64_t k = 0; k < n_idx; k++) F64(cnt)[fake_index(indices, idx_dtype, k)] += 1;
    for (int64_t k = 0; k < n_idx; k++) {
        int64_t i = fake_index(indices, idx_dtype, k);
        if (i == padding_idx) continue;
        double sc = scale_grad_by_freq ? 1.0 / F64(cnt)[i] : 1.0;
        for (int64_t j = 0; j < dim; j++) F64(acc)[i * dim + j] += F64(gd)[k * dim + j] * sc;
    }
    r = fake_store(gw, num_weights * dim, dtype, F64(acc));
done:
    Py_XDECREF(gd);
    Py_XDECREF(acc);
    Py_XDECREF(cnt);
    return fake_done(r, "embedding backward failed");
}

/* cudared: Note [CUDA reduce] on the fake: the launch description, run by
 * the CPU kernel it carries, on untagged pointers. Launches are counted so
 * tests can tell the native path from Note [CUDA fallback]. */
static int64_t reduce_launches;
static bool fake_has_reduce(const char *op, int in_dtype) { return true; }
static int fake_reduce(int dev, const EmCudaReduce *launch) {
    EmCudaReduce r = *launch;
    r.in = untag(r.in);
    for (int i = 0; i < 2; i++)
        if (r.out[i]) r.out[i] = untag(r.out[i]);
    if (r.aux) r.aux = untag(r.aux);
    reduce_launches++;
    const EmReduceKernels *t = host->reduce_find(r.op);
    if (!t || r.in_dtype < 0 || r.in_dtype >= EM_NUM_DTYPES || host->reduce_run_prepared(&t->k[r.in_dtype], &r) < 0)
        return fake_fail("no CPU reduce kernel");
    return 0;
}

/* cudaindex: Note [CUDA indexing] on the fake: the descriptions run by
 * cpu/index.c's loops on untagged pointers (index values read through a
 * host view with the broadcast strides), nonzero by a plain row-major walk.
 * Launches are counted (ember._cuda_fake.counters()["index"]). */
static int64_t index_launches;

static int fake_index_offsets(int dev, int64_t *off, bool accumulate, const void *idx, int idx_dtype, int nb,
                              const int64_t *bshape, const int64_t *idx_strides, int64_t size, int64_t stride,
                              int wrap, int64_t *bad_pos, int64_t *bad_val) {
    index_launches++;
    int isz = em_itemsize((EmDType)idx_dtype);
    int64_t st[EM_MAX_DIMS], extent = isz;
    for (int d = 0; d < nb; d++) {
        st[d] = idx_strides[d] / isz;
        if (bshape[d] > 0) extent += (bshape[d] - 1) * idx_strides[d];
    }
    EmTensor *v = host->host_view(untag(idx), extent, 0, nb, bshape, st, (EmDType)idx_dtype);
    if (!v) {
        PyErr_Clear();
        return fake_fail("index offsets: no host view");
    }
    int64_t at = host->index_offsets(off ? untag(off) : NULL, accumulate, v, nb, bshape, size, stride, wrap, bad_val);
    Py_DECREF(v);
    if (at < 0) return 0;
    *bad_pos = at;
    return 1;
}

static EmCudaIndirect fake_indirect(const EmCudaIndirect *g) {
    EmCudaIndirect h = *g;
    h.x = untag(g->x);
    h.d = untag(g->d);
    h.off = g->off ? untag(g->off) : NULL;
    h.dense_off = g->dense_off ? untag(g->dense_off) : NULL;
    return h;
}
static int fake_index_gather(int dev, const EmCudaIndirect *g, int itemsize) {
    index_launches++;
    EmCudaIndirect h = fake_indirect(g);
    host->index_gather(&h, itemsize);
    return 0;
}
static int fake_index_put(int dev, const EmCudaIndirect *g, int op, int dtype) {
    index_launches++;
    EmCudaIndirect h = fake_indirect(g);
    host->index_put(&h, (EmReduceOp)op, (EmDType)dtype, false);
    return 0;
}
static int fake_scatter_gather(int dev, const EmCudaScatter *g, int op, int dtype, bool gather) {
    index_launches++;
    EmCudaScatter h = *g;
    h.x = untag(g->x);
    h.y = untag(g->y);
    h.idx = untag(g->idx);
    if (gather) return host->gather(&h, em_itemsize((EmDType)dtype)) ? 0 : 1;
    host->scatter(&h, (EmReduceOp)op, (EmDType)dtype);
    return 0;
}

/* Walks the logical elements of a strided tensor in row-major order. */
static bool fake_nz_at(const char *p, int isz, int dtype) {
    uint64_t v = 0, mask = dtype == EM_FLOAT16 || dtype == EM_BFLOAT16 ? 0x7fffu
                           : dtype == EM_FLOAT32                    ? 0x7fffffffu
                           : dtype == EM_FLOAT64                    ? 0x7fffffffffffffffull
                                                                    : ~0ull;
    memcpy(&v, p, (size_t)isz); /* little-endian: the low bytes */
    return (v & mask) != 0;
}
static int64_t fake_nz_walk(const void *in, int dtype, int ndim, const int64_t *sizes, const int64_t *strides,
                            int64_t *scan, int64_t *coords, int64_t *offs, const int64_t *ostrides) {
    int isz = em_itemsize((EmDType)dtype);
    int64_t numel = 1, c[EM_MAX_DIMS] = {0}, n = 0;
    for (int d = 0; d < ndim; d++) numel *= sizes[d];
    const char *base = untag(in);
    for (int64_t i = 0; i < numel; i++) {
        int64_t o = 0;
        for (int d = 0; d < ndim; d++) o += c[d] * strides[d];
        if (fake_nz_at(base + o * isz, isz, dtype)) {
            if (coords)
                for (int d = 0; d < ndim; d++) coords[n * ndim + d] = c[d];
            if (offs) {
                int64_t b = 0;
                for (int d = 0; d < ndim; d++) b += c[d] * ostrides[d];
                offs[n] = b;
            }
            n++;
        }
        if (scan) scan[i] = n;
        for (int d = ndim - 1; d >= 0; d--) {
            if (++c[d] < sizes[d]) break;
            c[d] = 0;
        }
    }
    return n;
}
static int fake_nonzero_scan(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t *scan, int64_t *count) {
    index_launches++;
    *count = fake_nz_walk(in, dtype, ndim, sizes, strides, untag(scan), NULL, NULL, NULL);
    return 0;
}
static int fake_nonzero_fill(int dev, const void *in, int dtype, int ndim, const int64_t *sizes,
                             const int64_t *strides, const int64_t *scan, int64_t *coords, int64_t *offs,
                             const int64_t *ostrides) {
    index_launches++;
    (void)scan;
    fake_nz_walk(in, dtype, ndim, sizes, strides, NULL, coords ? untag(coords) : NULL, offs ? untag(offs) : NULL,
                 ostrides);
    return 0;
}

static int64_t shape_launches; /* cudashape: the shape kernels' launches (below) */


#include "cuda_fake_sort.h" /* sort and scan (cudasort) */

/* ---- shape kernels (cudashape): Note [CUDA shape kernels] on the fake.
 * The per-element rules of csrc/cuda/shape_rules.h, which shape.cu's
 * kernels run too, as host loops on untagged pointers; values are stored
 * with the CPU's casts. Launches are counted (ember._cuda_fake.counters()
 * ["shape"]) so tests can tell the native path ran. */
#include "../cuda/shape_rules.h"

static int fake_arange_fill(int dev, int dtype, void *out, int64_t n, int64_t stride, bool int_math, int64_t start,
                            int64_t step, double xs, double xt) {
    char *p = n ? untag(out) : NULL;
    int isz = em_itemsize((EmDType)dtype);
    shape_launches++;
    for (int64_t i = 0; i < n; i++) {
        EmScalar v;
        if (int_math) {
            v.kind = 'i';
            v.v.i = em_shape_arange_int(i, start, step);
        } else {
            v.kind = 'f';
            v.v.f = em_shape_arange_float(i, xs, xt);
        }
        host->scalar_store(v, (EmDType)dtype, p + i * stride * isz);
    }
    return 0;
}

static int fake_linspace_fill(int dev, int dtype, void *out, int64_t steps, int64_t stride, double xs, double xe,
                              bool log, double base) {
    char *p = steps ? untag(out) : NULL;
    int isz = em_itemsize((EmDType)dtype);
    bool single = dtype == EM_FLOAT32 || dtype == EM_FLOAT16 || dtype == EM_BFLOAT16;
    shape_launches++;
    for (int64_t i = 0; i < steps; i++) {
        EmScalar v = {'f', {0}};
        v.v.f = em_shape_linspace(i, steps, xs, xe, single);
        if (log) v.v.f = pow(base, v.v.f);
        host->scalar_store(v, (EmDType)dtype, p + i * stride * isz);
    }
    return 0;
}

static int fake_tri_mask(int dev, int dtype, void *data, int ndim, const int64_t *sizes, const int64_t *strides,
                         int64_t k, bool lower) {
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= sizes[d];
    if (ndim < 2) return fake_fail("tril/triu: fewer than 2 dims");
    char *p = numel ? untag(data) : NULL;
    int isz = em_itemsize((EmDType)dtype);
    shape_launches++;
    for (int64_t lin = 0; lin < numel; lin++) {
        int64_t row = 0, col = 0, off = em_shape_offset_rc(lin, ndim, sizes, strides, &row, &col);
        if (!em_shape_tri_keep(row, col, k, lower)) memset(p + off * isz, 0, (size_t)isz);
    }
    return 0;
}

static int fake_repeat_interleave(int dev, int dtype, void *out, const void *in, int64_t outer, int64_t n,
                                  int64_t inner, const int64_t *cum, int64_t total) {
    int64_t numel = outer * total * inner;
    int isz = em_itemsize((EmDType)dtype);
    shape_launches++;
    if (!numel) return 0;
    if (!n) return fake_fail("repeat_interleave: outputs from an empty input");
    char *o = untag(out);
    const char *s = untag(in);
    const int64_t *c = untag(cum);
    for (int64_t lin = 0; lin < numel; lin++) {
        int64_t rest = lin / inner, e = lin - rest * inner, ob = rest / total, j = rest - ob * total;
        int64_t i = em_shape_interleave_src(c, n, j);
        memcpy(o + lin * isz, s + ((ob * n + i) * inner + e) * isz, (size_t)isz);
    }
    return 0;
}


/* ---- attention (cudaattn) on the fake: the CPU flash kernel (cpu/attention.c)
 * in float32 on float32 copies of host views of the untagged memory; results
 * are cast back into the entry's dtype and strides. */
/* a (B, heads, rows, D) view of device memory p with element strides s (new reference) */
static EmTensor *attn_fake_view(const void *p, int dtype, int64_t B, int64_t heads, int64_t rows, int64_t D,
                                const int64_t *s) {
    const int64_t sizes[4] = {B, heads, rows, D}, strides[4] = {s[0], s[1], s[2], 1};
    int64_t ext;
    if (host->extent_checked(4, sizes, strides, &ext) < 0) return NULL;
    return host->host_view(untag(p), ext * em_itemsize((EmDType)dtype), 0, 4, sizes, strides, (EmDType)dtype);
}

/* the float32, contiguous copy of a view, as a kernel operand (new reference) */
static EmTensor *attn_fake_f32(const void *p, int dtype, int64_t B, int64_t heads, int64_t rows, int64_t D,
                               const int64_t *s, EmAttnOperand *op) {
    EmTensor *v = attn_fake_view(p, dtype, B, heads, rows, D, s);
    EmTensor *f = v ? host->to_dtype(v, EM_FLOAT32, true) : NULL;
    EmTensor *c = f ? host->contiguous(f) : NULL;
    Py_XDECREF(v);
    Py_XDECREF(f);
    if (c && op) *op = (EmAttnOperand){em_data(c), c->strides[0], c->strides[1], c->strides[2]};
    return c;
}

/* dst (device view) = src (host float32 tensor) cast to dtype. 0 / -1 */
static int attn_fake_store(void *p, int dtype, const int64_t *s, EmTensor *src) {
    EmTensor *v = attn_fake_view(p, dtype, src->sizes[0], src->sizes[1], src->sizes[2], src->sizes[3], s);
    int r = v ? host->copy_(v, (PyObject *)src) : -1;
    Py_XDECREF(v);
    return r;
}

static EmAttn attn_fake_problem(const EmCudaAttention *a) {
    return (EmAttn){.dt = EM_FLOAT32, .B = a->B, .H = a->H, .Hk = a->Hkv, .L = a->L, .S = a->S, .D = a->D,
                    .Dv = a->D, .causal = a->causal, .scale = a->scale};
}

static int fake_attention_forward(int dev, const EmCudaAttention *a) {
    fused_calls[9]++;
    if (a->dtype != EM_FLOAT16 && a->dtype != EM_BFLOAT16 && a->dtype != EM_FLOAT32)
        return fake_fail("attention forward: dtype is not float16, bfloat16 or float32");
    EmAttn p = attn_fake_problem(a);
    EmTensor *q = attn_fake_f32(a->q, a->dtype, a->B, a->H, a->L, a->D, a->sq, &p.q);
    EmTensor *k = q ? attn_fake_f32(a->k, a->dtype, a->B, a->Hkv, a->S, a->D, a->sk, &p.k) : NULL;
    EmTensor *v = k ? attn_fake_f32(a->v, a->dtype, a->B, a->Hkv, a->S, a->D, a->sv, &p.v) : NULL;
    const int64_t os[4] = {a->B, a->H, a->L, a->D};
    EmTensor *out = v ? host->empty(4, os, EM_FLOAT32, em_cpu()) : NULL;
    int r = -1;
    if (out && host->attention_forward(&p, em_data(out), untag(a->lse)) == 0) {
        if (a->S == 0) /* the kernels' contract: a row that sees no key has lse -inf */
            for (int64_t i = 0; i < a->B * a->H * a->L; i++) ((float *)untag(a->lse))[i] = -INFINITY;
        r = attn_fake_store(a->out, a->dtype, a->so, out);
    }
    Py_XDECREF(q);
    Py_XDECREF(k);
    Py_XDECREF(v);
    Py_XDECREF(out);
    return fake_done(r, "attention forward failed");
}

static int fake_attention_backward(int dev, const EmCudaAttention *a) {
    fused_calls[10]++;
    if (a->dtype != EM_FLOAT16 && a->dtype != EM_BFLOAT16 && a->dtype != EM_FLOAT32)
        return fake_fail("attention backward: dtype is not float16, bfloat16 or float32");
    EmAttn p = attn_fake_problem(a);
    EmAttnOperand go, oo;
    EmTensor *t[8] = {NULL};
    int r = -1;
    const int64_t qs[4] = {a->B, a->H, a->L, a->D}, ks[4] = {a->B, a->Hkv, a->S, a->D};
    const int64_t cq[3] = {a->H * a->L * a->D, a->L * a->D, a->D}, ck[3] = {a->Hkv * a->S * a->D, a->S * a->D, a->D};
    if (!(t[0] = attn_fake_f32(a->q, a->dtype, a->B, a->H, a->L, a->D, a->sq, &p.q)) ||
        !(t[1] = attn_fake_f32(a->k, a->dtype, a->B, a->Hkv, a->S, a->D, a->sk, &p.k)) ||
        !(t[2] = attn_fake_f32(a->v, a->dtype, a->B, a->Hkv, a->S, a->D, a->sv, &p.v)) ||
        !(t[3] = attn_fake_f32(a->out, a->dtype, a->B, a->H, a->L, a->D, a->so, &oo)) ||
        !(t[4] = attn_fake_f32(a->dout, a->dtype, a->B, a->H, a->L, a->D, a->sdo, &go)) ||
        !(t[5] = host->zeros(4, qs, EM_FLOAT32, em_cpu())) || !(t[6] = host->zeros(4, ks, EM_FLOAT32, em_cpu())) ||
        !(t[7] = host->zeros(4, ks, EM_FLOAT32, em_cpu())))
        goto done;
    if (host->attention_backward(&p, &go, &oo, untag(a->lse), em_data(t[5]), em_data(t[6]), em_data(t[7])) < 0)
        goto done;
    if (attn_fake_store(a->dq, a->dtype, cq, t[5]) < 0 || attn_fake_store(a->dk, a->dtype, ck, t[6]) < 0 ||
        attn_fake_store(a->dv, a->dtype, ck, t[7]) < 0)
        goto done;
    r = 0;
done:
    for (int i = 0; i < 8; i++) Py_XDECREF(t[i]);
    return fake_done(r, "attention backward failed");
}

/* ---- more nn kernels on the fake (cudann; Note [CUDA nn more]): the same
 * Philox draws and the CPU kernels (cpu/softmax.c's NLL, cpu/poolnorm.c's
 * runs) on untagged pointers. Calls are counted by entry name in
 * ember._cuda_fake.counters(), so tests can tell the native path ran. */
#include "../cpu/poolnorm.h"
#include "../cpu/softmax.h"

static const char *nn_more_names[] = {"dropout", "nll_loss", "nll_loss_backward", "norm_runs_stats",
                                      "norm_runs_affine", "max_pool2d", "max_pool2d_backward", "avg_pool2d"};
enum { NN_MORE = sizeof nn_more_names / sizeof nn_more_names[0] };
static int64_t nn_more_calls[NN_MORE];

static int fake_dropout(int dev, int dtype, void *out, bool *mask, const void *in, int64_t numel, double keep,
                        double scale, uint64_t seed, uint64_t offset) {
    nn_more_calls[0]++;
    if (!em_is_float(dtype) || dtype == EM_BOOL) return fake_fail("dropout: unsupported dtype");
    char *o = untag(out);
    const char *x = untag(in);
    bool *m = untag(mask);
    int per = em_philox_per_block(EM_RANDOM_BERNOULLI, dtype, 0);
    for (int64_t j = 0; j * per < numel; j++) {
        EmPhilox4 w = em_philox_block(seed, offset, (uint64_t)j);
        for (int i = 0; i < per && j * per + i < numel; i++) {
            int64_t e = j * per + i, unused = 0;
            bool k = em_philox_value(w, i, EM_RANDOM_BERNOULLI, dtype, keep, 0, 0, 0, &unused) != 0;
            m[e] = k;
            if (dtype == EM_FLOAT64) {
                ((double *)o)[e] = (((const double *)x)[e] * (k ? 1.0 : 0.0)) * scale;
            } else if (dtype == EM_FLOAT32) {
                ((float *)o)[e] = (((const float *)x)[e] * (k ? 1.0f : 0.0f)) * (float)scale;
            } else {
                float v = (load_half(x, dtype, e) * (k ? 1.0f : 0.0f)) * (float)scale;
                ((uint16_t *)o)[e] = dtype == EM_FLOAT16 ? em_f32_to_f16(v) : em_f32_to_bf16(v);
            }
        }
    }
    return 0;
}

/* The CPU kernels' view of an NLL launch (Note [nll layout]); 1 with *bad
 * for a target out of range, as the GPU's device check. */
static int fake_nll_setup(EmNll *p, int dtype, const void *x, const int64_t *target, const void *weight, int64_t N,
                          int64_t C, int64_t inner, int64_t ignore, int64_t *bad) {
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("nll_loss: float32 or float64 expected");
    *p = (EmNll){x ? untag(x) : NULL, untag(target), weight ? untag(weight) : NULL, (EmDType)dtype, N, C, inner,
                 ignore};
    int64_t k = host->nll_check(p);
    if (k >= 0) *bad = p->t[k];
    return k >= 0 ? 1 : 0;
}

static int fake_nll_loss(int dev, int dtype, void *loss, const void *x, const int64_t *target, const void *weight,
                         int64_t N, int64_t C, int64_t inner, int64_t ignore, int reduction, double *work,
                         int64_t *bad) {
    nn_more_calls[1]++;
    EmNll p;
    int r = fake_nll_setup(&p, dtype, x, target, weight, N, C, inner, ignore, bad);
    if (r != 0) return r;
    double total, total_w;
    host->nll_forward(&p, reduction == 0 ? untag(loss) : NULL, &total, &total_w);
    if (reduction != 0) {
        double v = reduction == 1 ? total / total_w : total;
        if (dtype == EM_FLOAT64) *(double *)untag(loss) = v;
        else *(float *)untag(loss) = (float)v;
    }
    return 0;
}

static int fake_nll_loss_backward(int dev, int dtype, void *gi, const void *grad, const int64_t *target,
                                  const void *weight, int64_t N, int64_t C, int64_t inner, int64_t ignore,
                                  int reduction, double *work, int64_t *bad) {
    nn_more_calls[2]++;
    EmNll p;
    int r = fake_nll_setup(&p, dtype, NULL, target, weight, N, C, inner, ignore, bad);
    if (r != 0) return r;
    memset(untag(gi), 0, (size_t)(N * C * inner) * (size_t)em_itemsize((EmDType)dtype));
    double scale = 1.0;
    if (reduction == 1) { /* the kept weight (the forward's total_w, without reading x) */
        double tw = 0;
        for (int64_t k = 0; k < N * inner; k++)
            if (p.t[k] != ignore)
                tw += !p.w ? 1.0 : dtype == EM_FLOAT64 ? ((const double *)p.w)[p.t[k]] : ((const float *)p.w)[p.t[k]];
        scale = 1.0 / tw;
    }
    host->nll_backward(&p, untag(grad), reduction != 0, scale, untag(gi));
    return 0;
}

static int fake_norm_runs_stats(int dev, int dtype, const void *g, const void *x, int64_t R, int64_t S,
                                const double *center, double *out1, double *out2) {
    nn_more_calls[3]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("norm runs: float32 or float64 expected");
    if (g)
        host->runs_dot((EmDType)dtype, untag(g), untag(x), R, S, untag(center), untag(out1), untag(out2));
    else if (center)
        host->runs_centered_ss((EmDType)dtype, untag(x), R, S, untag(center), untag(out1));
    else
        host->runs_sum((EmDType)dtype, untag(x), R, S, untag(out1));
    return 0;
}

static int fake_norm_runs_affine(int dev, int dtype, void *y, const void *g, const void *x, int64_t R, int64_t S,
                                 const double *a, const double *b, const double *c) {
    nn_more_calls[4]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("norm runs: float32 or float64 expected");
    if (g)
        host->runs_affine2((EmDType)dtype, untag(g), untag(x), untag(y), R, S, untag(a), untag(b), untag(c));
    else
        host->runs_affine((EmDType)dtype, untag(x), untag(y), R, S, untag(b), untag(c));
    return 0;
}

static int fake_max_pool2d(int dev, int dtype, const EmCudaPool2d *g, const void *in, void *out, int64_t *idx) {
    nn_more_calls[5]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("max_pool2d: float32 or float64 expected");
    EmPool2d p = {g->planes, g->H, g->W, g->OH, g->OW, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw};
    if (p.planes * p.OH * p.OW > 0) host->max_pool2d(&p, (EmDType)dtype, untag(in), untag(out), untag(idx));
    return 0;
}

static int fake_max_pool2d_backward(int dev, int dtype, const EmCudaPool2d *g, const void *grad, const int64_t *idx,
                                    void *gi, int64_t *work, int64_t *bad) {
    nn_more_calls[6]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("max_pool2d: float32 or float64 expected");
    EmPool2d p = {g->planes, g->H, g->W, g->OH, g->OW, 1, 1, 1, 1, 0, 0, 1, 1};
    const int64_t *iv = untag(idx);
    for (int64_t k = 0; k < p.planes * p.OH * p.OW; k++)
        if (iv[k] < 0 || iv[k] >= p.H * p.W) {
            *bad = iv[k];
            return 1;
        }
    memset(untag(gi), 0, (size_t)(p.planes * p.H * p.W) * (size_t)em_itemsize((EmDType)dtype));
    host->max_pool2d_backward(&p, (EmDType)dtype, untag(grad), iv, untag(gi));
    return 0;
}

static int fake_avg_pool2d(int dev, int dtype, int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW,
                           const int64_t *win, const double *div, const void *in, void *out, bool backward) {
    nn_more_calls[7]++;
    if (dtype != EM_FLOAT32 && dtype != EM_FLOAT64) return fake_fail("avg_pool2d: float32 or float64 expected");
    const int64_t *w = untag(win);
    EmAvgPool p = {planes, H, W, OH, OW, w, w + OH, w + 2 * OH, w + 2 * OH + OW, untag(div)};
    if (backward) memset(untag(out), 0, (size_t)(planes * H * W) * (size_t)em_itemsize((EmDType)dtype));
    if (planes * OH * OW == 0) return 0;
    if (backward) host->avg_pool2d_backward(&p, (EmDType)dtype, untag(in), untag(out));
    else host->avg_pool2d(&p, (EmDType)dtype, untag(in), untag(out));
    return 0;
}

/* ---- attention with the extras (cudaattn2) on the fake: EmCudaAttentionEx's
 * mask, dropout (the kernels' Philox bits) and layouts in plain float64 loops
 * over float32 copies of the operands (the CPU kernel takes neither dropout
 * nor these layouts). Row (b, h, i): s_j = scale q.k_j + mask, p = softmax(s),
 * out = sum_j p_j z_j v_j with z the dropout factor; the backward recomputes p
 * from the saved lse, as the kernels. */
typedef struct {
    const EmCudaAttentionEx *x;
    const float *q, *k, *v, *mask; /* contiguous float32; mask [B, H, L, S] or NULL */
} AttnFakeEx;

static double attn_fake_drop(const EmCudaAttentionEx *x, int64_t bh, int64_t i, int64_t j) {
    if (!(x->dropout_p > 0)) return 1.0;
    const uint64_t idx = ((uint64_t)bh * (uint64_t)x->a.L + (uint64_t)i) * (uint64_t)x->a.S + (uint64_t)j;
    EmPhilox4 w = em_philox_block(x->seed, x->offset, idx >> 2);
    const double keep = 1.0 - x->dropout_p;
    return (double)em_philox_u01f(w.v[idx & 3]) < keep ? 1.0 / keep : 0.0;
}

/* the scores of row (b, h, i) into s[S] (-inf where no part) */
static void attn_fake_scores(const AttnFakeEx *f, int64_t b, int64_t h, int64_t i, double *s) {
    const EmCudaAttention *a = &f->x->a;
    const int64_t hk = h / (a->H / a->Hkv);
    const float *qr = f->q + ((b * a->H + h) * a->L + i) * a->D;
    for (int64_t j = 0; j < a->S; j++) {
        const float *kr = f->k + ((b * a->Hkv + hk) * a->S + j) * a->D;
        double d = 0;
        for (int64_t e = 0; e < a->D; e++) d += (double)qr[e] * kr[e];
        s[j] = d * a->scale;
        if (a->causal && j > i) s[j] = -INFINITY;
        else if (f->mask) {
            double mv = f->mask[((b * a->H + h) * a->L + i) * a->S + j];
            s[j] = f->x->mask_kind == 1 ? (mv != 0 ? s[j] : -INFINITY) : s[j] + mv;
        }
    }
}

/* the float32 [B, H, L, S] copy of the mask (bool: 0 / 1), or NULL on error */
static EmTensor *attn_fake_mask(const EmCudaAttentionEx *x) {
    const EmCudaAttention *a = &x->a;
    const int64_t sizes[4] = {a->B, a->H, a->L, a->S};
    const int dt = x->mask_kind == 1 ? EM_BOOL : a->dtype;
    int64_t ext;
    if (host->extent_checked(4, sizes, x->sm, &ext) < 0) return NULL;
    EmTensor *t = host->host_view(untag(x->mask), (ext ? ext : 1) * em_itemsize((EmDType)dt), 0, 4, sizes, x->sm,
                                  (EmDType)dt);
    EmTensor *f = t ? host->to_dtype(t, EM_FLOAT32, true) : NULL;
    EmTensor *c = f ? host->contiguous(f) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(f);
    return c;
}

/* operands 0..2 = q, k, v (+ 3 = mask) as float32 copies; 0 / -1 */
static int attn_fake_ex_load(const EmCudaAttentionEx *x, AttnFakeEx *f, EmTensor **t) {
    const EmCudaAttention *a = &x->a;
    f->x = x;
    if (!(t[0] = attn_fake_f32(a->q, a->dtype, a->B, a->H, a->L, a->D, a->sq, NULL)) ||
        !(t[1] = attn_fake_f32(a->k, a->dtype, a->B, a->Hkv, a->S, a->D, a->sk, NULL)) ||
        !(t[2] = attn_fake_f32(a->v, a->dtype, a->B, a->Hkv, a->S, a->D, a->sv, NULL)))
        return -1;
    if (x->mask_kind && !(t[3] = attn_fake_mask(x))) return -1;
    f->q = (const float *)em_data(t[0]), f->k = (const float *)em_data(t[1]), f->v = (const float *)em_data(t[2]);
    f->mask = x->mask_kind ? (const float *)em_data(t[3]) : NULL;
    return 0;
}

static int attn_fake_ex_check(const EmCudaAttentionEx *x) {
    const EmCudaAttention *a = &x->a;
    if (a->dtype != EM_FLOAT16 && a->dtype != EM_BFLOAT16 && a->dtype != EM_FLOAT32)
        return fake_fail("attention: dtype is not float16, bfloat16 or float32");
    if (a->D < 1 || a->D > 256) return fake_fail("attention: head dim outside [1, 256]");
    if (a->Hkv < 1 || a->H % a->Hkv) return fake_fail("attention: key/value heads do not divide the query heads");
    if (x->mask_kind < 0 || x->mask_kind > 2 || (x->mask_kind && !x->mask)) return fake_fail("attention: bad mask kind");
    if (!(x->dropout_p >= 0 && x->dropout_p <= 1)) return fake_fail("attention: dropout probability outside [0, 1]");
    if (x->lse_ld < a->L) return fake_fail("attention: lse row stride < L");
    return 0;
}

static int fake_attention_forward_ex(int dev, const EmCudaAttentionEx *x) {
    fused_calls[11]++;
    (void)dev;
    if (attn_fake_ex_check(x) < 0) return -1;
    const EmCudaAttention *a = &x->a;
    if (a->B * a->H * a->L == 0) return 0;
    AttnFakeEx f;
    EmTensor *t[5] = {NULL};
    double *s = malloc(sizeof(double) * (size_t)(a->S ? a->S : 1));
    int r = -1;
    const int64_t os[4] = {a->B, a->H, a->L, a->D};
    if (!s || attn_fake_ex_load(x, &f, t) < 0 || !(t[4] = host->zeros(4, os, EM_FLOAT32, em_cpu()))) goto done;
    float *out = (float *)em_data(t[4]), *lse = untag(a->lse);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++)
            for (int64_t i = 0; i < a->L; i++) {
                const int64_t bh = b * a->H + h, hk = h / (a->H / a->Hkv);
                attn_fake_scores(&f, b, h, i, s);
                double m = -INFINITY, l = 0;
                for (int64_t j = 0; j < a->S; j++) m = s[j] > m ? s[j] : m;
                if (m == -INFINITY) {
                    lse[bh * x->lse_ld + i] = -INFINITY;
                    continue;
                }
                for (int64_t j = 0; j < a->S; j++) l += exp(s[j] - m);
                lse[bh * x->lse_ld + i] = (float)(m + log(l));
                float *o = out + (bh * a->L + i) * a->D;
                for (int64_t j = 0; j < a->S; j++) {
                    const double pz = exp(s[j] - m) / l * attn_fake_drop(x, bh, i, j);
                    const float *vr = f.v + ((b * a->Hkv + hk) * a->S + j) * a->D;
                    if (pz != 0)
                        for (int64_t e = 0; e < a->D; e++) o[e] += (float)(pz * vr[e]);
                }
            }
    r = attn_fake_store(a->out, a->dtype, a->so, t[4]);
done:
    for (int i = 0; i < 5; i++) Py_XDECREF(t[i]);
    free(s);
    return fake_done(r, "attention forward failed");
}

static int fake_attention_backward_ex(int dev, const EmCudaAttentionEx *x) {
    fused_calls[12]++;
    (void)dev;
    if (attn_fake_ex_check(x) < 0) return -1;
    const EmCudaAttention *a = &x->a;
    AttnFakeEx f;
    EmTensor *t[9] = {NULL};
    double *s = malloc(sizeof(double) * (size_t)(a->S ? a->S : 1));
    int r = -1;
    const int64_t qs[4] = {a->B, a->H, a->L, a->D}, ks[4] = {a->B, a->Hkv, a->S, a->D};
    if (!s || attn_fake_ex_load(x, &f, t) < 0 ||
        !(t[4] = attn_fake_f32(a->out, a->dtype, a->B, a->H, a->L, a->D, a->so, NULL)) ||
        !(t[5] = attn_fake_f32(a->dout, a->dtype, a->B, a->H, a->L, a->D, a->sdo, NULL)) ||
        !(t[6] = host->zeros(4, qs, EM_FLOAT32, em_cpu())) || !(t[7] = host->zeros(4, ks, EM_FLOAT32, em_cpu())) ||
        !(t[8] = host->zeros(4, ks, EM_FLOAT32, em_cpu())))
        goto done;
    const float *out = (const float *)em_data(t[4]), *g = (const float *)em_data(t[5]);
    const float *lse = a->B * a->H * a->L != 0 ? untag(a->lse) : NULL;
    float *dq = (float *)em_data(t[6]), *dk = (float *)em_data(t[7]), *dv = (float *)em_data(t[8]);
    for (int64_t b = 0; b < a->B; b++)
        for (int64_t h = 0; h < a->H; h++)
            for (int64_t i = 0; i < a->L; i++) {
                const int64_t bh = b * a->H + h, hk = h / (a->H / a->Hkv);
                const double l = lse[bh * x->lse_ld + i];
                const float *gi = g + (bh * a->L + i) * a->D, *oi = out + (bh * a->L + i) * a->D;
                const float *qi = f.q + (bh * a->L + i) * a->D;
                double Di = 0;
                for (int64_t e = 0; e < a->D; e++) Di += (double)gi[e] * oi[e];
                attn_fake_scores(&f, b, h, i, s);
                for (int64_t j = 0; j < a->S; j++) {
                    const double p = l == -INFINITY ? 0.0 : exp(s[j] - l);
                    if (p == 0) continue;
                    const int64_t kr = ((b * a->Hkv + hk) * a->S + j) * a->D;
                    const double z = attn_fake_drop(x, bh, i, j);
                    double dp = 0;
                    for (int64_t e = 0; e < a->D; e++) dp += (double)gi[e] * f.v[kr + e];
                    const double ds = p * (z * dp - Di);
                    for (int64_t e = 0; e < a->D; e++) {
                        dq[(bh * a->L + i) * a->D + e] += (float)(a->scale * ds * f.k[kr + e]);
                        dk[kr + e] += (float)(a->scale * ds * qi[e]);
                        dv[kr + e] += (float)(p * z * gi[e]);
                    }
                }
            }
    r = attn_fake_store(a->dq, a->dtype, x->sdq, t[6]) < 0 || attn_fake_store(a->dk, a->dtype, x->sdk, t[7]) < 0 ||
                attn_fake_store(a->dv, a->dtype, x->sdv, t[8]) < 0
            ? -1
            : 0;
done:
    for (int i = 0; i < 9; i++) Py_XDECREF(t[i]);
    free(s);
    return fake_done(r, "attention backward failed");
}

/* the cudamisc and cudaconv entries (randperm, unique along a dim, the bias
 * epilogue, im2col / col2im, upsampling) */
#include "cuda_fake_more.h"

/* ember._cuda_fake.counters(): {"reduce", "index", "shape": launches,
 * "record_stream": calls} since the fake was switched on, and the calls of
 * cudann's, cudamisc's and cudaconv's entries by name. */
static PyObject *fake_counters(PyObject *m, PyObject *unused) {
    PyObject *d = Py_BuildValue("{s:L,s:L,s:L,s:L}", "reduce", (long long)reduce_launches, "index",
                                (long long)index_launches, "shape", (long long)shape_launches, "record_stream",
                                (long long)record_stream_calls);
    if (d && (put_counts(d, nn_more_names, nn_more_calls, NN_MORE) < 0 ||
              put_counts(d, misc_names, misc_calls, MISC_N) < 0 || put_counts(d, conv_names, conv_calls, NCONV) < 0))
        Py_CLEAR(d);
    return d;
}

static const EmCudaBackend fake = {
    .abi = EM_CUDA_ABI,
    .name = "fake",
    .last_error = fake_last_error,
    .device_count = fake_device_count,
    .current_device = fake_current_device,
    .set_device = fake_set_device,
    .device_props = fake_device_props,
    .synchronize = fake_synchronize,
    .alloc = fake_alloc,
    .free = fake_free,
    .memory_stats = fake_memory_stats,
    .reset_peak_stats = fake_reset_peak,
    .empty_cache = fake_empty_cache,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
    .memcpy = fake_memcpy,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_synchronize = fake_stream_sync,
    .stream_query = fake_stream_query,
    .current_stream = fake_current_stream,
    .set_current_stream = fake_set_current_stream,
    .stream_wait_event = fake_stream_wait_event,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .event_synchronize = fake_event_sync,
    .event_query = fake_event_query,
    .event_elapsed_ms = fake_event_elapsed,
    .copy_strided = fake_copy_strided,
    .gemm = fake_gemm,
    .has_elementwise = fake_has_elementwise,
    .elementwise = fake_elementwise,
    .random_fill = fake_random_fill,
    .softmax = fake_softmax,
    .softmax_backward = fake_softmax_backward,
    .layer_norm = fake_layer_norm,
    .layer_norm_backward = fake_layer_norm_backward,
    .cross_entropy = fake_cross_entropy,
    .cross_entropy_backward = fake_cross_entropy_backward,
    .adam = fake_adam,
    .embedding = fake_embedding,
    .embedding_backward = fake_embedding_backward,
    .has_reduce = fake_has_reduce,
    .reduce = fake_reduce,
    .record_stream = fake_record_stream,
    .index_offsets = fake_index_offsets,
    .index_gather = fake_index_gather,
    .index_put = fake_index_put,
    .scatter_gather = fake_scatter_gather,
    .nonzero_scan = fake_nonzero_scan,
    .nonzero_fill = fake_nonzero_fill,
    /* sort and scan (cudasort) */
    .sort_rows = fake_sort_rows,
    .select_rows = fake_select_rows,
    .scan = fake_scan,
    .search = fake_search,
    .unique = fake_unique,
    /* shape kernels (cudashape) */
    .arange_fill = fake_arange_fill,
    .linspace_fill = fake_linspace_fill,
    .tri_mask = fake_tri_mask,
    .repeat_interleave = fake_repeat_interleave,
    /* attention (cudaattn) */
    .attention_forward = fake_attention_forward,
    .attention_backward = fake_attention_backward,
    /* more nn kernels (cudann) */
    .dropout = fake_dropout,
    .nll_loss = fake_nll_loss,
    .nll_loss_backward = fake_nll_loss_backward,
    .norm_runs_stats = fake_norm_runs_stats,
    .norm_runs_affine = fake_norm_runs_affine,
    .max_pool2d = fake_max_pool2d,
    .max_pool2d_backward = fake_max_pool2d_backward,
    .avg_pool2d = fake_avg_pool2d,
    /* attention, dropout and efficient path (cudaattn2) */
    .attention_forward_ex = fake_attention_forward_ex,
    .attention_backward_ex = fake_attention_backward_ex,
    /* misc fallbacks and epilogues (cudamisc) */
    .randperm = fake_randperm,
    .unique_dim = fake_unique_dim,
    .gemm_bias = fake_gemm_bias,
    /* convolution and upsampling (cudaconv) */
    .im2col = fake_im2col,
    .col2im = fake_col2im,
    .interp_nearest = fake_interp_nearest,
    .interp = fake_interp,
    .mem_get_info = fake_mem_get_info,
};

/* ember._cuda_fake.reset(): every device, counter and stream back to its
 * start, and EMBER_FAKE_CUDA_KERNELS read again; the tests call it each time
 * they switch the fake on (tests/cuda_common.py). */
static void reset_state(void) {
    current = 0;
    memset(stats, 0, sizeof stats);
    memset(current_streams, 0, sizeof current_streams);
    memset(fused_calls, 0, sizeof fused_calls);
    fake_load_host_kernels();
    reduce_launches = 0;
    index_launches = 0;
    record_stream_calls = 0;
    shape_launches = 0;
    memset(nn_more_calls, 0, sizeof nn_more_calls);
    memset(misc_calls, 0, sizeof misc_calls);
}
static PyObject *fake_reset(PyObject *m, PyObject *unused) {
    reset_state();
    Py_RETURN_NONE;
}

static PyMethodDef fake_methods[] = {
    {"reset", fake_reset, METH_NOARGS, NULL},
    {"kernel_calls", fake_kernel_calls, METH_NOARGS, NULL},
    {"counters", fake_counters, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fake_module = {PyModuleDef_HEAD_INIT, "ember._cuda_fake",
                                         "The CUDA test double (Note [fake CUDA]).", -1, fake_methods};

PyMODINIT_FUNC PyInit__cuda_fake(void) {
    host = PyCapsule_Import(EM_HOST_API_CAPSULE, 0);
    if (!host) return NULL;
    if (host->abi != EM_HOST_API_ABI) {
        PyErr_Format(PyExc_ImportError, "ember._cuda_fake was built for another ember._C (host API %d, core %d); "
                     "rebuild ember", EM_HOST_API_ABI, host->abi);
        return NULL;
    }
    em_fake_dtype_info = host->dtype_info;
    reset_state();
    PyObject *m = PyModule_Create(&fake_module);
    if (!m) return NULL;
    PyObject *cap = PyCapsule_New((void *)&fake, "ember._cuda_fake._backend", NULL);
    if (!cap || PyModule_AddObject(m, "_backend", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
