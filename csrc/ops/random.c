/* random.c — random sampling: the in-place fills (uniform_, normal_,
 * bernoulli_, random_, exponential_), bernoulli/multinomial, and the random
 * factories (rand, randn, randint, randperm, normal, *_like). Values are
 * drawn in the order torch draws them (element by element in logical order,
 * torch's 16-wide Box-Muller for large contiguous normals) so seeded
 * programs see torch's numbers. */
#include "../ember.h"
#include "../cuda/philox.h"
#include <math.h>
#include <stdlib.h>

/* Mantissa bits torch's uniform uses per dtype. */
static int uniform_digits(EmDType d) {
    switch (d) {
    case EM_FLOAT64: return 53;
    case EM_FLOAT16: return 11;
    case EM_BFLOAT16: return 8;
    default: return 24;
    }
}

/* Run fill(buf, n) on t's elements in logical order: directly when t is
 * contiguous, else through a contiguous temporary and copy_. */
typedef int (*FillFn)(EmTensor *dst, void *ctx);
static int gpu_fill(EmTensor *t, FillFn fn, void *ctx);

/* Every fill's context starts with its generator (Range, Bern, IntRange):
 * an explicit one must be for the tensor's device type, as in torch. (No
 * generator= gives the CPU default, which stands for the device's own on a
 * GPU.) */
static int check_generator(const EmTensor *t, void *ctx) {
    EmGenerator *g = *(EmGenerator **)ctx;
    EmDevice gd = em_generator_device(g), td = em_device(t);
    if (g == em_default_generator() || gd.type == td.type) return 0;
    PyErr_Format(PyExc_RuntimeError, "Expected a '%s' device type for generator but found '%s'",
                 td.type == EM_CPU ? "cpu" : "cuda", gd.type == EM_CPU ? "cpu" : "cuda");
    return -1;
}

static int fill_logical(EmTensor *t, FillFn fn, void *ctx) {
    if (em_is_meta(t)) return 0; /* Note [meta device]: nothing to draw into */
    if (check_generator(t, ctx) < 0) return -1;
    if (!em_is_cpu(t)) return gpu_fill(t, fn, ctx);
    if (em_is_contiguous(t)) return fn(t, ctx);
    EmTensor *tmp = em_empty(t->ndim, t->sizes, (EmDType)t->dtype, em_cpu());
    if (!tmp) return -1;
    int r = fn(tmp, ctx);
    if (r == 0) r = em_copy_(t, (PyObject *)tmp);
    Py_DECREF(tmp);
    return r;
}

/* Store a double into element i of a contiguous tensor. */
static inline void store_f(EmTensor *t, int64_t i, double v) {
    EmScalar s = {'f', {0}};
    s.v.f = v;
    em_scalar_store(s, (EmDType)t->dtype, em_data(t) + i * em_itemsize(t->dtype));
}

/* ------------------------------------------------------------ uniform */

typedef struct {
    EmGenerator *g;
    double a, b;
} Range;

/* v rounded to dtype d (a half type), as a float */
static float round_to(EmDType d, double v) {
    EmScalar s = {'f', {0}};
    s.v.f = v;
    uint16_t h;
    em_scalar_store(s, d, &h);
    return (float)em_scalar_to_double(em_scalar_load(&h, d));
}

static int do_uniform(EmTensor *t, void *vctx) {
    Range *r = vctx;
    EmDType d = (EmDType)t->dtype;
    /* bounds in the tensor's dtype; x * (to - from) + from evaluated in
     * double, fused for float64 — the arithmetic torch's kernel compiles to */
    if (d == EM_FLOAT32) {
        float f = (float)r->a, to = (float)r->b, *p = (float *)em_data(t);
        for (int64_t i = 0; i < t->numel; i++)
            p[i] = (float)((double)em_rng_uniform_f(r->g) * (double)(to - f) + (double)f);
    } else if (d == EM_FLOAT64) {
        double *p = (double *)em_data(t);
        for (int64_t i = 0; i < t->numel; i++) p[i] = fma(em_rng_uniform_d(r->g), r->b - r->a, r->a);
    } else { /* half types: fewer random bits; bounds and their difference in the dtype */
        int digits = uniform_digits(d);
        float f = round_to(d, r->a), to = round_to(d, r->b), span = round_to(d, (double)to - f);
        for (int64_t i = 0; i < t->numel; i++) {
            float x = (float)((em_rng_u32(r->g) & ((1u << digits) - 1)) * ldexp(1.0, -digits));
            store_f(t, i, x * span + f);
        }
    }
    return 0;
}

/* Complex tensors draw both parts, through the float view: uniform_ puts
 * each part in [from, to), normal_ gives each std / sqrt(2) (torch's
 * convention, so that E|z - mean|^2 = std^2; randn's parts are N(0, 1/2)). */
int em_uniform_(EmTensor *t, double from, double to, EmGenerator *g);
int em_normal_(EmTensor *t, double mean, double std, EmGenerator *g);
static int complex_parts_random(EmTensor *t, int normal, double a, double b, EmGenerator *g) {
    EmTensor *r = em_view_as_real(t);
    if (!r) return -1;
    int rc = normal ? em_normal_(r, a, b / sqrt(2.0), g) : em_uniform_(r, a, b, g);
    Py_DECREF(r);
    return rc;
}

