/* lowp_gemm.c — bfloat16 / float16 matrix products through oneDNN's matmul
 * primitive, with libdnnl dlopen'ed at run time (no build or link
 * dependency).
 *
 * Note [low-precision GEMM]: without a library, a half-precision product
 * copies both operands to float32, runs sgemm and rounds C back (the
 * "convert" path in ops/linalg.c). oneDNN multiplies bf16 (and fp16) on the
 * CPU's own instructions (AVX512-BF16, AMX, AVX512-FP16) with float32
 * accumulators and rounds once into C, as torch does — torch's CPU
 * matmuls use the same library, linked in. We take any oneDNN 3.x (the C
 * API below is stable across 3.x): EMBER_LOWP_GEMM_LIB names the file,
 * else <sys.prefix>/lib/libdnnl.so.3 (where pip's onednn wheels put it;
 * the user base's lib/ for `pip install --user`), else the loader's search
 * path. At load the library must build a small matmul for each dtype;
 * one it refuses (fp16 on a CPU without FP16 instructions) stays on the
 * convert path, and so, unless the mode is "library", does one it gives
 * only to its slow reference kernel. EMBER_LOWP_GEMM=convert forces the
 * convert path, =library makes a missing library an error, so a machine
 * can test both.
 *
 * Why oneDNN and not MKL's cblas_gemm_bf16bf16f32: MKL does not use the
 * BF16 instructions of AMD CPUs (27-49 GFLOP/s for a 1024^3 bf16 product
 * on an AVX512-BF16 EPYC core, where oneDNN makes 243) and installs ~1 GB
 * with its OpenMP runtime; pip's onednn-cpu-gomp is ~160 MB, needs nothing
 * else, and its GNU OpenMP threads are ember's own team.
 *
 * Threads as for sgemm (Note [GEMM threads]): products up to
 * EM_BLAS_SINGLE_THREAD_MNK, and those a caller already runs in parallel,
 * run on one thread; bigger ones on ember's team, through oneDNN's own
 * split. Primitives are cached by shape and thread count (oneDNN generates
 * code per shape, ~1 ms); each thread has its own stream. A shape the
 * library refuses at run time is computed by conversion here, so a caller
 * never sees a failure but a lack of memory. */
#include "lowp_gemm.h"
#include "blas.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the part of oneDNN's C API (v3) we use, declared here */
typedef struct dnnl_opaque *dnnl_handle;
typedef int dnnl_status;
enum { DNNL_OK = 0, DNNL_CPU = 1, DNNL_STREAM_IN_ORDER = 1, DNNL_F16 = 1, DNNL_BF16 = 2, DNNL_F32 = 3,
       DNNL_DT_UNDEF = 0, DNNL_ELTWISE_LINEAR = 38, DNNL_QUERY_IMPL_INFO_STR = 8, DNNL_ARG_SRC = 1,
       DNNL_ARG_DST = 17, DNNL_ARG_WEIGHTS = 33 };
