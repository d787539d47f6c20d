/* linalg.c — matrix products: mm, bmm, matmul (and `@`), mv, dot/vdot,
 * inner, outer/ger, addmm, addmv, addr, baddbmm, addbmm, kron, trace, and
 * the sum helper einsum shares. Each front-end checks shapes and dtypes with
 * torch's messages, then hands matrices to gemm_batched() (Note [batched
 * gemm]); outer, addr and kron are elementwise and go through the iterator.
 */
#include "../ember.h"
#include "device_slot.h"
#include "../cpu/blas.h"
#include "../cpu/lowp_gemm.h"

extern const EmKernels em_kernels_mul, em_kernels_addcmul, em_kernels_logical_and,
    em_kernels_logical_or;

static const EmScalar ONE = {'i', {1}}, ZERO = {'i', {0}};


static bool scalar_is_zero(EmScalar s) {
    return s.kind == 'c' ? s.v.f == 0 && s.im == 0 : s.kind == 'f' ? s.v.f == 0 : s.v.i == 0;
}
static bool scalar_is_one(EmScalar s) {
    return s.kind == 'c' ? s.v.f == 1 && s.im == 0 : s.kind == 'f' ? s.v.f == 1 : s.v.i == 1;
}

/* alpha/beta as the kernels take them: doubles for float dtypes, integers
 * (truncated, as torch converts them) otherwise. */
static EmScalar coef_for(EmScalar s, EmDType d) {
    EmScalar r;
    r.im = 0;
    if (em_is_complex(d) && s.kind == 'c') return s;
    if (em_is_float(d)) {
        r.kind = 'f';
        r.v.f = em_scalar_to_double(s);
    } else {
        r.kind = 'i';
        r.v.i = s.kind == 'f' ? (int64_t)s.v.f : s.v.i;
    }
    return r;
}

static int64_t prod(int n, const int64_t *v) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

static bool same_shape(const EmTensor *t, int nd, const int64_t *shape) {
    return t->ndim == nd && (nd == 0 || memcmp(t->sizes, shape, nd * sizeof(int64_t)) == 0); /* shape is NULL for 0-d */
}

/* The tensor a result goes to: out (resized to shape, as torch does with a
 * warning when it held elements) or a new one. The caller checked out's dtype. */
/* The result: out= (resized), or a new tensor on `like`'s device. */
static EmTensor *result_on(EmTensor *out, int nd, const int64_t *shape, EmDType d, const EmTensor *like) {
    if (!out) return em_empty(nd, shape, d, em_device(like));
    if (!same_shape(out, nd, shape) && em_tensor_resize(out, nd, shape, true) < 0) return NULL;
    return (EmTensor *)Py_NewRef(out);
}

static int check_out_dtype(EmTensor *out, EmDType d) {
    if (!out || out->dtype == d) return 0;
    PyErr_Format(PyExc_RuntimeError, "Expected out tensor to have dtype %s, but got %s instead",
                 em_dtype_ctype(d), em_dtype_ctype((EmDType)out->dtype));
    return -1;
}

static int not_implemented(const char *name, EmDType d) {
    PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", name, em_dtype_name(d));
    return -1;
}
/* the dtypes torch has no product kernels for (Note [wide unsigned dtypes]) */
static bool no_product_kernel(EmDType d) { return d == EM_BOOL || em_is_wide_unsigned(d); }

/* "Bad in-place call" unless self already has the result's shape. */
static int check_inplace_shape(EmTensor *self, int nd, const int64_t *shape) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (same_shape(self, nd, shape)) return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "Bad in-place call: input tensor size %s and output tensor size %s should match",
                 em_shape_str(self->ndim, self->sizes, a, sizeof a), em_shape_str(nd, shape, b, sizeof b));
    return -1;
}

/* ------------------------------------------------------------ the core */

/* Note [batched gemm]: every matrix product here ends in gemm_batched():
 *   C[b] = alpha * A[b] @ B[b] + beta * C[b]
 * with A [batch..., m, k], B [batch..., k, n], C [batch..., m, n] of one
 * dtype and one batch shape (A and B may broadcast along it with stride 0).
 * With `sum` C is [m, n] and collects the sum over the batch (addbmm).
 * beta == 0: C's old values are never read (NaN there does not leak).
 *
 * float32/float64 go to BLAS, which reads transposed operands in place
 * (a column-major C is computed as C^T = B^T A^T). Operands BLAS cannot
 * address (odd strides, other dtypes) are copied once: half types go to
 * oneDNN in their own dtype when it is loaded (Note [low-precision GEMM]:
 * float32 accumulators, one rounding per product, so addbmm's batches are
 * added and rounded in turn, as torch's are), else compute in float32 and
 * round once when C is copied back; integer dtypes compute
 * in int64 (wrapping, as torch's do). A batch whose B is shared and whose A
 * and C rows are evenly spaced is one GEMM (x @ W for x [batch..., k]).
 * Batches of small GEMMs — small enough that OpenBLAS runs each on one
 * thread — are split across ember's OpenMP threads (dynamically, so a thread
 * the OS runs late holds back one GEMM, not half the batch); larger GEMMs
 * run one after another, each multi-threaded by BLAS, so the two never nest. */

/* How BLAS reads the r x c matrix with element strides (rs, cs): 0 row-major,
 * 1 column-major (a transposed row-major matrix), -1 not at all; *ld gets
 * the leading dimension. */
static int mat_layout(int64_t r, int64_t c, int64_t rs, int64_t cs, int64_t *ld) {
    int64_t r1 = r > 1 ? r : 1, c1 = c > 1 ? c : 1;
    if ((cs == 1 || c <= 1) && (r <= 1 || rs >= c1)) {
        *ld = r <= 1 ? c1 : rs;
        return 0;
    }
    if ((rs == 1 || r <= 1) && (c <= 1 || cs >= r1)) {
        *ld = c <= 1 ? r1 : cs;
        return 1;
    }
    return -1;
}

static int layout_of(const EmTensor *t, int64_t *ld) {
    int nd = t->ndim;
    return mat_layout(t->sizes[nd - 2], t->sizes[nd - 1], t->strides[nd - 2], t->strides[nd - 1], ld);
}

/* x as the kernels can read it: x itself (new reference), or a contiguous
 * copy in dtype cd. Batch dims broadcast with stride 0 stay broadcast, so a
 * shared operand is copied once. */
static EmTensor *gemm_operand(EmTensor *x, EmDType cd, bool need_rowmajor) {
    int nd = x->ndim;
    int64_t ld, sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    if (x->dtype == cd) {
        int lay = layout_of(x, &ld);
        if (lay == 0 || (lay == 1 && !need_rowmajor)) return (EmTensor *)Py_NewRef(x);
    }
    for (int d = 0; d < nd; d++) sizes[d] = d < nd - 2 && x->strides[d] == 0 ? 1 : x->sizes[d];
    EmTensor *src = em_view_of(x, nd, sizes, x->strides, x->offset), *cp = NULL, *r = NULL;
    if (!src) return NULL;
    cp = em_empty(nd, sizes, cd, em_device(x));
    if (cp && em_copy_(cp, (PyObject *)src) == 0) {
        memcpy(strides, cp->strides, nd * sizeof(int64_t));
        for (int d = 0; d < nd; d++)
            if (sizes[d] != x->sizes[d]) strides[d] = 0;
        r = em_view_of(cp, nd, x->sizes, strides, cp->offset);
    }
    Py_DECREF(src);
    Py_XDECREF(cp);
    return r;
}

/* C = beta * C (zeros when beta == 0): a product with nothing to sum. Like
 * torch's c.mul_(beta), a float beta is an error for an integer C. */