int em_uniform_(EmTensor *t, double from, double to, EmGenerator *g) {
    if (em_is_complex(t->dtype)) return complex_parts_random(t, 0, from, to, g);
    if (!em_is_float(t->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"check_uniform_bounds\" not implemented for '%s'",
                     em_dtype_name((EmDType)t->dtype));
        return -1;
    }
    if (!(from <= to)) {
        em_error(PyExc_RuntimeError,
                     "uniform_ expects to return a [from, to) range, but found from=%g > to=%g", from, to);
        return -1;
    }
    if (!isfinite(to - from)) {
        em_error(PyExc_RuntimeError, "uniform_ expects to-from <= std::numeric_limits<%s>::max(), but found to=%g and "
                 "from=%g which result in to-from to exceed the limit",
                     em_dtype_info[t->dtype].name, to, from);
        return -1;
    }
    Range r = {g, from, to};
    return fill_logical(t, do_uniform, &r);
}

/* ------------------------------------------------------------- normal */

/* torch's normal_fill: 16 uniforms become 8 Box-Muller pairs */
static void box_muller16_f(float *d, float mean, float std) {
    for (int j = 0; j < 8; j++) {
        float u1 = 1 - d[j], u2 = d[j + 8];
        float radius = sqrtf(-2 * logf(u1));
        float theta = (float)(2.0 * M_PI * u2);
        d[j] = radius * cosf(theta) * std + mean;
        d[j + 8] = radius * sinf(theta) * std + mean;
    }
}
static void box_muller16_d(double *d, double mean, double std) {
    for (int j = 0; j < 8; j++) {
        double u1 = 1 - d[j], u2 = d[j + 8];
        double radius = sqrt(-2 * log(u1));
        double theta = 2.0 * M_PI * u2;
        d[j] = radius * cos(theta) * std + mean;
        d[j + 8] = radius * sin(theta) * std + mean;
    }
}

static int do_normal(EmTensor *t, void *vctx) {
    Range *r = vctx; /* a = mean, b = std */
    EmDType d = (EmDType)t->dtype;
    int64_t n = t->numel;
    if (n < 16) {
        for (int64_t i = 0; i < n; i++) store_f(t, i, em_rng_normal_d(r->g) * r->b + r->a);
        return 0;
    }
    if (d == EM_FLOAT64) {
        double *p = (double *)em_data(t);
        for (int64_t i = 0; i < n; i++) p[i] = em_rng_uniform_d(r->g);
        for (int64_t i = 0; i + 16 <= n; i += 16) box_muller16_d(p + i, r->a, r->b);
        if (n % 16) {
            p += n - 16;
            for (int i = 0; i < 16; i++) p[i] = em_rng_uniform_d(r->g);
            box_muller16_d(p, r->a, r->b);
        }
        return 0;
    }
    /* float32 in place; half types through a float buffer */
    float *p = d == EM_FLOAT32 ? (float *)em_data(t) : PyMem_Malloc(n * sizeof(float));
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    int digits = uniform_digits(d);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)((em_rng_u32(r->g) & ((1u << digits) - 1)) * ldexp(1.0, -digits));
    for (int64_t i = 0; i + 16 <= n; i += 16) box_muller16_f(p + i, (float)r->a, (float)r->b);
    if (n % 16) {
        float *q = p + n - 16;
        for (int i = 0; i < 16; i++)
            q[i] = (float)((em_rng_u32(r->g) & ((1u << digits) - 1)) * ldexp(1.0, -digits));
        box_muller16_f(q, (float)r->a, (float)r->b);
    }
    if (d != EM_FLOAT32) {
        em_cast_fns[EM_FLOAT32][d]((const char *)p, 4, em_data(t), em_itemsize(d), n);
        PyMem_Free(p);
    }
    return 0;
}

int em_normal_(EmTensor *t, double mean, double std, EmGenerator *g) {
    if (em_is_complex(t->dtype)) return complex_parts_random(t, 1, mean, std, g);
    if (!em_is_float(t->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"normal_kernel_cpu\" not implemented for '%s'",
                     em_dtype_name((EmDType)t->dtype));
        return -1;
    }
    if (!(std >= 0.0)) {
        em_error(PyExc_RuntimeError, "normal expects std >= 0.0, but found std %g", std);
        return -1;
    }
    Range r = {g, mean, std};
    return fill_logical(t, do_normal, &r);
}

/* ---------------------------------------------------------- bernoulli */

typedef struct {
    EmGenerator *g;
    double p;
    const double *probs; /* per element, or NULL */
} Bern;

/* t = (u < p) for em_rng_uniform_f's stream of u, a block of draws at a
 * time, the block's 0/1 written through the bool cast (dropout's hot loop) */
static int do_bernoulli(EmTensor *t, void *vctx) {
    enum { BLOCK = 1024 };
    Bern *b = vctx;
    uint32_t u[BLOCK];
    bool hit[BLOCK];
    EmCastFn store = em_cast_fns[EM_BOOL][t->dtype];
    int isz = em_itemsize(t->dtype);
    for (int64_t i0 = 0; i0 < t->numel; i0 += BLOCK) {
        int64_t k = t->numel - i0 < BLOCK ? t->numel - i0 : BLOCK;
        em_rng_fill_u32(b->g, u, k);
        for (int64_t j = 0; j < k; j++) {
            float uf = (float)((u[j] & ((1u << 24) - 1)) * (1.0 / (1u << 24))); /* em_rng_uniform_f */
            hit[j] = uf < (b->probs ? b->probs[i0 + j] : b->p);
        }
        store((const char *)hit, 1, em_data(t) + i0 * isz, isz, k);
    }
    return 0;
}