typedef struct {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_info;
typedef struct {
    int arg;
    dnnl_handle memory;
} dnnl_exec_arg;

static struct {
    dnnl_status (*engine_create)(dnnl_handle *, int, size_t);
    dnnl_status (*stream_create)(dnnl_handle *, dnnl_handle, unsigned);
    dnnl_status (*md_create_with_strides)(dnnl_handle *, int, const int64_t *, int, const int64_t *);
    dnnl_status (*md_destroy)(dnnl_handle);
    dnnl_status (*matmul_pd_create)(dnnl_handle *, dnnl_handle, dnnl_handle, dnnl_handle, dnnl_handle, dnnl_handle,
                                    dnnl_handle);
    dnnl_status (*pd_query)(dnnl_handle, int, int, void *);
    dnnl_status (*pd_destroy)(dnnl_handle);
    dnnl_status (*primitive_create)(dnnl_handle *, dnnl_handle);
    dnnl_status (*primitive_destroy)(dnnl_handle);
    dnnl_status (*primitive_execute)(dnnl_handle, dnnl_handle, int, const dnnl_exec_arg *);
    dnnl_status (*memory_create)(dnnl_handle *, dnnl_handle, dnnl_handle, void *);
    dnnl_status (*memory_destroy)(dnnl_handle);
    dnnl_status (*stream_wait)(dnnl_handle);
    dnnl_status (*attr_create)(dnnl_handle *);
    dnnl_status (*attr_destroy)(dnnl_handle);
    dnnl_status (*attr_set_post_ops)(dnnl_handle, dnnl_handle);
    dnnl_status (*post_ops_create)(dnnl_handle *);
    dnnl_status (*post_ops_destroy)(dnnl_handle);
    dnnl_status (*post_ops_append_sum)(dnnl_handle, float, int32_t, int);
    dnnl_status (*post_ops_append_eltwise)(dnnl_handle, int, float, float);
    const dnnl_version_info *(*version)(void);
} dn;

/* ---- state; written only under the GIL (prepare, set_mode), read by any thread after */
static EmLowpMode mode = EM_LOWP_AUTO;
static bool mode_read;          /* EMBER_LOWP_GEMM looked at */
static int load_state;          /* 0 not tried, 1 loaded, -1 failed */
static char load_error[1536], lib_path[1024], impl_name[2][128];
static bool dtype_ok[2];        /* [0] bfloat16, [1] float16: the library builds a fast kernel */
static dnnl_handle engine;
static _Atomic int failures, lib_failures; /* no memory for a conversion; the library's execute failed */
static bool refuse_all; /* tests: act as if the library refused every shape */
static _Atomic long long calls; /* products the library ran (tests check the path taken) */

static int slot(EmDType d) { return d == EM_BFLOAT16 ? 0 : 1; }

static void set_error(const char *fmt, const char *a, const char *b) {
    snprintf(load_error, sizeof load_error, fmt, a, b);
}

static void *try_open(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        snprintf(lib_path, sizeof lib_path, "%s", path);
    } else { /* each failure, one after another: the error says what was tried */
        size_t used = strlen(load_error);
        snprintf(load_error + used, sizeof load_error - used, "%s%s", used ? "; " : "", dlerror());
    }
    return h;
}

/* <dir>/lib/libdnnl.so.3 for dir = sys.prefix (which == 0) or site.getuserbase()
 * (which == 1: `pip install --user`); "" when there is none */
static void prefix_lib(int which, char *buf, size_t len) {
    buf[0] = 0;
    PyObject *p = NULL;
    if (which == 0) {
        p = Py_XNewRef(PySys_GetObject("prefix"));
    } else {
        PyObject *site = PyImport_ImportModule("site");
        if (site) p = PyObject_CallMethod(site, "getuserbase", NULL);
        Py_XDECREF(site);
    }
    const char *s = p && PyUnicode_Check(p) ? PyUnicode_AsUTF8(p) : NULL;
    if (s) snprintf(buf, len, "%s/lib/libdnnl.so.3", s);
    Py_XDECREF(p);
    PyErr_Clear();
}

/* One product as the library sees it: `batch` matrices (1: plain 2-D
 * descriptors) whose first elements are sa / sb / sc elements apart (0: one
 * matrix shared by the whole batch); nt: the threads it runs on. */
typedef struct {
    EmDType d;
    bool ta, tb;
    int nt;
    int64_t batch, m, n, k, lda, ldb, ldc, sa, sb, sc;
    float alpha, beta;
} Shape;

static bool same_shape(const Shape *x, const Shape *y) {
    return x->d == y->d && x->ta == y->ta && x->tb == y->tb && x->nt == y->nt && x->batch == y->batch &&
           x->m == y->m && x->n == y->n && x->k == y->k && x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc &&
           x->sa == y->sa && x->sb == y->sb && x->sc == y->sc && x->alpha == y->alpha && x->beta == y->beta;
}

/* A's, B's and C's descriptors (all NULL or all set) */
static bool make_mds(const Shape *s, dnnl_handle md[3]) {
    const int dt = s->d == EM_BFLOAT16 ? DNNL_BF16 : DNNL_F16;
    /* one matrix each: rows x cols with row stride (or column stride when transposed) ld */
    const int64_t rows[3] = {s->m, s->k, s->m}, cols[3] = {s->k, s->n, s->n}, ld[3] = {s->lda, s->ldb, s->ldc};
    const bool tr[3] = {s->ta, s->tb, false};
    const int64_t bs[3] = {s->sa, s->sb, s->sc};
    md[0] = md[1] = md[2] = NULL;
    for (int i = 0; i < 3; i++) {
        int64_t dims[3], strides[3];
        int nd = s->batch > 1 ? 3 : 2, o = nd - 2;
        dims[o] = rows[i], dims[o + 1] = cols[i];
        strides[o] = tr[i] ? 1 : ld[i], strides[o + 1] = tr[i] ? ld[i] : 1;
        if (nd == 3) { /* a shared operand: a batch of one, broadcast */
            dims[0] = bs[i] ? s->batch : 1;
            strides[0] = bs[i] ? bs[i] : (tr[i] ? cols[i] : rows[i]) * ld[i];
        }
        if (dn.md_create_with_strides(&md[i], nd, dims, dt, strides) != DNNL_OK) {
            for (int j = 0; j < 3; j++)
                if (md[j]) dn.md_destroy(md[j]), md[j] = NULL;
            return false;
        }
    }
    return true;
}