static int scale_or_zero(EmTensor *c, EmScalar beta) {
    if (scalar_is_zero(beta)) return em_fill_(c, ZERO);
    if (scalar_is_one(beta) && beta.kind != 'f') return 0;
    EmIterConfig cfg = em_iter_config("mul", &em_kernels_mul, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(c);
    cfg.inputs[1] = em_opnd_scalar(beta);
    cfg.ninputs = 2;
    cfg.out = c;
    cfg.inplace = true;
    EmTensor *r = em_iter_run(&cfg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

typedef struct {
    EmDType d;
    int nb; /* batch dims */
    int64_t bsize[EM_MAX_DIMS];
    int64_t bsa[EM_MAX_DIMS], bsb[EM_MAX_DIMS], bsc[EM_MAX_DIMS]; /* element strides */
    char *a, *b, *c;
    bool ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    int isz;
} Plan;

/* One GEMM for all batches when B is shared and the rows of A and C run on
 * evenly through the batch dims. */
static void plan_fold(Plan *p) {
    if (p->ta) return;
    int64_t ea = p->m * p->lda, ec = p->m * p->ldc, rows = p->m;
    for (int d = p->nb - 1; d >= 0; d--) {
        if (p->bsize[d] == 1) continue;
        if (p->bsb[d] != 0 || p->bsa[d] != ea || p->bsc[d] != ec) return;
        ea *= p->bsize[d];
        ec *= p->bsize[d];
        rows *= p->bsize[d];
    }
    p->m = rows;
    p->nb = 0;
}

static void plan_gemm(const Plan *p, int64_t idx, EmScalar alpha, EmScalar beta, bool parallel) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (int d = p->nb - 1; d >= 0; d--) {
        int64_t i = idx % p->bsize[d];
        idx /= p->bsize[d];
        oa += i * p->bsa[d];
        ob += i * p->bsb[d];
        oc += i * p->bsc[d];
    }
    em_gemm_ex(p->d, p->ta, p->tb, p->m, p->n, p->k, p->a + oa * p->isz, p->lda, p->b + ob * p->isz,
               p->ldb, p->c + oc * p->isz, p->ldc, alpha, beta, parallel);
}

/* The batch dims' strides in s as one stride (*st) over the flattened batch, when they are */
static bool plan_stride(const Plan *p, const int64_t *s, int64_t *st) {
    int64_t first = -1, span = 1;
    for (int d = p->nb - 1; d >= 0; d--) {
        if (p->bsize[d] == 1) continue;
        if (first < 0) first = s[d];
        else if (s[d] != first * span) return false;
        span *= p->bsize[d];
    }
    *st = first < 0 ? 0 : first;
    return true;
}

static void plan_run(const Plan *p, EmScalar alpha, EmScalar beta, bool sum) {
    int64_t nbatch = prod(p->nb, p->bsize);
    double mnk = (double)p->m * (double)p->n * (double)p->k;
    const EmStop *stop = em_stop_current; /* Note [interrupts]: between the matrices */
    if ((p->d == EM_BFLOAT16 || p->d == EM_FLOAT16) && !sum && nbatch > 1 &&
        !(stop && stop->on && mnk * (double)nbatch > 4294967296.0)) {
        /* Note [low-precision GEMM]: a batch whose matrices are evenly spaced is one library call */
        int64_t sa, sb, sc;
        if (plan_stride(p, p->bsa, &sa) && plan_stride(p, p->bsb, &sb) && plan_stride(p, p->bsc, &sc) &&
            em_lowp_gemm_batched(p->d, p->ta, p->tb, nbatch, p->m, p->n, p->k, p->a, p->lda, sa, p->b, p->ldb, sb,
                                 p->c, p->ldc, sc, (float)em_scalar_to_double(alpha),
                                 (float)em_scalar_to_double(beta)))
            return;
    }
    bool split = !sum && nbatch > 1 && em_num_threads > 1 && mnk <= EM_BLAS_SINGLE_THREAD_MNK &&
                 mnk * (double)nbatch >= 1048576.0; /* enough to pay for a parallel region */
    if (split) {
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(em_num_threads)
#endif
        for (int64_t i = 0; i < nbatch; i++)
            if (!em_stop_now(stop)) plan_gemm(p, i, alpha, beta, false);
        return;
    }
    for (int64_t i = 0; i < nbatch && !em_stop_now(stop); i++) plan_gemm(p, i, alpha, sum && i > 0 ? ONE : beta, true);
}

static bool shares_storage(const EmTensor *a, const EmTensor *b) { return a->storage == b->storage; }

/* Note [GPU gemm]: the same contract on a GPU, through the backend's gemm
 * (cuBLAS). Operands stay in their dtype (halves accumulate in float32
 * inside cuBLAS); C is computed row-major as C^T = B^T A^T in cuBLAS's
 * column-major terms; batch dims that fold into one stride per operand are
 * one strided-batched call, others one call per matrix. Integer and bool
 * products have no GPU kernel: EmNoCudaKernel sends the op to the CPU
 * fallback before anything is written. */


static bool one_batch_stride(const EmTensor *t, int nb, int64_t *stride) {
    int64_t s = -1, span = 1;
    for (int d = nb - 1; d >= 0; d--) {
        if (t->sizes[d] == 1) continue;
        if (s < 0) s = t->strides[d];
        else if (t->strides[d] != s * span) return false;
        span *= t->sizes[d];
    }
    *stride = s < 0 ? 0 : s;
    return true;
}

static int gemm_batched_gpu(EmTensor *a, EmTensor *b, EmTensor *c, EmScalar alpha, EmScalar beta, bool sum) {
    EmDType d = (EmDType)c->dtype;
    if (!em_is_float(d) || !em_cuda->gemm) {
        PyErr_Format(EmNoCudaKernel, "no CUDA matrix multiply for '%s'", em_dtype_name(d));
        return -1;
    }
    const int nd = a->ndim, nb = nd - 2;
    const int64_t m = a->sizes[nd - 2], k = a->sizes[nd - 1], n = b->sizes[nd - 1];
    const int dev = em_device(c).index;
    EmTensor *A = gemm_operand(a, d, false), *B = A ? gemm_operand(b, d, false) : NULL, *C = NULL;
    int rc = -1;
    if (!B) goto done;
    int64_t ld, lda, ldb;
    bool direct = layout_of(c, &ld) == 0 && !shares_storage(c, A) && !shares_storage(c, B);
    for (int i = 0; i < nb && direct; i++) direct = c->sizes[i] == 1 || c->strides[i] != 0;
    if (direct) {
        C = (EmTensor *)Py_NewRef(c);
    } else { /* a row-major scratch C */
        C = em_empty(c->ndim, c->sizes, d, em_device(c));
        if (!C || (!scalar_is_zero(beta) && em_copy_(C, (PyObject *)c) < 0)) goto done;
        layout_of(C, &ld);
    }
    bool ta = layout_of(A, &lda) == 1, tb = layout_of(B, &ldb) == 1;
    double al = em_scalar_to_double(alpha), be = em_scalar_to_double(beta);
    int isz = em_itemsize(d);
    int64_t sa, sb, sc, nbatch = prod(nb, a->sizes);
    if (!sum && one_batch_stride(A, nb, &sa) && one_batch_stride(B, nb, &sb) && one_batch_stride(C, nb, &sc)) {
        if (em_cuda->gemm(dev, d, tb, ta, n, m, k, al, em_data(B), ldb, sb, em_data(A), lda, sa, be,
                          em_data(C), ld, sc, nbatch, em_allow_tf32) < 0) {
            em_cuda_error("gemm");
            goto done;
        }
    } else { /* one call per matrix */
        for (int64_t idx = 0; idx < nbatch; idx++) {
            int64_t oa = 0, ob = 0, oc = 0, r = idx;
            for (int dd = nb - 1; dd >= 0; dd--) {
                int64_t i = r % a->sizes[dd];
                r /= a->sizes[dd];
                oa += i * A->strides[dd];
                ob += i * B->strides[dd];
                oc += sum ? 0 : i * C->strides[dd];
            }
            if (em_cuda->gemm(dev, d, tb, ta, n, m, k, al, em_data(B) + ob * isz, ldb, 0,
                              em_data(A) + oa * isz, lda, 0, sum && idx > 0 ? 1.0 : be,
                              em_data(C) + oc * isz, ld, 0, 1, em_allow_tf32) < 0) {
                em_cuda_error("gemm");
                goto done;
            }
        }
    }
    rc = C == c ? 0 : em_copy_(c, (PyObject *)C);
done:
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(C);
    return rc;
}

static int gemm_batched(EmTensor *a, EmTensor *b, EmTensor *c, EmScalar alpha, EmScalar beta, bool sum) {
    EmDType d = (EmDType)c->dtype, cd = em_is_float(d) ? em_compute_dtype(d) : EM_INT64;
    const int nd = a->ndim, nb = nd - 2;
    const int64_t m = a->sizes[nd - 2], k = a->sizes[nd - 1], n = b->sizes[nd - 1];
    if (c->numel == 0 || em_is_meta(c)) return 0; /* Note [meta device]: the result's shape was the work */
    if (k == 0 || prod(nb, a->sizes) == 0) return scale_or_zero(c, beta);
    alpha = coef_for(alpha, d);
    beta = coef_for(beta, d);
    if (scalar_is_zero(alpha)) return scale_or_zero(c, beta);

    if (!em_is_cpu(c)) return gemm_batched_gpu(a, b, c, alpha, beta, sum);
    /* Note [low-precision GEMM] (cpu/lowp_gemm.c): halves stay in their dtype for the library */
    int lowp = em_lowp_gemm_prepare(d);
    if (lowp < 0) return -1;
    if (lowp) cd = d;
    bool blas = lowp || em_gemm_uses_blas(cd);
    EmTensor *A = gemm_operand(a, cd, false), *B = A ? gemm_operand(b, cd, !blas) : NULL, *C = NULL;
    int rc = -1;
    if (!B) goto done;
    int64_t ld;
    int lay = c->dtype == cd ? layout_of(c, &ld) : -1;
    bool direct = lay == 0 || (lay == 1 && blas);
    direct = direct && !shares_storage(c, A) && !shares_storage(c, B);
    for (int i = 0; i < c->ndim - 2 && direct; i++)
        direct = c->sizes[i] == 1 || c->strides[i] != 0;
    if (direct) {
        C = (EmTensor *)Py_NewRef(c);
    } else {
        C = em_empty(c->ndim, c->sizes, cd, em_device(c));
        if (!C || (!scalar_is_zero(beta) && em_copy_(C, (PyObject *)c) < 0)) goto done;
        lay = layout_of(C, &ld);
    }

    Plan p;
    p.d = cd;
    p.isz = em_itemsize(cd);
    p.nb = nb;
    int64_t lda, ldb;
    bool ta = layout_of(A, &lda) == 1, tb = layout_of(B, &ldb) == 1;
    for (int i = 0; i < nb; i++) {
        p.bsize[i] = a->sizes[i];
        p.bsa[i] = A->strides[i];
        p.bsb[i] = B->strides[i];
        p.bsc[i] = sum ? 0 : C->strides[i];
    }
    if (lay == 0) {
        p.a = em_data(A), p.b = em_data(B), p.ta = ta, p.tb = tb, p.lda = lda, p.ldb = ldb;
        p.m = m, p.n = n;
    } else { /* column-major C: C^T = B^T A^T */
        p.a = em_data(B), p.b = em_data(A), p.ta = !tb, p.tb = !ta, p.lda = ldb, p.ldb = lda;
        p.m = n, p.n = m;
        for (int i = 0; i < nb; i++) {
            int64_t s = p.bsa[i];
            p.bsa[i] = p.bsb[i];
            p.bsb[i] = s;
        }
    }
    p.c = em_data(C);
    p.k = k;
    p.ldc = ld;
    if (!sum) plan_fold(&p);
    double work = (double)m * (double)n * (double)k * (double)prod(nb, a->sizes);
    if (work >= 32768.0) {
        EmStop stop = {false, 0};
        if (work >= (double)EM_STOP_WORK * 64) {
            stop = em_stop_arm();
            em_stop_current = &stop;
        }
        Py_BEGIN_ALLOW_THREADS
        plan_run(&p, alpha, beta, sum);
        Py_END_ALLOW_THREADS
        em_stop_current = NULL;
        if (em_stop_check(&stop) < 0) goto done;
    } else {
        plan_run(&p, alpha, beta, sum);
    }
    int failed = lowp ? em_lowp_gemm_take_failure() : 0;
    if (failed == 1) {
        PyErr_NoMemory();
        goto done;
    }
    if (failed == 2) {
        PyErr_Format(PyExc_RuntimeError, "oneDNN failed to run a %s matrix product", em_dtype_name(d));
        goto done;
    }
    rc = C == c ? 0 : em_copy_(c, (PyObject *)C);
done:
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(C);
    return rc;
}

/* t [..., r, c] viewed as [batch..., r, c]: broadcast batch dims get stride 0. */
static EmTensor *expand_batch(EmTensor *t, int nbd, const int64_t *batch) {
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, batch, nbd * sizeof(int64_t));
    shape[nbd] = t->sizes[t->ndim - 2];
    shape[nbd + 1] = t->sizes[t->ndim - 1];
    return em_expand(t, nbd + 2, shape);
}

/* ------------------------------------------------------------ mm, bmm */

EmTensor *em_mm(EmTensor *a, EmTensor *b, EmTensor *out) {
    EmTensor *res = NULL;
    EM_CHECK(a->ndim == 2, PyExc_RuntimeError, "mm: self must be a matrix, got %d-D tensor", a->ndim);
    EM_CHECK(b->ndim == 2, PyExc_RuntimeError, "mm: mat2 must be a matrix, got %d-D tensor", b->ndim);
    EM_CHECK(a->sizes[1] == b->sizes[0], PyExc_RuntimeError,
             "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
             (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
             (long long)b->sizes[1]);
    EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError,
             "expected m1 and m2 to have the same dtype, but got: %s != %s",
             em_dtype_ctype((EmDType)a->dtype), em_dtype_ctype((EmDType)b->dtype));
    EmDType d = (EmDType)a->dtype;
    int64_t shape[2] = {a->sizes[0], b->sizes[1]};
    if (no_product_kernel(d) && shape[0] * shape[1] > 0 && a->sizes[1] > 0)
        EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
    EM_TRY(check_out_dtype(out, d) == 0);
    res = result_on(out, 2, shape, d, a);
    EM_TRY(res && gemm_batched(a, b, res, ONE, ZERO, false) == 0);
    return res;
fail:
    Py_XDECREF(res);
    return NULL;
}

/* Note [GEMM pairs]: a matrix product's backward needs two products of
 * the same size, g @ b^T and a^T @ g. Split across threads, each product
 * re-packs its shared operand once per slab and ends at a barrier (Note
 * [GEMM threads]); run side by side, one thread each, the two share
 * nothing. em_mm_pair computes c[i] = a[i] @ b[i] that way when it applies:
 * float CPU matrices BLAS takes as they are, each product big enough to
 * pay for a thread, and two threads at hand — ember's whole team, or more
 * threads than either product would use on its own. 1: it does not apply
 * (the caller runs mm twice); -1: an error. The outputs are new and
 * contiguous. */
int em_mm_pair(EmTensor *const a[2], EmTensor *const b[2], EmTensor *c[2]) {
    c[0] = c[1] = NULL;
    if (em_num_threads < 2) return 1;
    EmDType d = (EmDType)a[0]->dtype;
    int64_t m[2], n[2], k[2], lda[2], ldb[2];
    bool ta[2], tb[2], small = true;
    for (int i = 0; i < 2; i++) {
        const EmTensor *x = a[i], *y = b[i];
        if (!em_is_cpu(x) || !em_is_cpu(y) || x->ndim != 2 || y->ndim != 2 || x->dtype != d || y->dtype != d ||
            !em_gemm_uses_blas(d) || x->sizes[1] != y->sizes[0])
            return 1;
        int la = layout_of(x, &lda[i]), lb = layout_of(y, &ldb[i]);
        m[i] = x->sizes[0], k[i] = x->sizes[1], n[i] = y->sizes[1];
        double mnk = (double)m[i] * (double)n[i] * (double)k[i];
        if (la < 0 || lb < 0 || mnk < 262144.0 || m[i] >= INT32_MAX || n[i] >= INT32_MAX || k[i] >= INT32_MAX ||
            lda[i] >= INT32_MAX || ldb[i] >= INT32_MAX)
            return 1;
        ta[i] = la == 1, tb[i] = lb == 1;
        small = small && mnk <= EM_BLAS_SINGLE_THREAD_MNK;
    }
    if (em_num_threads != 2 && !small) return 1;
    for (int i = 0; i < 2; i++) {
        int64_t shape[2] = {m[i], n[i]};
        if (!(c[i] = em_empty(2, shape, d, em_cpu()))) {
            Py_CLEAR(c[0]);
            return -1;
        }
    }
    char *pa[2] = {em_data(a[0]), em_data(a[1])}, *pb[2] = {em_data(b[0]), em_data(b[1])},
         *pc[2] = {em_data(c[0]), em_data(c[1])};
    Py_BEGIN_ALLOW_THREADS
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(2)
#endif
    for (int i = 0; i < 2; i++)
        em_gemm_ex(d, ta[i], tb[i], m[i], n[i], k[i], pa[i], lda[i], pb[i], ldb[i], pc[i], n[i], ONE, ZERO, false);
    Py_END_ALLOW_THREADS
    return 0;
}

PyObject *em_impl_mm(EmCall *c) {
    return (PyObject *)em_mm(em_arg_tensor(c, 0), em_arg_tensor(c, 1), c->out);
}

static int check_bmm_sizes(EmTensor *a, EmTensor *b) {
    if (b->sizes[0] == a->sizes[0] && b->sizes[1] == a->sizes[2]) return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but "
                 "got: [%lld, %lld].", (long long)a->sizes[0], (long long)a->sizes[2],
                 (long long)b->sizes[0], (long long)b->sizes[1]);
    return -1;
}