/* probabilities broadcast to t's shape, as a contiguous float64 tensor */
static EmTensor *probs_like(EmTensor *t, EmTensor *p) {
    EmTensor *e = em_expand(p, t->ndim, t->sizes);
    if (!e) return NULL;
    EmTensor *d = em_empty(t->ndim, t->sizes, EM_FLOAT64, em_cpu());
    if (d && em_copy_(d, (PyObject *)e) < 0) Py_CLEAR(d);
    Py_DECREF(e);
    return d;
}

static int check_probs(const double *p, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (!(p[i] >= 0 && p[i] <= 1)) {
            em_error(PyExc_RuntimeError, "%s expects all elements of p to be in [0, 1], got %g", what, p[i]);
            return -1;
        }
    return 0;
}

/* op(a, b) on tensors or numbers (new reference; NULL if an input is) */
static PyObject *op2(EmOpId id, PyObject *a, PyObject *b) {
    PyObject *args[2] = {a, b};
    return a && b ? em_op(id, 2, args) : NULL;
}

/* bernoulli_ with per-element probabilities on a GPU: t = (u < p) with u
 * uniform draws from the generator's Philox stream, after checking on the
 * device that every p lies in [0, 1] (one value read back, as torch's
 * device-side check). */
static int bernoulli_probs_gpu(EmTensor *t, EmTensor *p, EmGenerator *g) {
    EmDType ud = p->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32;
    EmTensor *pd = em_to_device(p, em_device(t), false), *pc = pd ? em_to_dtype(pd, ud, false) : NULL;
    EmTensor *u = pc ? em_empty(t->ndim, t->sizes, ud, em_device(t)) : NULL;
    PyObject *lo = NULL, *hi = NULL, *in = NULL, *all = NULL, *ok = NULL, *keep = NULL;
    PyObject *zero = PyFloat_FromDouble(0), *one = PyFloat_FromDouble(1);
    int r = -1;
    if (!u || !zero || !one) goto done;
    lo = op2(EM_OP_ge, (PyObject *)pc, zero);
    hi = op2(EM_OP_le, (PyObject *)pc, one);
    in = op2(EM_OP_logical_and, lo, hi);
    all = in ? em_op(EM_OP_all, 1, &in) : NULL;
    ok = all ? em_tensor_item((EmTensor *)all) : NULL;
    if (!ok) goto done;
    if (ok != Py_True) {
        em_error(PyExc_RuntimeError, "bernoulli_ expects all elements of p to be in [0, 1]");
        goto done;
    }
    Range rr = {g, 0, 1};
    if (fill_logical(u, do_uniform, &rr) < 0) goto done;
    keep = op2(EM_OP_lt, (PyObject *)u, (PyObject *)pc);
    if (keep && ((EmTensor *)keep)->ndim != t->ndim) { /* p must broadcast to t, not t to p */
        PyErr_Format(PyExc_RuntimeError, "bernoulli_: p of %d dims does not broadcast to self of %d dims",
                     p->ndim, t->ndim);
        goto done;
    }
    r = keep ? em_copy_(t, keep) : -1;
done:
    Py_XDECREF(pd), Py_XDECREF(pc), Py_XDECREF(u), Py_XDECREF(lo), Py_XDECREF(hi), Py_XDECREF(in);
    Py_XDECREF(all), Py_XDECREF(ok), Py_XDECREF(keep), Py_XDECREF(zero), Py_XDECREF(one);
    return r;
}

int em_bernoulli_(EmTensor *t, PyObject *p, EmGenerator *g) {
    Bern b = {g, 0, NULL};
    EmTensor *pt = NULL;
    int r = -1;
    if (em_is_meta(t)) return 0; /* Note [meta device] */
    if (em_is_tensor(p) && !em_is_cpu(t)) return bernoulli_probs_gpu(t, (EmTensor *)p, g);
    if (em_is_tensor(p)) {
        pt = probs_like(t, (EmTensor *)p);
        if (!pt) return -1;
        b.probs = (const double *)em_data(pt);
        if (check_probs(b.probs, pt->numel, "bernoulli_") < 0) goto done;
    } else {
        b.p = PyFloat_AsDouble(p);
        if (b.p == -1 && PyErr_Occurred()) return -1;
        if (!(b.p >= 0 && b.p <= 1)) {
            em_error(PyExc_RuntimeError, "bernoulli_ expects p to be in [0, 1], but got p=%g", b.p);
            return -1;
        }
    }
    r = fill_logical(t, do_bernoulli, &b);
done:
    Py_XDECREF(pt);
    return r;
}

/* ------------------------------------------------- random_ / exponential_ */

typedef struct {
    EmGenerator *g;
    int64_t from;
    uint64_t range; /* 0: the full 64-bit range */
} IntRange;

static int do_random(EmTensor *t, void *vctx) {
    IntRange *r = vctx;
    int isz = em_itemsize(t->dtype);
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t x = r->range >= (1ULL << 32) || r->range == 0 ? em_rng_u64(r->g) : em_rng_u32(r->g);
        EmScalar s = {'i', {0}};
        s.v.i = r->range ? (int64_t)(x % r->range) + r->from : (int64_t)x;
        em_scalar_store(s, (EmDType)t->dtype, em_data(t) + i * isz);
    }
    return 0;
}