/* The matmul primitive for a shape (row-major C), post-ops for alpha and
 * beta: C = linear(alpha)(A B) + beta * C. *impl (when given) gets the
 * implementation's name. NULL when the library refuses it. */
static dnnl_handle make_primitive(const Shape *s, char *impl, size_t implen) {
    dnnl_handle md[3], attr = NULL, po = NULL, pd = NULL, prim = NULL;
    if (!make_mds(s, md)) return NULL;
    if (s->alpha != 1 || s->beta != 0) {
        if (dn.attr_create(&attr) != DNNL_OK || dn.post_ops_create(&po) != DNNL_OK) goto done;
        if (s->alpha != 1 && dn.post_ops_append_eltwise(po, DNNL_ELTWISE_LINEAR, s->alpha, 0.0f) != DNNL_OK) goto done;
        if (s->beta != 0 && dn.post_ops_append_sum(po, s->beta, 0, DNNL_DT_UNDEF) != DNNL_OK) goto done;
        if (dn.attr_set_post_ops(attr, po) != DNNL_OK) goto done;
    }
    if (dn.matmul_pd_create(&pd, engine, md[0], md[1], NULL, md[2], attr) != DNNL_OK) goto done;
    if (impl) {
        const char *name = NULL;
        if (dn.pd_query(pd, DNNL_QUERY_IMPL_INFO_STR, 0, &name) == DNNL_OK && name) snprintf(impl, implen, "%s", name);
    }
    if (dn.primitive_create(&prim, pd) != DNNL_OK) prim = NULL;
done:
    if (pd) dn.pd_destroy(pd);
    if (po) dn.post_ops_destroy(po);
    if (attr) dn.attr_destroy(attr);
    for (int i = 0; i < 3; i++) dn.md_destroy(md[i]);
    return prim;
}

#define SYM(field, name)                                                     \
    if (!(*(void **)&dn.field = dlsym(h, name))) {                           \
        set_error("%s has no %s (not a oneDNN 3.x library)", lib_path, name); \
        goto fail;                                                           \
    }