EmTensor *em_bmm(EmTensor *a, EmTensor *b, EmTensor *out) {
    EmTensor *res = NULL;
    EM_CHECK(a->ndim == 3, PyExc_RuntimeError, "batch1 must be a 3D tensor");
    EM_CHECK(b->ndim == 3, PyExc_RuntimeError, "batch2 must be a 3D tensor");
    EM_TRY(check_bmm_sizes(a, b) == 0);
    EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError, "expected scalar type %s but found %s",
             em_dtype_name((EmDType)a->dtype), em_dtype_name((EmDType)b->dtype));
    EmDType d = (EmDType)a->dtype;
    int64_t shape[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    if (no_product_kernel(d) && prod(3, shape) > 0 && a->sizes[2] > 0) EM_TRY(not_implemented("bmm", d) == 0);
    EM_TRY(check_out_dtype(out, d) == 0);
    res = result_on(out, 3, shape, d, a);
    EM_TRY(res && gemm_batched(a, b, res, ONE, ZERO, false) == 0);
    return res;
fail:
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_bmm(EmCall *c) {
    return (PyObject *)em_bmm(em_arg_tensor(c, 0), em_arg_tensor(c, 1), c->out);
}

/* ------------------------------------------------------------ dot */

static double load_f(const char *p, EmDType d) {
    switch (d) {
    case EM_FLOAT16: return em_f16_to_f32(*(const uint16_t *)p);
    case EM_BFLOAT16: return em_bf16_to_f32(*(const uint16_t *)p);
    case EM_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static int64_t load_i(const char *p, EmDType d) {
    switch (d) {
    case EM_BOOL: return *(const bool *)p;
    case EM_UINT8: return *(const uint8_t *)p;
    case EM_INT8: return *(const int8_t *)p;
    case EM_INT16: return *(const int16_t *)p;
    case EM_INT32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* Store an accumulated value in dtype d (halves round from float, as torch's
 * float accumulators do; integers wrap). */
static void store_acc(char *p, EmDType d, double f, int64_t i) {
    switch (d) {
    case EM_FLOAT16: *(uint16_t *)p = em_f32_to_f16((float)f); break;
    case EM_BFLOAT16: *(uint16_t *)p = em_f32_to_bf16((float)f); break;
    case EM_FLOAT32: *(float *)p = (float)f; break;
    case EM_FLOAT64: *(double *)p = f; break;
    case EM_UINT8: *(uint8_t *)p = (uint8_t)i; break;
    case EM_INT8: *(int8_t *)p = (int8_t)i; break;
    case EM_INT16: *(int16_t *)p = (int16_t)i; break;
    case EM_INT32: *(int32_t *)p = (int32_t)i; break;
    case EM_INT64: *(int64_t *)p = i; break;
    default: *(bool *)p = i != 0; break;
    }
}

static EmTensor *dot_impl(EmTensor *a, EmTensor *b, EmTensor *out) {
    EmTensor *res = NULL;
    EM_CHECK(a->ndim == 1 && b->ndim == 1, PyExc_RuntimeError,
             "1D tensors expected, but got %dD and %dD tensors", a->ndim, b->ndim);
    EM_CHECK(a->sizes[0] == b->sizes[0], PyExc_RuntimeError,
             "inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the same "
             "number of elements, but got %lld and %lld elements respectively",
             (long long)a->sizes[0], (long long)b->sizes[0], (long long)a->numel, (long long)b->numel);
    EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError,
             "dot : expected both vectors to have same dtype, but found %s and %s",
             em_dtype_name((EmDType)a->dtype), em_dtype_name((EmDType)b->dtype));
    const bool meta = em_is_meta(a); /* Note [meta device]: a 0-d result, no product */
    EM_TRY(meta || (em_check_cpu(a, "dot") == 0 && em_check_cpu(b, "dot") == 0));
    EmDType d = (EmDType)a->dtype;
    if (no_product_kernel(d)) EM_TRY(not_implemented("dot", d) == 0);
    EM_CHECK(!out || out->dtype == d, PyExc_RuntimeError,
             "result dtype %s does not match input dtype %s", em_dtype_name((EmDType)out->dtype),
             em_dtype_name(d));
    res = result_on(out, 0, NULL, d, a);
    EM_TRY(res);
    if (meta) return res;
    int64_t n = a->sizes[0], sa = a->strides[0], sb = b->strides[0];
    int isz = em_itemsize(d);
    const char *pa = em_data(a), *pb = em_data(b);
    double f = 0;
    int64_t acc = 0;
    PyThreadState *ts = n >= 65536 ? PyEval_SaveThread() : NULL;
    if (d == EM_FLOAT32) {
        f = em_dot_f32(n, (const float *)pa, sa, (const float *)pb, sb);
    } else if (d == EM_FLOAT64) {
        f = em_dot_f64(n, (const double *)pa, sa, (const double *)pb, sb);
    } else if (em_is_float(d)) {
        float s = 0;
        for (int64_t i = 0; i < n; i++)
            s += (float)load_f(pa + i * sa * isz, d) * (float)load_f(pb + i * sb * isz, d);
        f = s;
    } else {
        for (int64_t i = 0; i < n; i++)
            acc += load_i(pa + i * sa * isz, d) * load_i(pb + i * sb * isz, d);
    }
    if (ts) PyEval_RestoreThread(ts);
    store_acc(em_data(res), d, f, acc);
    return res;
fail:
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_dot(EmCall *c) {
    return (PyObject *)dot_impl(em_arg_tensor(c, 0), em_arg_tensor(c, 1), c->out);
}

/* ------------------------------------------------------------ mv, addmv */

/* beta * self + alpha * (mat @ vec); self NULL for mv. */
static EmTensor *addmv_impl(EmTensor *self, EmTensor *mat, EmTensor *vec, EmScalar beta,
                            EmScalar alpha, EmTensor *out, bool inplace) {
    EmTensor *res = NULL, *inp = NULL, *B = NULL, *C = NULL;
    int sdim = self ? self->ndim : 1;
    EM_CHECK(self || mat->ndim > 0, PyExc_IndexError, "Dimension specified as 0 but tensor has no dimensions");
    EM_CHECK(mat->ndim == 2 && vec->ndim == 1 && sdim <= 1, PyExc_RuntimeError,
             "vector + matrix @ vector expected, got %d, %d, %d", sdim, mat->ndim, vec->ndim);
    int64_t m = mat->sizes[0], k = mat->sizes[1];
    int64_t ssize = self ? (self->ndim ? self->sizes[0] : 1) : m;
    EM_CHECK(k == vec->sizes[0] && (ssize == m || ssize == 1), PyExc_RuntimeError,
             "size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)", (long long)ssize,
             (long long)m, (long long)k, (long long)vec->sizes[0]);
    EmDType sd = self ? (EmDType)self->dtype : out ? (EmDType)out->dtype : (EmDType)vec->dtype;
    EM_CHECK(sd == mat->dtype && mat->dtype == vec->dtype, PyExc_RuntimeError,
             "addmv input tensors must have the same dtype, but got %s, %s, and %s",
             em_dtype_name(sd), em_dtype_name((EmDType)mat->dtype), em_dtype_name((EmDType)vec->dtype));
    EM_TRY(em_is_meta(mat) || (em_check_cpu(mat, "addmv") == 0 && em_check_cpu(vec, "addmv") == 0));
    EmDType d = sd;
    if (no_product_kernel(d) && m > 0 && k > 0) EM_TRY(not_implemented("addmv_impl_cpu", d) == 0);
    EM_TRY(check_out_dtype(out, d) == 0);
    if (!self) beta = ZERO;
    if (inplace) {
        EM_TRY(check_inplace_shape(self, 1, &m) == 0);
        res = (EmTensor *)Py_NewRef(self);
    } else {
        if (self && !scalar_is_zero(beta)) {
            inp = em_expand(self, 1, &m);
            EM_TRY(inp);
            if (out && shares_storage(out, self)) Py_SETREF(inp, em_clone(inp));
            EM_TRY(inp);
        }
        res = result_on(out, 1, &m, d, mat);
        EM_TRY(res);
        if (inp) EM_TRY(em_copy_(res, (PyObject *)inp) == 0);
    }
    B = em_unsqueeze(vec, 1);
    C = B ? em_unsqueeze(res, 1) : NULL;
    EM_TRY(C && gemm_batched(mat, B, C, alpha, beta, false) == 0);
    Py_XDECREF(inp);
    Py_DECREF(B);
    Py_DECREF(C);
    return res;
fail:
    Py_XDECREF(inp);
    Py_XDECREF(B);
    Py_XDECREF(C);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_mv(EmCall *c) {
    return (PyObject *)addmv_impl(NULL, em_arg_tensor(c, 0), em_arg_tensor(c, 1), ZERO, ONE, c->out, false);
}

PyObject *em_impl_addmv(EmCall *c) {
    EmScalar beta, alpha;
    if (em_arg_scalar(c, 3, &beta) < 0 || em_arg_scalar(c, 4, &alpha) < 0) return NULL;
    return (PyObject *)addmv_impl(em_arg_tensor(c, 0), em_arg_tensor(c, 1), em_arg_tensor(c, 2),
                                  beta, alpha, c->inplace ? NULL : c->out, c->inplace);
}

/* ------------------------------------------------------------ addmm */

/* beta * self + alpha * product, written to out / self / a new tensor of
 * `shape`: self is broadcast to it (torch's expand error when it can't be)
 * and copied in first unless beta == 0. */
static EmTensor *add_result(EmTensor *self, int nd, const int64_t *shape, EmDType d, EmScalar beta,
                            EmTensor *out, bool inplace, bool inplace_resizes) {
    EmTensor *inp = NULL, *res = NULL;
    if (inplace && !inplace_resizes) {
        if (check_inplace_shape(self, nd, shape) < 0) return NULL;
        return (EmTensor *)Py_NewRef(self);
    }
    if (inplace) out = self;
    bool in_place = out == self && same_shape(self, nd, shape); /* self already holds the input */
    inp = em_expand(self, nd, shape);
    if (!inp) return NULL;
    if (out && !in_place && shares_storage(out, self))
        Py_SETREF(inp, em_clone(inp)); /* out is about to be resized or overwritten */
    if (!inp) return NULL;
    if (inplace && !in_place && em_tensor_resize(self, nd, shape, false) < 0) { /* torch: no warning */
        Py_DECREF(inp);
        return NULL;
    }
    res = result_on(out, nd, shape, d, self);
    if (res && !in_place && !scalar_is_zero(beta) && em_copy_(res, (PyObject *)inp) < 0)
        Py_CLEAR(res);
    Py_DECREF(inp);
    return res;
}

/* Note [GPU gemm] with the bias epilogue: addmm(bias, m1, m2) on a GPU with
 * beta == alpha == 1, a bias of n elements ([n] or [1, n]) broadcast along
 * the rows and one float dtype throughout — F.linear's call — is one
 * cuBLASLt product C = m1 @ m2 + bias (gemm_bias), instead of copying the
 * bias into C and adding the product to it. A new reference; NULL without
 * an exception when the case does not apply or cuBLASLt has no algorithm
 * (the plain path runs then), with one on failure. */
static PyObject *addmm_bias_gpu(EmTensor *self, EmTensor *m1, EmTensor *m2, EmScalar beta, EmScalar alpha) {
    EmDType d = (EmDType)m1->dtype;
    const int64_t m = m1->sizes[0], k = m1->sizes[1], n = m2->sizes[1];
    if (!em_cuda->gemm_bias || (d != EM_FLOAT32 && d != EM_FLOAT16 && d != EM_BFLOAT16) || self->dtype != d ||
        em_scalar_to_double(beta) != 1.0 ||
        em_scalar_to_double(alpha) != 1.0 || m == 0 || n == 0 || k == 0)
        return NULL;
    if (!((self->ndim == 1 && self->sizes[0] == n) || (self->ndim == 2 && self->sizes[0] == 1 && self->sizes[1] == n)))
        return NULL;
    int64_t shape[2] = {m, n}, nn = n, lda, ldb;
    EmTensor *bias = NULL, *A = NULL, *B = NULL, *res = NULL, *flat = em_reshape(self, 1, &nn);
    EM_TRY(flat && (bias = em_contiguous(flat)));
    EM_TRY((A = gemm_operand(m1, d, false)) && (B = gemm_operand(m2, d, false)));
    EM_TRY(res = em_empty(2, shape, d, em_device(m1)));
    bool ta = layout_of(A, &lda) == 1, tb = layout_of(B, &ldb) == 1;
    /* row-major C = A B + bias is column-major C^T = B^T A^T + bias along C^T's rows */
    int r = em_cuda->gemm_bias(em_device(m1).index, d, tb, ta, n, m, k, em_data(B), ldb, em_data(A), lda,
                               em_data(bias), em_data(res), n, em_allow_tf32);
    if (r < 0) {
        em_cuda_error("gemm_bias");
        goto fail;
    }
    if (r > 0) Py_CLEAR(res); /* no algorithm: the plain path */
    Py_XDECREF(flat);
    Py_XDECREF(bias);
    Py_XDECREF(A);
    Py_XDECREF(B);
    return (PyObject *)res;
fail:
    Py_XDECREF(flat);
    Py_XDECREF(bias);
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(res);
    return NULL;
}

static PyObject *addmm_impl(EmCall *c, bool gpu) {
    EmTensor *self = em_arg_tensor(c, 0), *m1 = em_arg_tensor(c, 1), *m2 = em_arg_tensor(c, 2);
    EmTensor *res = NULL;
    EmScalar beta, alpha;
    if (em_arg_scalar(c, 3, &beta) < 0 || em_arg_scalar(c, 4, &alpha) < 0) return NULL;
    EM_CHECK(m1->ndim == 2, PyExc_RuntimeError, "addmm: self must be a matrix, got %d-D tensor", m1->ndim);
    EM_CHECK(m2->ndim == 2, PyExc_RuntimeError, "addmm: mat2 must be a matrix, got %d-D tensor", m2->ndim);
    EM_CHECK(m1->sizes[1] == m2->sizes[0], PyExc_RuntimeError,
             "addmm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
             (long long)m1->sizes[0], (long long)m1->sizes[1], (long long)m2->sizes[0],
             (long long)m2->sizes[1]);
    EM_CHECK(self->dtype == m2->dtype, PyExc_RuntimeError,
             "self and mat2 must have the same dtype, but got %s and %s",
             em_dtype_name((EmDType)self->dtype), em_dtype_name((EmDType)m2->dtype));
    EM_CHECK(m1->dtype == m2->dtype, PyExc_RuntimeError,
             "mat1 and mat2 must have the same dtype, but got %s and %s",
             em_dtype_name((EmDType)m1->dtype), em_dtype_name((EmDType)m2->dtype));
    EM_TRY(check_out_dtype(c->inplace ? NULL : c->out, (EmDType)m2->dtype) == 0);
    EmDType d = (EmDType)m1->dtype;
    if (no_product_kernel(d)) EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
    if (gpu && !c->inplace && !c->out) {
        PyObject *r = addmm_bias_gpu(self, m1, m2, beta, alpha);
        if (r || PyErr_Occurred()) return r;
    }
    int64_t shape[2] = {m1->sizes[0], m2->sizes[1]}, lda, ldb;
    if (!gpu && !c->inplace && !c->out && em_gemm_uses_blas(d) && !em_is_meta(m1) &&
        self->ndim == 1 && self->sizes[0] == shape[1] && shape[0] > 0 && shape[1] > 0 && m1->sizes[1] > 0 &&
        !scalar_is_zero(alpha) && !scalar_is_zero(beta) && layout_of(m1, &lda) >= 0 && layout_of(m2, &ldb) >= 0) {
        /* F.linear's bias: written by the GEMM's own slabs (Note [bias in the slabs] in cpu/blas.c) */
        res = em_empty(2, shape, d, em_device(m1));
        EM_TRY(res);
        bool ta = layout_of(m1, &lda) == 1, tb = layout_of(m2, &ldb) == 1;
        double work = (double)shape[0] * shape[1] * m1->sizes[1];
        EmStop stop = {false, 0};
        if (work >= (double)EM_STOP_WORK * 64) {
            stop = em_stop_arm();
            em_stop_current = &stop;
        }
        PyThreadState *ts = work >= 32768.0 ? PyEval_SaveThread() : NULL;
        em_gemm_bias(d, ta, tb, shape[0], shape[1], m1->sizes[1], em_data(m1), lda, em_data(m2), ldb, em_data(res),
                     shape[1], coef_for(alpha, d), em_data(self), self->strides[0], coef_for(beta, d));
        if (ts) PyEval_RestoreThread(ts);
        em_stop_current = NULL;
        if (em_stop_check(&stop) < 0) goto fail;
        return (PyObject *)res;
    }
    res = add_result(self, 2, shape, d, beta, c->inplace ? NULL : c->out, c->inplace, false);
    EM_TRY(res && gemm_batched(m1, m2, res, alpha, beta, false) == 0);
    return (PyObject *)res;
fail:
    Py_XDECREF(res);
    return NULL;
}

EM_DEVICE_SLOTS(addmm, addmm_impl)

/* ------------------------------------------------------------ baddbmm, addbmm */

/* torch sizes the result from batch1.size(0), batch1.size(1), batch2.size(2)
 * before checking ranks: an IndexError when a size isn't there. */
static int batch_dims_present(EmTensor *b1, EmTensor *b2) {
    if (b2->ndim < 3 || b1->ndim < 2) {
        EmTensor *t = b2->ndim < 3 ? b2 : b1;
        int want = b2->ndim < 3 ? 2 : 1, lo = t->ndim ? -t->ndim : -1, hi = t->ndim ? t->ndim - 1 : 0;
        PyErr_Format(PyExc_IndexError,
                     "Dimension out of range (expected to be in range of [%d, %d], but got %d)", lo, hi, want);
        return -1;
    }
    return 0;
}

PyObject *em_impl_baddbmm(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *b1 = em_arg_tensor(c, 1), *b2 = em_arg_tensor(c, 2);
    EmTensor *res = NULL;
    EmScalar beta, alpha;
    if (em_arg_scalar(c, 3, &beta) < 0 || em_arg_scalar(c, 4, &alpha) < 0) return NULL;
    if (batch_dims_present(b1, b2) < 0) return NULL;
    int64_t shape[3] = {b1->sizes[0], b1->sizes[1], b2->sizes[2]};
    if (!c->inplace) { /* torch expands self first */
        EmTensor *e = em_expand(self, 3, shape);
        if (!e) return NULL;
        Py_DECREF(e);
    }
    EM_CHECK(b1->ndim == 3, PyExc_RuntimeError, "batch1 must be a 3D tensor");
    EM_CHECK(b2->ndim == 3, PyExc_RuntimeError, "batch2 must be a 3D tensor");
    EM_TRY(check_bmm_sizes(b1, b2) == 0);
    EM_CHECK(self->dtype == b1->dtype && b1->dtype == b2->dtype, PyExc_RuntimeError,
             "Input dtypes must be the same, got: input %s, batch1: %s, batch2: %s",
             em_dtype_ctype((EmDType)self->dtype), em_dtype_ctype((EmDType)b1->dtype), em_dtype_ctype((EmDType)b2->dtype));
    EmDType d = (EmDType)b1->dtype;
    if (no_product_kernel(d)) EM_TRY(not_implemented("baddbmm", d) == 0);
    EM_TRY(check_out_dtype(c->inplace ? NULL : c->out, d) == 0);
    res = add_result(self, 3, shape, d, beta, c->inplace ? NULL : c->out, c->inplace, false);
    EM_TRY(res && gemm_batched(b1, b2, res, alpha, beta, false) == 0);
    return (PyObject *)res;
fail:
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_addbmm(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *b1 = em_arg_tensor(c, 1), *b2 = em_arg_tensor(c, 2);
    EmTensor *res = NULL;
    EmScalar beta, alpha;
    if (em_arg_scalar(c, 3, &beta) < 0 || em_arg_scalar(c, 4, &alpha) < 0) return NULL;
    if (batch_dims_present(b1, b2) < 0) return NULL;
    int64_t shape[2] = {b1->sizes[1], b2->sizes[2]};
    EmTensor *e = em_expand(self, 2, shape);
    if (!e) return NULL;
    Py_DECREF(e);
    EM_CHECK(b1->ndim == 3, PyExc_RuntimeError, "batch1 must be a 3D tensor");
    EM_CHECK(b2->ndim == 3, PyExc_RuntimeError, "batch2 must be a 3D tensor");
    EM_CHECK(b1->sizes[0] == b2->sizes[0], PyExc_RuntimeError,
             "batch1 and batch2 must have same number of batches, got %lld and %lld",
             (long long)b1->sizes[0], (long long)b2->sizes[0]);
    EM_CHECK(b1->sizes[2] == b2->sizes[1], PyExc_RuntimeError,
             "Incompatible matrix sizes for bmm (%lldx%lld and %lldx%lld)", (long long)b1->sizes[1],
             (long long)b1->sizes[2], (long long)b2->sizes[1], (long long)b2->sizes[2]);
    EmTensor *s = c->out && !c->inplace ? c->out : self;
    EM_CHECK(s->dtype == b2->dtype, PyExc_RuntimeError,
             "self and mat2 must have the same dtype, but got %s and %s",
             em_dtype_name((EmDType)s->dtype), em_dtype_name((EmDType)b2->dtype));
    EM_CHECK(b1->dtype == b2->dtype && self->dtype == b2->dtype, PyExc_RuntimeError,
             "mat1 and mat2 must have the same dtype, but got %s and %s",
             em_dtype_name((EmDType)b1->dtype), em_dtype_name((EmDType)b2->dtype));
    EmDType d = (EmDType)b1->dtype;
    if (no_product_kernel(d)) EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
    /* torch's addbmm_ resizes self to the result, as out= does */
    res = add_result(self, 2, shape, d, beta, c->inplace ? NULL : c->out, c->inplace, true);
    EM_TRY(res && gemm_batched(b1, b2, res, alpha, beta, true) == 0);
    return (PyObject *)res;
fail:
    Py_XDECREF(res);
    return NULL;
}

/* ------------------------------------------------------------ matmul */

EmTensor *em_matmul(EmTensor *a, EmTensor *b, EmTensor *out) {
    int da = a->ndim, db = b->ndim;
    EmTensor *res = NULL, *A = NULL, *B = NULL, *C = NULL;
    int64_t shape[EM_MAX_DIMS];
    EM_CHECK(da > 0 && db > 0, PyExc_RuntimeError,
             "both arguments to matmul need to be at least 1D, but they are %dD and %dD", da, db);
    if (da == 1 && db == 1) return dot_impl(a, b, out);
    if (da == 2 && db == 1) return addmv_impl(NULL, a, b, ZERO, ONE, out, false);
    if (da == 2 && db == 2) return em_mm(a, b, out);
    EmDType d = (EmDType)a->dtype;
    if (da >= 3 && db <= 2) {
        /* torch folds a's batch into its rows: its messages name the folded sizes */
        int64_t k = a->sizes[da - 1], rows = prod(da - 1, a->sizes);
        if (db == 1) {
            EM_CHECK(b->sizes[0] == k, PyExc_RuntimeError,
                     "size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)", (long long)rows,
                     (long long)rows, (long long)k, (long long)b->sizes[0]);
            EmDType sd = out ? (EmDType)out->dtype : (EmDType)b->dtype;
            EM_CHECK(sd == a->dtype && a->dtype == b->dtype, PyExc_RuntimeError,
                     "addmv input tensors must have the same dtype, but got %s, %s, and %s",
                     em_dtype_name(sd), em_dtype_name(d), em_dtype_name((EmDType)b->dtype));
            if (no_product_kernel(d) && rows > 0 && k > 0) EM_TRY(not_implemented("addmv_impl_cpu", d) == 0);
        } else {
            EM_CHECK(b->sizes[0] == k, PyExc_RuntimeError,
                     "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                     (long long)rows, (long long)k, (long long)b->sizes[0], (long long)b->sizes[1]);
            EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError,
                     "expected m1 and m2 to have the same dtype, but got: %s != %s", em_dtype_ctype(d),
                     em_dtype_ctype((EmDType)b->dtype));
            if (no_product_kernel(d) && rows * b->sizes[1] > 0 && k > 0)
                EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
        }
        EM_TRY(check_out_dtype(out, d) == 0);
        memcpy(shape, a->sizes, (da - 1) * sizeof(int64_t));
        if (db == 2) shape[da - 1] = b->sizes[1];
        res = result_on(out, db == 2 ? da : da - 1, shape, d, a);
        EM_TRY(res);
        B = db == 1 ? em_unsqueeze(b, 1) : (EmTensor *)Py_NewRef(b);
        EM_TRY(B);
        Py_SETREF(B, expand_batch(B, da - 2, a->sizes));
        C = B ? (db == 1 ? em_unsqueeze(res, da - 1) : (EmTensor *)Py_NewRef(res)) : NULL;
        EM_TRY(C && gemm_batched(a, B, C, ONE, ZERO, false) == 0);
        goto done;
    }
    if (da == 1 && db == 2) {
        EM_CHECK(a->sizes[0] == b->sizes[0], PyExc_RuntimeError,
                 "mm: mat1 and mat2 shapes cannot be multiplied (1x%lld and %lldx%lld)",
                 (long long)a->sizes[0], (long long)b->sizes[0], (long long)b->sizes[1]);
        EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError,
                 "expected m1 and m2 to have the same dtype, but got: %s != %s", em_dtype_ctype(d),
                 em_dtype_ctype((EmDType)b->dtype));
        if (no_product_kernel(d) && b->sizes[1] > 0 && a->sizes[0] > 0)
            EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
        EM_TRY(check_out_dtype(out, d) == 0);
        res = result_on(out, 1, &b->sizes[1], d, a);
        A = res ? em_unsqueeze(a, 0) : NULL;
        C = A ? em_unsqueeze(res, 0) : NULL;
        EM_TRY(C && gemm_batched(A, b, C, ONE, ZERO, false) == 0);
        goto done;
    }
    /* batched, batch dims broadcast: a [ba..., m, k] @ b [bb..., k, n] */
    {
        A = da == 1 ? em_unsqueeze(a, 0) : (EmTensor *)Py_NewRef(a);
        B = A ? (db == 1 ? em_unsqueeze(b, 1) : (EmTensor *)Py_NewRef(b)) : NULL;
        EM_TRY(B);
        int nba = A->ndim - 2, nbb = B->ndim - 2, nbd;
        int64_t batch[EM_MAX_DIMS];
        EM_TRY(em_broadcast_shapes(nba, A->sizes, nbb, B->sizes, &nbd, batch) == 0);
        int64_t m = A->sizes[nba], k = A->sizes[nba + 1], k2 = B->sizes[nbb], n = B->sizes[nbb + 1];
        int64_t nbatch = prod(nbd, batch);
        EM_CHECK(k == k2, PyExc_RuntimeError,
                 "Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] but "
                 "got: [%lld, %lld].", (long long)nbatch, (long long)k, (long long)nbatch, (long long)k2);
        EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError, "expected scalar type %s but found %s",
                 em_dtype_name(d), em_dtype_name((EmDType)b->dtype));
        if (no_product_kernel(d) && nbatch * m * n > 0 && k > 0) EM_TRY(not_implemented("bmm", d) == 0);
        EM_TRY(check_out_dtype(out, d) == 0);
        int nd = nbd;
        memcpy(shape, batch, nbd * sizeof(int64_t));
        if (da > 1) shape[nd++] = m;
        if (db > 1) shape[nd++] = n;
        res = result_on(out, nd, shape, d, a);
        EM_TRY(res);
        Py_SETREF(A, expand_batch(A, nbd, batch));
        EM_TRY(A);
        Py_SETREF(B, expand_batch(B, nbd, batch));
        EM_TRY(B);
        C = (EmTensor *)Py_NewRef(res);
        if (da == 1) Py_SETREF(C, em_unsqueeze(C, nbd));
        if (C && db == 1) Py_SETREF(C, em_unsqueeze(C, nbd + 1));
        EM_TRY(C && gemm_batched(A, B, C, ONE, ZERO, false) == 0);
    }
done:
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(C);
    return res;
fail:
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(C);
    Py_XDECREF(res);
    return NULL;
}

PyObject *em_impl_matmul(EmCall *c) {
    return (PyObject *)em_matmul(em_arg_tensor(c, 0), em_arg_tensor(c, 1), c->out);
}

/* ------------------------------------------------------------ inner */

PyObject *em_impl_inner(EmCall *c) {
    EmTensor *a = em_arg_tensor(c, 0), *b = em_arg_tensor(c, 1), *out = c->out;
    EmTensor *A = NULL, *B = NULL, *Bt = NULL, *r = NULL;
    char sa[EM_SHAPE_BUF], sb[EM_SHAPE_BUF];
    if (a->ndim == 0 || b->ndim == 0) { /* a scalar operand: a plain product */
        EmIterConfig cfg = em_iter_config("mul", &em_kernels_mul, EM_PROMOTE_NONE);
        cfg.inputs[0] = em_opnd(a);
        cfg.inputs[1] = em_opnd(b);
        cfg.ninputs = 2;
        cfg.out = out;
        return (PyObject *)em_iter_run(&cfg);
    }
    int64_t k = a->sizes[a->ndim - 1];
    EM_CHECK(k == b->sizes[b->ndim - 1], PyExc_RuntimeError,
             "inner() the last dimension must match on both input tensors but got shapes %s and %s",
             em_shape_str(a->ndim, a->sizes, sa, sizeof sa), em_shape_str(b->ndim, b->sizes, sb, sizeof sb));
    EM_CHECK(a->dtype == b->dtype, PyExc_RuntimeError, "both inputs should have same dtype");
    if (a->ndim == 1 && b->ndim == 1) return (PyObject *)dot_impl(a, b, out);
    EmDType d = (EmDType)a->dtype;
    EM_CHECK(!out || out->dtype == d, PyExc_RuntimeError,
             "tensordot: Expected the output tensor to have dtype %s, but got an output tensor with "
             "dtype %s", em_dtype_name(d), em_dtype_name((EmDType)out->dtype));
    EM_CHECK(a->ndim + b->ndim - 2 <= EM_MAX_DIMS, PyExc_RuntimeError,
             "inner(): the result would have more than %d dimensions", EM_MAX_DIMS);
    int64_t shape[EM_MAX_DIMS], rs[2];
    int nd = 0;
    for (int i = 0; i < a->ndim - 1; i++) shape[nd++] = a->sizes[i];
    for (int i = 0; i < b->ndim - 1; i++) shape[nd++] = b->sizes[i];
    rs[0] = prod(a->ndim - 1, a->sizes);
    rs[1] = k;
    A = em_reshape(a, 2, rs);
    rs[0] = prod(b->ndim - 1, b->sizes);
    B = A ? em_reshape(b, 2, rs) : NULL;
    Bt = B ? em_transpose(B, 0, 1) : NULL;
    EM_TRY(Bt);
    if (no_product_kernel(d) && A->sizes[0] * Bt->sizes[1] > 0 && k > 0)
        EM_TRY(not_implemented("addmm_impl_cpu_", d) == 0);
    int64_t mn[2] = {A->sizes[0], Bt->sizes[1]};
    r = em_empty(2, mn, d, em_device(a)); /* the CPU, or meta (gemm_batched then does nothing) */
    EM_TRY(r && gemm_batched(A, Bt, r, ONE, ZERO, false) == 0);
    Py_SETREF(r, em_reshape(r, nd, shape));
    EM_TRY(r);
    if (out) {
        if (!same_shape(out, nd, shape)) EM_TRY(em_tensor_resize(out, nd, shape, true) == 0);
        EM_TRY(em_copy_(out, (PyObject *)r) == 0);
        Py_SETREF(r, (EmTensor *)Py_NewRef(out));
    }
    Py_DECREF(A);
    Py_DECREF(B);
    Py_DECREF(Bt);
    return (PyObject *)r;
fail:
    Py_XDECREF(A);
    Py_XDECREF(B);
    Py_XDECREF(Bt);
    Py_XDECREF(r);
    return NULL;
}

/* ------------------------------------------------------------ outer, addr */

static int check_vector(EmTensor *t, const char *op, const char *name) {
    if (t->ndim == 1) return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: Expected 1-D argument %s, but got %d-D", op, name, t->ndim);
    return -1;
}

PyObject *em_impl_outer(EmCall *c) {
    EmTensor *a = em_arg_tensor(c, 0), *b = em_arg_tensor(c, 1);
    if (check_vector(a, "outer", "self") < 0 || check_vector(b, "outer", "vec2") < 0) return NULL;
    EmTensor *col = em_unsqueeze(a, 1);
    if (!col) return NULL;
    EmIterConfig cfg = em_iter_config("mul", &em_kernels_mul, EM_PROMOTE_NONE);
    cfg.inputs[0] = em_opnd(col);
    cfg.inputs[1] = em_opnd(b);
    cfg.ninputs = 2;
    cfg.out = c->out;
    EmTensor *r = em_iter_run(&cfg);
    Py_DECREF(col);
    return (PyObject *)r;
}

static int check_coef(EmScalar s, EmDType common, const char *name) {
    if (!em_is_float(common) && s.kind == 'f') {
        PyErr_Format(PyExc_RuntimeError,
                     "For integral input tensors, argument %s must not be a floating point number.", name);
        return -1;
    }
    if (common != EM_BOOL && s.kind == 'b') {
        PyErr_Format(PyExc_RuntimeError, "Boolean %s only supported for Boolean results.", name);
        return -1;
    }
    return 0;
}

/* One elementwise pass: op(x, y) into out (or a new tensor), x and y
 * tensors or scalars; the common dtype given. */
static EmTensor *ew2(const EmKernels *k, const char *name, EmOperand x, EmOperand y, EmTensor *out,
                     bool inplace, int common, unsigned bool_mask, EmPromotion p) {
    EmIterConfig cfg = em_iter_config(name, k, p);
    cfg.inputs[0] = x;
    cfg.inputs[1] = y;
    cfg.ninputs = 2;
    cfg.out = out;
    cfg.inplace = inplace;
    cfg.common_dtype = (int8_t)common;
    cfg.bool_mask = bool_mask;
    return em_iter_run(&cfg);
}

/* beta * self + alpha * vec1 (x) vec2, in the promoted dtype of all three. */
PyObject *em_impl_addr(EmCall *c) {
    EmTensor *self = em_arg_tensor(c, 0), *v1 = em_arg_tensor(c, 1), *v2 = em_arg_tensor(c, 2);
    EmTensor *out = c->out, *col = NULL, *x = NULL, *r = NULL, *t = NULL;
    char s0[EM_SHAPE_BUF], s1[EM_SHAPE_BUF], s2[EM_SHAPE_BUF];
    EmScalar beta, alpha;
    if (em_arg_scalar(c, 3, &beta) < 0 || em_arg_scalar(c, 4, &alpha) < 0) return NULL;
    if (check_vector(v1, "addr", "vec1") < 0 || check_vector(v2, "addr", "vec2") < 0) return NULL;
    int64_t shape[2] = {v1->sizes[0], v2->sizes[0]};
    if (c->inplace) {
        EM_CHECK(same_shape(self, 2, shape), PyExc_RuntimeError, "size mismatch, input: %s, v1: %s, v2: %s",
                 em_shape_str(self->ndim, self->sizes, s0, sizeof s0),
                 em_shape_str(1, v1->sizes, s1, sizeof s1), em_shape_str(1, v2->sizes, s2, sizeof s2));
    } else {
        EmTensor *e = em_expand(self, 2, shape);
        if (!e) return NULL;
        Py_DECREF(e);
    }
    EmOperand ops[3] = {em_opnd(self), em_opnd(v1), em_opnd(v2)};
    EmDType common = em_result_type(3, ops);
    if (common == EM_DTYPE_ERROR) return NULL;
    EmTensor *dst = c->inplace ? self : out; /* torch checks the cast before beta and alpha */
    EM_CHECK(!dst || em_can_cast(common, (EmDType)dst->dtype), PyExc_RuntimeError,
             "result type %s can't be cast to the desired output type %s", em_dtype_name(common),
             em_dtype_name((EmDType)dst->dtype));
    if (check_coef(beta, common, "beta") < 0 || check_coef(alpha, common, "alpha") < 0) return NULL;
    col = em_unsqueeze(v1, 1);
    EM_TRY(col);
    bool bz = scalar_is_zero(beta);
    if (common == EM_BOOL) { /* (beta and self) or (alpha and v1 and v2) */
        unsigned mask = EM_BOOL_IN(0) | EM_BOOL_IN(1);
        EmScalar no = {'b', {0}};
        if (!scalar_is_zero(alpha)) {
            t = ew2(&em_kernels_logical_and, "logical_and", em_opnd(col), em_opnd(v2), NULL, false,
                    EM_AUTO, mask, EM_PROMOTE_BOOL_RESULT);
        } else {
            EmTensor *e = em_expand(col, 2, shape);
            EM_TRY(e);
            t = ew2(&em_kernels_logical_and, "logical_and", em_opnd(e), em_opnd_scalar(no), NULL,
                    false, EM_AUTO, mask, EM_PROMOTE_BOOL_RESULT);
            Py_DECREF(e);
        }
        EM_TRY(t);
        r = ew2(&em_kernels_logical_or, "logical_or", bz ? em_opnd_scalar(no) : em_opnd(self),
                em_opnd(t), out, c->inplace, EM_AUTO, mask, EM_PROMOTE_BOOL_RESULT);
        goto done;
    }
    /* numbers: addcmul(beta * self, vec1[:, None], vec2, value=alpha) */
    EmIterConfig cfg = em_iter_config("addr", &em_kernels_addcmul, EM_PROMOTE_NONE);
    if (bz) {
        cfg.inputs[0] = em_opnd_scalar(ZERO);
    } else if (scalar_is_one(beta)) {
        cfg.inputs[0] = em_opnd(self);
    } else {
        x = ew2(&em_kernels_mul, "mul", em_opnd(self), em_opnd_scalar(beta), NULL, false, common, 0,
                EM_PROMOTE_NONE);
        EM_TRY(x);
        cfg.inputs[0] = em_opnd(x);
    }
    cfg.inputs[1] = em_opnd(col);
    cfg.inputs[2] = em_opnd(v2);
    cfg.inputs[3] = em_opnd_scalar(alpha);
    cfg.ninputs = 4;
    cfg.out = out;
    cfg.inplace = c->inplace;
    cfg.common_dtype = (int8_t)common;
    r = em_iter_run(&cfg);
done:
    Py_XDECREF(col);
    Py_XDECREF(x);
    Py_XDECREF(t);
    return (PyObject *)r;
fail:
    Py_XDECREF(col);
    Py_XDECREF(x);
    Py_XDECREF(t);
    return NULL;
}

/* ------------------------------------------------------------ kron */

/* kron(a, b) = (a[:, None, :, None, ...] * b[None, :, None, :, ...]) reshaped:
 * a [a0, a1, ...] and b [b0, b1, ...] (the shorter padded with leading 1s)
 * give [a0*b0, a1*b1, ...], in the promoted dtype. */
PyObject *em_impl_kron(EmCall *c) {
    EmTensor *a = em_arg_tensor(c, 0), *b = em_arg_tensor(c, 1), *out = c->out;
    EmTensor *va = NULL, *vb = NULL, *r = NULL;
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    EM_CHECK(2 * nd <= EM_MAX_DIMS, PyExc_RuntimeError,
             "kron: inputs with more than %d dimensions are not supported", EM_MAX_DIMS / 2);
    int64_t sa[EM_MAX_DIMS], ta[EM_MAX_DIMS], sb[EM_MAX_DIMS], tb[EM_MAX_DIMS], shape[EM_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        sa[2 * i] = ia >= 0 ? a->sizes[ia] : 1;
        ta[2 * i] = ia >= 0 ? a->strides[ia] : 0;
        sa[2 * i + 1] = 1;
        ta[2 * i + 1] = 0;
        sb[2 * i] = 1;
        tb[2 * i] = 0;
        sb[2 * i + 1] = ib >= 0 ? b->sizes[ib] : 1;
        tb[2 * i + 1] = ib >= 0 ? b->strides[ib] : 0;
        shape[i] = sa[2 * i] * sb[2 * i + 1];
    }
    va = em_view_of(a, 2 * nd, sa, ta, a->offset);
    vb = va ? em_view_of(b, 2 * nd, sb, tb, b->offset) : NULL;
    EM_TRY(vb);
    r = ew2(&em_kernels_mul, "mul", em_opnd(va), em_opnd(vb), NULL, false, EM_AUTO, 0, EM_PROMOTE_NONE);
    EM_TRY(r);
    Py_SETREF(r, em_reshape(r, nd, shape));
    EM_TRY(r);
    if (out) {
        EM_CHECK(em_can_cast((EmDType)r->dtype, (EmDType)out->dtype), PyExc_RuntimeError,
                 "result type %s can't be cast to the desired output type %s",
                 em_dtype_name((EmDType)r->dtype), em_dtype_name((EmDType)out->dtype));
        if (!same_shape(out, nd, shape)) EM_TRY(em_tensor_resize(out, nd, shape, true) == 0);
        EM_TRY(em_copy_(out, (PyObject *)r) == 0);
        Py_SETREF(r, (EmTensor *)Py_NewRef(out));
    }
    Py_DECREF(va);
    Py_DECREF(vb);
    return (PyObject *)r;
fail:
    Py_XDECREF(va);
    Py_XDECREF(vb);
    Py_XDECREF(r);
    return NULL;
}

/* ------------------------------------------------------------ sums: trace, einsum */

/* Sum rows of a 2-D view [R, S] into dst (R elements of dtype rd). */
static void sum_rows(const EmTensor *v, EmDType rd, char *dst) {
    EmDType d = (EmDType)v->dtype;
    int isz = em_itemsize(d), osz = em_itemsize(rd);
    int64_t R = v->sizes[0], S = v->sizes[1], rs = v->strides[0] * isz, cs = v->strides[1] * isz;
    const char *base = em_data(v);
    for (int64_t r = 0; r < R; r++) {
        const char *p = base + r * rs;
        double f = 0;
        int64_t acc = 0;
        if (d == EM_FLOAT64 || d == EM_FLOAT32) {
            for (int64_t s = 0; s < S; s++) f += load_f(p + s * cs, d);
        } else if (em_is_float(d)) {
            float fs = 0; /* halves accumulate in float, as torch's do */
            for (int64_t s = 0; s < S; s++) fs += (float)load_f(p + s * cs, d);
            f = fs;
        } else {
            for (int64_t s = 0; s < S; s++) acc += load_i(p + s * cs, d);
        }
        store_acc(dst + r * osz, rd, f, acc);
    }
}

EmTensor *em_linalg_sum(EmTensor *t, const bool *mask, bool keepdim) {
    EmDType rd = em_is_float((EmDType)t->dtype) ? (EmDType)t->dtype : EM_INT64;
    int nd = t->ndim, nk = 0;
    int64_t perm[EM_MAX_DIMS], shape[EM_MAX_DIMS], rs[2] = {1, 1};
    for (int i = 0; i < nd; i++)
        if (!mask[i]) perm[nk++] = i, rs[0] *= t->sizes[i];
    for (int i = 0, j = nk; i < nd; i++)
        if (mask[i]) perm[j++] = i, rs[1] *= t->sizes[i];
    int ns = 0;
    for (int i = 0; i < nd; i++)
        if (!mask[i] || keepdim) shape[ns++] = mask[i] ? 1 : t->sizes[i];
    EmTensor *p = em_permute(t, nd, perm), *v = p ? em_reshape(p, 2, rs) : NULL;
    EmTensor *r = v ? em_empty(ns, shape, rd, em_device(t)) : NULL;
    if (r && r->numel > 0 && !em_is_meta(t)) { /* Note [meta device]: the shape only */
        if ((double)rs[0] * (double)rs[1] >= 65536.0) {
            Py_BEGIN_ALLOW_THREADS
            sum_rows(v, rd, em_data(r));
            Py_END_ALLOW_THREADS
        } else {
            sum_rows(v, rd, em_data(r));
        }
    }
    Py_XDECREF(p);
    Py_XDECREF(v);
    return r;
}

PyObject *em_impl_trace(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (no_product_kernel((EmDType)t->dtype)) {
        not_implemented("trace", (EmDType)t->dtype);
        return NULL;
    }
    if (t->ndim != 2) {
        PyErr_Format(PyExc_RuntimeError, "trace: expected a matrix, but got tensor with dim %d", t->ndim);
        return NULL;
    }
    if (!em_is_meta(t) && em_check_cpu(t, "trace") < 0) return NULL;
    int64_t len = t->sizes[0] < t->sizes[1] ? t->sizes[0] : t->sizes[1];
    int64_t stride = t->strides[0] + t->strides[1];
    EmTensor *diag = em_view_of(t, 1, &len, &stride, t->offset);
    if (!diag) return NULL;
    bool mask[1] = {true};
    EmTensor *r = em_linalg_sum(diag, mask, false);
    Py_DECREF(diag);
    return (PyObject *)r;
}