/* [from, to), or the dtype's natural range when to is None */
int em_random_(EmTensor *t, int64_t from, PyObject *to_obj, EmGenerator *g) {
    EmDType d = (EmDType)t->dtype;
    uint64_t range;
    if (to_obj && to_obj != Py_None) {
        int64_t to = PyLong_AsLongLong(to_obj);
        if (to == -1 && PyErr_Occurred()) return -1;
        if (from >= to) {
            PyErr_Format(PyExc_RuntimeError,
                         "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                         (long long)from, (long long)to);
            return -1;
        }
        range = (uint64_t)to - (uint64_t)from;
        /* both bounds must be representable: [min, max + 1] of the dtype */
        double lo, hi;
        if (em_is_float(d)) {
            hi = ldexp(1.0, uniform_digits(d));
            lo = -hi;
        } else if (d == EM_BOOL) {
            lo = 0, hi = 2;
        } else {
            int bits = 8 * em_itemsize(d);
            bool sgn = em_dtype_info[d].is_signed;
            lo = sgn ? -ldexp(1.0, bits - 1) : 0;
            hi = sgn ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);
        }
        if ((double)from < lo || (double)from >= hi) {
            em_error(PyExc_RuntimeError, "random_ expects 'from' to be in [%.0f, %.0f), but got from=%lld",
                     lo, hi, (long long)from);
            return -1;
        }
        if ((double)to > hi) {
            em_error(PyExc_RuntimeError, "random_ expects 'to' to be in [%.0f, %.0f], but got to=%lld",
                     lo, hi, (long long)to);
            return -1;
        }
    } else if (em_is_float(d)) {
        range = (1ULL << uniform_digits(d)) + 1 - (uint64_t)from;
    } else if (d == EM_BOOL) {
        range = 2 - (uint64_t)from;
    } else {
        int bits = 8 * em_itemsize(d) - (em_dtype_info[d].is_signed ? 1 : 0);
        range = (bits == 64 ? 0 : (1ULL << bits)) - (uint64_t)from;
        if (bits == 63) range = (1ULL << 63) - (uint64_t)from;
    }
    IntRange r = {g, from, range};
    return fill_logical(t, do_random, &r);
}

static int do_exponential(EmTensor *t, void *vctx) {
    Range *r = vctx;
    for (int64_t i = 0; i < t->numel; i++) store_f(t, i, -log1p(-em_rng_uniform_d(r->g)) / r->a);
    return 0;
}

/* ------------------------------------ Note [GPU random numbers] */

/* The same fills on a GPU tensor, drawn by the backend from the Philox
 * stream of the device's generator or of the CUDA generator given. A
 * backend without random_fill takes the CPU fallback (per-element bernoulli
 * probabilities have their own path, bernoulli_probs_gpu, and never get
 * here). */
static int gpu_fill(EmTensor *t, FillFn fn, void *ctx) {
    int kind;
    double a = 0, b = 0;
    int64_t from = 0;
    uint64_t range = 0;
    EmGenerator *g;
    if (fn == do_uniform || fn == do_normal || fn == do_exponential) {
        Range *r = ctx;
        g = r->g, a = r->a, b = r->b;
        kind = fn == do_uniform ? EM_RANDOM_UNIFORM : fn == do_normal ? EM_RANDOM_NORMAL : EM_RANDOM_EXPONENTIAL;
    } else if (fn == do_bernoulli && !((Bern *)ctx)->probs) {
        g = ((Bern *)ctx)->g, a = ((Bern *)ctx)->p;
        kind = EM_RANDOM_BERNOULLI;
    } else if (fn == do_random) {
        IntRange *r = ctx;
        g = r->g, from = r->from, range = r->range;
        kind = EM_RANDOM_INTEGER;
    } else {
        g = *(EmGenerator **)ctx, kind = -1; /* every context starts with its generator */
    }
    int dev = em_device(t).index, r = 0;
    bool own = g != em_default_generator();
    if (own && em_generator_device(g).index != dev) {
        PyErr_Format(PyExc_RuntimeError, "Expected a generator on cuda:%d, but got one on cuda:%d", dev,
                     em_generator_device(g).index);
        return -1;
    }
    if (own && (kind < 0 || !em_cuda->random_fill)) { /* the host fallback cannot draw from its stream */
        PyErr_SetString(PyExc_NotImplementedError,
                        "this random fill has no CUDA kernel, so it cannot draw from a CUDA generator");
        return -1;
    }
    if (kind < 0 || !em_cuda->random_fill) {
        PyErr_SetString(EmNoCudaKernel, "no GPU kernel for this random fill");
        return -1;
    }
    EmTensor *dst = em_is_contiguous(t) ? (EmTensor *)Py_NewRef(t)
                                        : em_empty(t->ndim, t->sizes, (EmDType)t->dtype, em_device(t));
    if (!dst) return -1;
    uint64_t seed, offset;
    if (own)
        em_generator_philox_next(g, &seed, &offset);
    else
        em_cuda_generator_next(dev, &seed, &offset);
    if (dst->numel && em_cuda->random_fill(dev, kind, dst->dtype, em_data(dst), dst->numel, seed, offset, a, b,
                                           from, range) < 0)
        r = em_cuda_error("random");
    if (r == 0 && dst != t) r = em_copy_(t, (PyObject *)dst);
    Py_DECREF(dst);
    return r;
}