/* With the GIL, once. */
static void load(void) {
    load_state = -1;
    load_error[0] = 0;
    void *h = NULL;
    const char *env = getenv("EMBER_LOWP_GEMM_LIB");
    char pref[1024];
    if (env && env[0]) {
        h = try_open(env);
    } else {
        for (int which = 0; which < 2 && !h; which++) {
            prefix_lib(which, pref, sizeof pref);
            if (pref[0]) h = try_open(pref);
        }
        if (!h) h = try_open("libdnnl.so.3");
    }
    if (!h) return;
    load_error[0] = 0;
    SYM(engine_create, "dnnl_engine_create")
    SYM(stream_create, "dnnl_stream_create")
    SYM(md_create_with_strides, "dnnl_memory_desc_create_with_strides")
    SYM(md_destroy, "dnnl_memory_desc_destroy")
    SYM(matmul_pd_create, "dnnl_matmul_primitive_desc_create")
    SYM(pd_query, "dnnl_primitive_desc_query")
    SYM(pd_destroy, "dnnl_primitive_desc_destroy")
    SYM(primitive_create, "dnnl_primitive_create")
    SYM(primitive_destroy, "dnnl_primitive_destroy")
    SYM(primitive_execute, "dnnl_primitive_execute")
    SYM(memory_create, "dnnl_memory_create")
    SYM(memory_destroy, "dnnl_memory_destroy")
    SYM(stream_wait, "dnnl_stream_wait")
    SYM(attr_create, "dnnl_primitive_attr_create")
    SYM(attr_destroy, "dnnl_primitive_attr_destroy")
    SYM(attr_set_post_ops, "dnnl_primitive_attr_set_post_ops")
    SYM(post_ops_create, "dnnl_post_ops_create")
    SYM(post_ops_destroy, "dnnl_post_ops_destroy")
    SYM(post_ops_append_sum, "dnnl_post_ops_append_sum")
    SYM(post_ops_append_eltwise, "dnnl_post_ops_append_eltwise")
    SYM(version, "dnnl_version")
    const dnnl_version_info *v = dn.version();
    if (!v || v->major != 3) {
        char ver[32];
        snprintf(ver, sizeof ver, "%d", v ? v->major : -1);
        set_error("%s is oneDNN %s.x; ember speaks oneDNN 3.x's C API", lib_path, ver);
        goto fail;
    }
    dnnl_status st = dn.engine_create(&engine, DNNL_CPU, 0);
    if (st != DNNL_OK) {
        /* the SYCL builds (pip's `onednn`) need Intel's OpenCL CPU runtime registered for a CPU engine */
        set_error("%s: no CPU engine (dnnl_engine_create failed%s)", lib_path,
                  v->cpu_runtime == 512u ? "; a SYCL build of oneDNN: use onednn-cpu-gomp" : "");
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        EmDType d = i == 0 ? EM_BFLOAT16 : EM_FLOAT16;
        impl_name[i][0] = 0;
        const Shape probe = {d, false, false, 1, 1, 64, 64, 64, 64, 64, 64, 0, 0, 0, 1.0f, 0.0f};
        dnnl_handle p = make_primitive(&probe, impl_name[i], sizeof impl_name[i]);
        dtype_ok[i] = p != NULL;
        if (p) dn.primitive_destroy(p);
    }
    load_state = 1;
    return;
fail:
    dlclose(h);
    lib_path[0] = 0;
}

static int read_mode(void) {
    const char *e = getenv("EMBER_LOWP_GEMM");
    mode_read = true;
    if (!e || !e[0] || !strcmp(e, "auto")) mode = EM_LOWP_AUTO;
    else if (!strcmp(e, "library")) mode = EM_LOWP_LIBRARY;
    else if (!strcmp(e, "convert")) mode = EM_LOWP_CONVERT;
    else {
        mode_read = false;
        PyErr_Format(PyExc_ValueError, "EMBER_LOWP_GEMM must be 'auto', 'library' or 'convert', got '%s'", e);
        return -1;
    }
    return 0;
}

/* a reference kernel ("ref:any") is far slower than converting to float32 */
static bool fast_impl(int i) { return strncmp(impl_name[i], "ref", 3) != 0; }

int em_lowp_gemm_prepare(EmDType d) {
    if (d != EM_BFLOAT16 && d != EM_FLOAT16) return 0;
    if (!mode_read && read_mode() < 0) return -1;
    if (mode == EM_LOWP_CONVERT) return 0;
    if (load_state == 0) load();
    if (load_state < 0) {
        if (mode != EM_LOWP_LIBRARY) return 0;
        PyErr_Format(PyExc_RuntimeError,
                     "EMBER_LOWP_GEMM=library, but oneDNN could not be loaded (pip install onednn-cpu-gomp, or "
                     "set EMBER_LOWP_GEMM_LIB to libdnnl.so.3): %s", load_error);
        return -1;
    }
    int i = slot(d);
    /* mode library takes any kernel the library has; auto only a fast one */
    return dtype_ok[i] && (mode == EM_LOWP_LIBRARY || fast_impl(i));
}

/* ---- the primitive cache */
typedef struct {
    bool used;
    Shape s;
    dnnl_handle prim; /* NULL: the library refused this shape */
    int busy;         /* executions in flight: not evicted while > 0 */
    uint64_t last;
} Entry;
enum { CACHE_SIZE = 256 };
static Entry cache[CACHE_SIZE];
static uint64_t clock_tick;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The entry for a shape, marked busy (NULL: the cache is full of busy ones) */
static Entry *lookup(const Shape *s) {
    pthread_mutex_lock(&cache_lock);
    Entry *hit = NULL, *victim = NULL;
    for (int i = 0; i < CACHE_SIZE && !hit; i++) {
        Entry *e = &cache[i];
        if (e->used && same_shape(&e->s, s)) hit = e;
        else if (!e->used) { if (!victim || victim->used) victim = e; }
        else if (e->busy == 0 && (!victim || (victim->used && e->last < victim->last))) victim = e;
    }
    if (!hit && victim) {
        if (victim->used && victim->prim) dn.primitive_destroy(victim->prim);
        *victim = (Entry){.used = true, .s = *s};
        victim->prim = make_primitive(s, NULL, 0);
        hit = victim;
    }
    if (hit) {
        hit->busy++;
        hit->last = ++clock_tick;
    }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

static void release(Entry *e) {
    pthread_mutex_lock(&cache_lock);
    e->busy--;
    pthread_mutex_unlock(&cache_lock);
}

static _Thread_local dnnl_handle tls_stream;
static dnnl_handle stream_for_thread(void) {
    if (!tls_stream && dn.stream_create(&tls_stream, engine, DNNL_STREAM_IN_ORDER) != DNNL_OK) tls_stream = NULL;
    return tls_stream;
}

/* C = alpha op(A) op(B) + beta C through float32 copies (a shape the library refused) */
static void gemm_by_conversion(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                               int64_t lda, const uint16_t *b, int64_t ldb, uint16_t *c, int64_t ldc, float alpha,
                               float beta) {
    /* at least one element each: k may be 0 */
    float *af = calloc((size_t)(m * k + 1), sizeof(float)), *bf = calloc((size_t)(k * n + 1), sizeof(float)),
          *cf = malloc((size_t)(m * n + 1) * sizeof(float));
    const bool bf16 = d == EM_BFLOAT16;
#define TO_F(x) (bf16 ? em_bf16_to_f32(x) : em_f16_to_f32(x))
    if (!af || !bf || !cf) {
        failures++;
        goto done;
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) af[i * k + p] = TO_F(ta ? a[p * lda + i] : a[i * lda + p]);
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) bf[p * n + j] = TO_F(tb ? b[j * ldb + p] : b[p * ldb + j]);
    if (beta != 0)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) cf[i * n + j] = TO_F(c[i * ldc + j]);
    EmScalar al = {'f', {.f = alpha}}, be = {'f', {.f = beta}};
    em_gemm_ex(EM_FLOAT32, false, false, m, n, k, af, k, bf, n, cf, n, al, be, false);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            c[i * ldc + j] = bf16 ? em_f32_to_bf16(cf[i * n + j]) : em_f32_to_f16(cf[i * n + j]);
#undef TO_F
done:
    free(af);
    free(bf);
    free(cf);
}

/* Runs one shape on the library: false when it did not (a refused shape,
 * no stream), C untouched then. */
static bool run_shape(const Shape *sh, const void *a, const void *b, void *c) {
    Entry *e = lookup(sh);
    dnnl_handle s = stream_for_thread(), md[3] = {NULL, NULL, NULL}, mem[3] = {NULL, NULL, NULL};
    bool ran = false;
    if (e && e->prim && s && !refuse_all && make_mds(sh, md)) {
        if (dn.memory_create(&mem[0], md[0], engine, (void *)a) == DNNL_OK &&
            dn.memory_create(&mem[1], md[1], engine, (void *)b) == DNNL_OK &&
            dn.memory_create(&mem[2], md[2], engine, c) == DNNL_OK) {
            dnnl_exec_arg args[3] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]}, {DNNL_ARG_DST, mem[2]}};
            ran = true; /* from here C may be written: a failure is reported, not retried */
            if (dn.primitive_execute(e->prim, s, 3, args) == DNNL_OK && dn.stream_wait(s) == DNNL_OK) calls++;
            else lib_failures++;
        }
        for (int i = 0; i < 3; i++) {
            if (mem[i]) dn.memory_destroy(mem[i]);
            dn.md_destroy(md[i]);
        }
    }
    if (e) release(e);
    return ran;
}