/* --------------------------------------------------------- op impls */

static EmGenerator *gen_arg(EmCall *c) {
    PyObject *g = em_arg_named(c, "generator");
    return em_generator_arg(g);
}

PyObject *em_impl_uniform_(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    double a, b;
    if (em_arg_float(c, 1, &a) < 0 || em_arg_float(c, 2, &b) < 0 || em_uniform_(t, a, b, gen_arg(c)) < 0)
        return NULL;
    return Py_NewRef(t);
}

PyObject *em_impl_normal_(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    double m, s;
    if (em_arg_float(c, 1, &m) < 0 || em_arg_float(c, 2, &s) < 0 || em_normal_(t, m, s, gen_arg(c)) < 0)
        return NULL;
    return Py_NewRef(t);
}

PyObject *em_impl_bernoulli_(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (em_bernoulli_(t, c->args[1], gen_arg(c)) < 0) return NULL;
    return Py_NewRef(t);
}

PyObject *em_impl_random_(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int64_t from = 0;
    PyObject *to = c->args[2];
    if (!em_arg_is_none(c, 1)) {
        if (to == Py_None) /* random_(to) means [0, to) */
            to = c->args[1];
        else if (em_arg_int(c, 1, &from) < 0)
            return NULL;
    }
    if (em_random_(t, from, to, gen_arg(c)) < 0) return NULL;
    return Py_NewRef(t);
}

PyObject *em_impl_exponential_(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    double lambd;
    if (em_arg_float(c, 1, &lambd) < 0) return NULL;
    if (!(lambd > 0)) {
        em_error(PyExc_RuntimeError, "exponential_ expects lambda > 0.0, but found lambda=%g", lambd);
        return NULL;
    }
    if (!em_is_float(t->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"exponential_cpu\" not implemented for '%s'",
                     em_dtype_name((EmDType)t->dtype));
        return NULL;
    }
    Range r = {gen_arg(c), lambd, 0};
    if (fill_logical(t, do_exponential, &r) < 0) return NULL;
    return Py_NewRef(t);
}

PyObject *em_impl_bernoulli(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (!em_is_float(t->dtype)) {
        PyErr_Format(PyExc_NotImplementedError, "\"bernoulli_tensor_cpu_p_\" not implemented for '%s'",
                     em_dtype_name((EmDType)t->dtype));
        return NULL;
    }
    EmTensor *r = c->out ? (EmTensor *)Py_NewRef(c->out) : em_empty_like(t, (EmDType)t->dtype);
    if (!r) return NULL;
    if (c->out && em_tensor_resize(r, t->ndim, t->sizes, false) < 0) goto fail;
    if (em_bernoulli_(r, em_arg_is_none(c, 1) ? (PyObject *)t : c->args[1], gen_arg(c)) < 0) goto fail;
    return (PyObject *)r;
fail:
    Py_DECREF(r);
    return NULL;
}

/* qsort comparator over indices into sort_keys (ties keep index order) */
static const double *sort_keys;
static int by_key(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (sort_keys[i] != sort_keys[j]) return sort_keys[i] < sort_keys[j] ? -1 : 1;
    return (i > j) - (i < j);
}