static void run_one(EmDType d, bool ta, bool tb, int nt, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                    const void *b, int64_t ldb, void *c, int64_t ldc, float alpha, float beta) {
    const Shape sh = {d, ta, tb, nt, 1, m, n, k, lda, ldb, ldc, 0, 0, 0, alpha, beta};
    if (!run_shape(&sh, a, b, c)) gemm_by_conversion(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
}

bool em_lowp_gemm_batched(EmDType d, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, const void *a,
                          int64_t lda, int64_t sa, const void *b, int64_t ldb, int64_t sb, void *c, int64_t ldc,
                          int64_t sc, float alpha, float beta) {
    if (load_state != 1 || !dtype_ok[slot(d)] || batch < 2 || m <= 0 || n <= 0 || k <= 0 || sc <= 0) return false;
    const double work = (double)batch * (double)m * (double)n * (double)k;
    int nt = work > EM_BLAS_SINGLE_THREAD_MNK ? em_num_threads : 1;
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    if (saved != nt) omp_set_num_threads(nt);
#endif
    const Shape sh = {d, ta, tb, nt, batch, m, n, k, lda, ldb, ldc, sa, sb, sc, alpha, beta};
    bool ran = run_shape(&sh, a, b, c);
#ifdef _OPENMP
    if (saved != nt) omp_set_num_threads(saved);
#endif
    return ran;
}

void em_lowp_gemm(EmDType d, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                  const void *b, int64_t ldb, void *c, int64_t ldc, float alpha, float beta, bool parallel) {
    if (m <= 0 || n <= 0) return;
    if (load_state != 1 || !dtype_ok[slot(d)] || k == 0) { /* a caller that did not ask em_lowp_gemm_prepare */
        gemm_by_conversion(d, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
        return;
    }
    const double mnk = (double)m * (double)n * (double)k;
    /* as for sgemm (Note [GEMM threads]): small products on one thread; the
     * library's own threads are ember's OpenMP team (a GNU OpenMP build) */
    int nt = parallel && mnk > EM_BLAS_SINGLE_THREAD_MNK ? em_num_threads : 1;
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    if (saved != nt) omp_set_num_threads(nt);
#endif
    /* Note [interrupts]: slabs of rows of about 2^32 multiply-adds, polled in between */
    const EmStop *stop = em_stop_current;
    int64_t step = m;
    if (stop && stop->on && mnk > 4294967296.0) {
        step = (int64_t)(4294967296.0 / ((double)n * (double)(k > 0 ? k : 1)));
        step = step < 16 ? 16 : step / 16 * 16;
    }
    const int64_t isz = 2;
    for (int64_t lo = 0; lo < m && !em_stop_now(stop); lo += step) {
        int64_t rows = m - lo < step ? m - lo : step;
        run_one(d, ta, tb, nt, rows, n, k, (const char *)a + (ta ? lo : lo * lda) * isz, lda, b, ldb,
                (char *)c + lo * ldc * isz, ldc, alpha, beta);
    }
#ifdef _OPENMP
    if (saved != nt) omp_set_num_threads(saved);
#endif
}

int em_lowp_gemm_take_failure(void) {
    int f = failures ? 1 : lib_failures ? 2 : 0;
    if (f) failures = lib_failures = 0;
    return f;
}

void em_lowp_gemm_status(EmLowpStatus *s) {
    s->mode = mode_read ? (int)mode : -1;
    s->loaded = load_state;
    s->path = lib_path;
    s->error = load_error;
    s->calls = calls;
    for (int i = 0; i < 2; i++) {
        s->dtype_ok[i] = load_state == 1 && dtype_ok[i];
        s->fast[i] = load_state == 1 && dtype_ok[i] && fast_impl(i);
        s->impl[i] = impl_name[i];
    }
    if (load_state == 1) {
        const dnnl_version_info *v = dn.version();
        snprintf(s->version, sizeof s->version, "%d.%d.%d", v->major, v->minor, v->patch);
    } else {
        s->version[0] = 0;
    }
}

int em_lowp_gemm_load_now(void) {
    if (!mode_read && read_mode() < 0) return -1;
    if (load_state == 0) load();
    return 0;
}

int em_lowp_gemm_set_mode(const char *m) {
    if (!strcmp(m, "auto")) mode = EM_LOWP_AUTO;
    else if (!strcmp(m, "library")) mode = EM_LOWP_LIBRARY;
    else if (!strcmp(m, "convert")) mode = EM_LOWP_CONVERT;
    else {
        PyErr_Format(PyExc_ValueError, "lowp GEMM mode must be 'auto', 'library' or 'convert', got '%s'", m);
        return -1;
    }
    mode_read = true;
    return 0;
}

void em_lowp_gemm_refuse_for_tests(bool on) { refuse_all = on; }