PyObject *em_impl_multinomial(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *p = NULL, *r = NULL;
    int64_t n;
    bool repl;
    EmGenerator *g = gen_arg(c);
    double *keys = NULL, *cdf = NULL;
    int64_t *order = NULL;
    if (em_arg_int(c, 1, &n) < 0 || em_arg_bool(c, 2, &repl) < 0) return NULL;
    EM_CHECK(t->ndim == 1 || t->ndim == 2, PyExc_RuntimeError, "prob_dist must be 1 or 2 dim");
    EM_CHECK(em_is_float(t->dtype), PyExc_RuntimeError,
             "multinomial only supports floating-point dtypes for input, got: %s",
             em_dtype_name((EmDType)t->dtype));
    int64_t ncat = t->sizes[t->ndim - 1], rows = t->ndim == 2 ? t->sizes[0] : 1;
    EM_CHECK(n > 0, PyExc_RuntimeError, "cannot sample n_sample <= 0 samples");
    EM_CHECK(repl || n <= ncat, PyExc_RuntimeError,
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    p = em_to_dtype(t, EM_FLOAT64, true);
    EM_TRY(p);
    {
        EmTensor *pc = em_contiguous(p);
        EM_TRY(pc);
        Py_SETREF(p, pc);
    }
    int64_t shape[2] = {rows, n};
    r = c->out ? (EmTensor *)Py_NewRef(c->out)
               : em_empty(t->ndim, t->ndim == 2 ? shape : shape + 1, EM_INT64, em_device(t));
    EM_TRY(r);
    if (c->out) EM_TRY(em_tensor_resize(r, t->ndim, t->ndim == 2 ? shape : shape + 1, false) == 0);
    EM_CHECK(r->dtype == EM_INT64 && em_is_contiguous(r), PyExc_RuntimeError,
             "multinomial expects a contiguous int64 out tensor");
    if (em_is_meta(r)) { /* Note [meta device]: the samples' shape; nothing drawn */
        Py_DECREF(p);
        return (PyObject *)r;
    }
    keys = PyMem_Malloc(ncat * sizeof(double));
    cdf = PyMem_Malloc(ncat * sizeof(double));
    order = PyMem_Malloc(ncat * sizeof(int64_t));
    if (!keys || !cdf || !order) {
        PyErr_NoMemory();
        goto fail;
    }
    const double *pd = (const double *)em_data(p);
    int64_t *out = (int64_t *)em_data(r);
    for (int64_t row = 0; row < rows; row++) {
        const double *pr = pd + row * ncat;
        double total = 0;
        int64_t nonzero = 0;
        for (int64_t k = 0; k < ncat; k++) {
            EM_CHECK(isfinite(pr[k]) && pr[k] >= 0, PyExc_RuntimeError,
                     "probability tensor contains either `inf`, `nan` or element < 0");
            total += pr[k];
            cdf[k] = total;
            nonzero += pr[k] > 0;
        }
        EM_CHECK(total > 0, PyExc_RuntimeError, "invalid multinomial distribution (sum of probabilities <= 0)");
        EM_CHECK(repl || nonzero >= n, PyExc_RuntimeError,
                 "invalid multinomial distribution (with replacement=False, not enough non-negative "
                 "category to sample)");
        int64_t *o = out + row * n;
        if (repl) { /* inverse CDF by binary search */
            for (int64_t s = 0; s < n; s++) {
                double u = em_rng_uniform_d(g) * total;
                int64_t lo = 0, hi = ncat - 1;
                while (lo < hi) {
                    int64_t mid = (lo + hi) / 2;
                    if (cdf[mid] > u) hi = mid; else lo = mid + 1;
                }
                while (lo > 0 && pr[lo] == 0) lo--; /* never land on a zero-probability bin */
                while (pr[lo] == 0 && lo < ncat - 1) lo++;
                o[s] = lo;
            }
        } else { /* exponential race: the n smallest E_k / p_k win, in order */
            for (int64_t k = 0; k < ncat; k++) {
                keys[k] = pr[k] > 0 ? -log1p(-em_rng_uniform_d(g)) / pr[k] : INFINITY;
                order[k] = k;
            }
            sort_keys = keys;
            qsort(order, (size_t)ncat, sizeof(int64_t), by_key);
            memcpy(o, order, (size_t)n * sizeof(int64_t));
        }
    }
    PyMem_Free(keys);
    PyMem_Free(cdf);
    PyMem_Free(order);
    Py_DECREF(p);
    return (PyObject *)r;
fail:
    PyMem_Free(keys);
    PyMem_Free(cdf);
    PyMem_Free(order);
    Py_XDECREF(p);
    Py_XDECREF(r);
    return NULL;
}

/* -------------------------------------------------------- factories */

static PyObject *random_factory(EmCall *c, int kind) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    EmFactoryOpts o;
    if (em_parse_shape(c->args[0], c->def->name, &n, shape, false) < 0 || em_factory_opts(c, &o) < 0)
        return NULL;
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : em_default_float;
    EmTensor *t = em_factory_out(c, n, shape, d);
    if (!t) return NULL;
    int r = kind == 0 ? em_uniform_(t, 0, 1, gen_arg(c)) : em_normal_(t, 0, 1, gen_arg(c));
    if (r < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return em_factory_finish(t, &o);
}
static PyObject *f_rand(EmCall *c) { return random_factory(c, 0); }
static PyObject *f_randn(EmCall *c) { return random_factory(c, 1); }

static PyObject *random_like(EmCall *c, int kind) {
    EmTensor *src = em_arg_tensor(c, 0);
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    EmTensor *t = em_factory_like(c, src, o.dtype != EM_AUTO ? (EmDType)o.dtype : (EmDType)src->dtype);
    if (!t) return NULL;
    int r = kind == 0 ? em_uniform_(t, 0, 1, gen_arg(c)) : em_normal_(t, 0, 1, gen_arg(c));
    if (r < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return em_factory_finish(t, &o);
}
static PyObject *f_rand_like(EmCall *c) { return random_like(c, 0); }
static PyObject *f_randn_like(EmCall *c) { return random_like(c, 1); }

/* randint(high, size) or randint(low, high, size) */
static PyObject *f_randint(EmCall *c) {
    PyObject *a = c->args[0], *b = c->args[1], *size = c->args[2];
    PyObject *low = NULL, *high;
    if (size == Py_None) {
        if (b != Py_None && !PyTuple_Check(b) && !PyList_Check(b)) {
            PyErr_Format(PyExc_TypeError, "randint(): argument 'size' must be tuple of ints, not %.100s",
                         Py_TYPE(b)->tp_name);
            return NULL;
        }
        size = b;
        high = a;
    } else {
        low = a;
        high = b;
    }
    if (size == Py_None || high == Py_None) {
        PyErr_SetString(PyExc_TypeError, "randint() missing required arguments: 'high' and 'size'");
        return NULL;
    }
    int64_t lo = 0;
    if (low && (lo = PyLong_AsLongLong(low)) == -1 && PyErr_Occurred()) return NULL;
    int n;
    int64_t shape[EM_MAX_DIMS];
    EmFactoryOpts o;
    if (em_parse_shape(size, "randint", &n, shape, false) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    EmTensor *t = em_factory_out(c, n, shape, o.dtype != EM_AUTO ? (EmDType)o.dtype : EM_INT64);
    if (!t) return NULL;
    if (em_random_(t, lo, high, gen_arg(c)) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return em_factory_finish(t, &o);
}

static PyObject *f_randint_like(EmCall *c) {
    EmTensor *src = em_arg_tensor(c, 0);
    PyObject *low = c->args[1], *high = c->args[2];
    if (high == Py_None) {
        high = low;
        low = NULL;
    }
    int64_t lo = 0;
    if (low && (lo = PyLong_AsLongLong(low)) == -1 && PyErr_Occurred()) return NULL;
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    EmTensor *t = em_factory_like(c, src, o.dtype != EM_AUTO ? (EmDType)o.dtype : (EmDType)src->dtype);
    if (!t) return NULL;
    if (em_random_(t, lo, high, gen_arg(c)) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return em_factory_finish(t, &o);
}

/* Where randperm builds: out='s device, else device= (the CPU when absent). */
static int randperm_device(EmCall *c, EmDevice *dev) {
    *dev = em_cpu();
    if (c->out) {
        *dev = em_device(c->out);
        return 0;
    }
    PyObject *d = em_arg_named(c, "device");
    if (!d || d == Py_None) return 0;
    return em_device_from_py(d, dev) < 0 || em_cuda_resolve(dev) < 0 ? -1 : 0;
}

/* Note [GPU randperm] (csrc/cuda/randperm.h): keys drawn from the Philox stream
 * of the device's generator (or the CUDA generator given), sorted with
 * their indices on the device. A backend without the kernel raises
 * EmNoCudaKernel before anything is allocated (the CPU fallback then runs
 * torch's CPU algorithm), unless a CUDA generator was given, whose stream
 * the host cannot draw. */
static PyObject *randperm_gpu(EmCall *c, int64_t n, EmDType d, EmDevice dev, const EmFactoryOpts *o) {
    EmGenerator *g = gen_arg(c);
    bool own = g != em_default_generator();
    if (own && em_generator_device(g).type != EM_CUDA) { /* not dispatch: the generator's device */
        PyErr_SetString(PyExc_RuntimeError, "Expected a 'cuda' device type for generator but found 'cpu'");
        return NULL;
    }
    if (own && em_generator_device(g).index != dev.index) {
        PyErr_Format(PyExc_RuntimeError, "Expected a generator on cuda:%d, but got one on cuda:%d", dev.index,
                     em_generator_device(g).index);
        return NULL;
    }
    if (!em_cuda->randperm) {
        if (own) {
            PyErr_SetString(PyExc_NotImplementedError,
                            "randperm has no CUDA kernel, so it cannot draw from a CUDA generator");
            return NULL;
        }
        PyErr_SetString(EmNoCudaKernel, "no GPU kernel for randperm");
        return NULL;
    }
    EmTensor *t = em_factory_out(c, 1, &n, d);
    if (!t) return NULL;
    EmTensor *dst = em_is_contiguous(t) ? (EmTensor *)Py_NewRef(t) : em_empty(1, &n, d, dev);
    uint64_t seed, offset;
    if (own)
        em_generator_philox_next(g, &seed, &offset);
    else
        em_cuda_generator_next(dev.index, &seed, &offset);
    int r = dst ? 0 : -1;
    if (r == 0 && n && em_cuda->randperm(dev.index, d, em_data(dst), n, seed, offset) < 0) r = em_cuda_error("randperm");
    if (r == 0 && dst != t) r = em_copy_(t, (PyObject *)dst);
    Py_XDECREF(dst);
    if (r < 0) Py_CLEAR(t);
    return em_factory_finish(t, o);
}

/* Fisher-Yates over arange(n), drawing as torch's CPU randperm does. */
static PyObject *randperm_body(EmCall *c, bool gpu) {
    int64_t n;
    EmFactoryOpts o;
    if (em_arg_int(c, 0, &n) < 0 || em_factory_opts(c, &o) < 0) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_RuntimeError, "n must be non-negative, got %lld", (long long)n);
        return NULL;
    }
    EmDType d = o.dtype != EM_AUTO ? (EmDType)o.dtype : EM_INT64;
    if (d == EM_BOOL) {
        PyErr_SetString(PyExc_NotImplementedError, "\"randperm_cpu\" not implemented for 'Bool'");
        return NULL;
    }
    /* every value must be representable: n - 1 <= the dtype's exact max */
    int64_t limit = d == EM_FLOAT16 ? 2049 : d == EM_BFLOAT16 ? 257 : d == EM_FLOAT32 ? (1LL << 24) + 1
                    : d == EM_FLOAT64 ? (1LL << 53) + 1 : INT64_MAX;
    if (n > limit) {
        PyErr_Format(PyExc_RuntimeError, "n cannot be greater than %lld for %s type.", (long long)limit,
                     em_dtype_name(d));
        return NULL;
    }
    if (em_is_int(d) && n > 0) {
        EmScalar last = {'i', {n - 1}};
        if (em_scalar_check_range(last, d) < 0) return NULL;
    }
    EmDevice dev;
    if (randperm_device(c, &dev) < 0) return NULL;
    if (gpu) return randperm_gpu(c, n, d, dev, &o);
    if (dev.type == EM_META) return em_factory_finish(em_factory_out(c, 1, &n, d), &o); /* Note [meta device] */
    EmTensor *pt = em_empty(1, &n, EM_INT64, em_cpu()); /* size-checked scratch */
    if (!pt) return NULL;
    int64_t *perm = (int64_t *)em_data(pt);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    EmGenerator *g = gen_arg(c);
    for (int64_t i = 0; i + 1 < n; i++) {
        uint64_t x = n < (int64_t)(UINT32_MAX / 20) ? em_rng_u32(g) : em_rng_u64(g);
        int64_t z = (int64_t)(x % (uint64_t)(n - i));
        int64_t s = perm[i];
        perm[i] = perm[z + i];
        perm[z + i] = s;
    }
    EmTensor *t = em_factory_out(c, 1, &n, d);
    if (t && em_copy_(t, (PyObject *)pt) < 0) Py_CLEAR(t);
    Py_DECREF(pt);
    return em_factory_finish(t, &o);
}
static PyObject *f_randperm(EmCall *c) { return randperm_body(c, false); }
static PyObject *f_randperm_cuda(EmCall *c) { return randperm_body(c, true); }

/* normal(mean, std[, size]): tensors broadcast; numbers need size */
static PyObject *f_normal(EmCall *c) {
    PyObject *mean = c->args[0], *std = c->args[1];
    EmGenerator *g = gen_arg(c);
    EmFactoryOpts o;
    if (em_factory_opts(c, &o) < 0) return NULL;
    bool mt = em_is_tensor(mean), st = em_is_tensor(std);
    if (!mt && !st) {
        if (c->args[2] == Py_None) {
            PyErr_SetString(PyExc_TypeError, "normal(): a size is required when mean and std are numbers");
            return NULL;
        }
        int n;
        int64_t shape[EM_MAX_DIMS];
        double m = PyFloat_AsDouble(mean), s = PyFloat_AsDouble(std);
        if (PyErr_Occurred() || em_parse_shape(c->args[2], "normal", &n, shape, false) < 0) return NULL;
        EmTensor *t = em_factory_out(c, n, shape, o.dtype != EM_AUTO ? (EmDType)o.dtype : em_default_float);
        if (t && em_normal_(t, m, s, g) < 0) Py_CLEAR(t);
        return em_factory_finish(t, &o);
    }
    if (st) {
        EmTensor *sd = em_to_dtype((EmTensor *)std, EM_FLOAT64, true); /* dense copy */
        if (!sd) return NULL;
        const double *v = (const double *)em_data(sd);
        int64_t bad = -1;
        for (int64_t i = 0; i < sd->numel && bad < 0; i++)
            if (!(v[i] >= 0)) bad = i;
        Py_DECREF(sd);
        if (bad >= 0) {
            PyErr_SetString(PyExc_RuntimeError, "normal expects all elements of std >= 0.0");
            return NULL;
        }
    }
    /* shape and dtype from the tensor arguments */
    EmOperand ops[2];
    int k = 0;
    if (mt) ops[k++] = em_opnd((EmTensor *)mean);
    if (st) ops[k++] = em_opnd((EmTensor *)std);
    int nd = 0;
    int64_t shape[EM_MAX_DIMS];
    for (int i = 0; i < k; i++)
        if (em_broadcast_shapes(nd, shape, ops[i].t->ndim, ops[i].t->sizes, &nd, shape) < 0) return NULL;
    EmDType d = em_result_type(k, ops);
    if (d == EM_DTYPE_ERROR) return NULL;
    if (!em_is_float(d)) d = em_default_float;
    EmTensor *t = em_factory_out(c, nd, shape, d);
    if (!t) return NULL;
    double s0 = st ? 1.0 : PyFloat_AsDouble(std);
    if (PyErr_Occurred() || em_normal_(t, 0, s0, g) < 0) goto fail;
    if (st) {
        PyObject *r = em_binary_op(EM_OP_mul, (PyObject *)t, std, t);
        if (!r) goto fail;
        Py_DECREF(r);
    }
    PyObject *r = em_binary_op(EM_OP_add, (PyObject *)t, mean, t);
    if (!r) goto fail;
    Py_DECREF(r);
    return em_factory_finish(t, &o);
fail:
    Py_DECREF(t);
    return NULL;
}

#define OPTS "dtype? dtype=None, object layout=None, device? device=None, bool pin_memory=False, bool requires_grad=False"
static EmOpDef random_factories[] = {
    {"rand", "rand(IntList size, *, Generator? generator=None, Tensor out=None, " OPTS ")", f_rand, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"randn", "randn(IntList size, *, Generator? generator=None, Tensor out=None, " OPTS ")", f_randn, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"rand_like", "rand_like(Tensor input, *, Generator? generator=None, object memory_format=None, " OPTS ")", f_rand_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"randn_like", "randn_like(Tensor input, *, Generator? generator=None, object memory_format=None, " OPTS ")", f_randn_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"randint", "randint(int low, object high=None, object size=None, *, Generator? generator=None, Tensor out=None, " OPTS ")", f_randint, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"randint_like", "randint_like(Tensor input, int low, int? high=None, *, Generator? generator=None, object memory_format=None, " OPTS ")", f_randint_like, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"randperm", "randperm(int n, *, Generator? generator=None, Tensor out=None, " OPTS ")", f_randperm, .cuda_impl = f_randperm_cuda, .devices = EM_RUNS_CUDA | EM_RUNS_DEVICE_ARG | EM_RUNS_META},
    {"normal", "normal(TensorOrNumber mean, TensorOrNumber std=1.0, IntList? size=None, *, Generator? generator=None, Tensor out=None, " OPTS ")", f_normal, .devices = EM_RUNS_DEVICE_ARG},
};

int em_init_random(PyObject *m) {
    return em_register_functions(m, random_factories, sizeof random_factories / sizeof random_factories[0]);
}
