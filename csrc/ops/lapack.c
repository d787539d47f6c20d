/* lapack.c — the LAPACK routines behind ember.linalg's decompositions (LU,
 * Cholesky, QR, SVD, symmetric / Hermitian eigen, the general eigen (geev),
 * least squares, triangular solves),
 * exposed as private functions _C._lapack_<routine> that python/ember/linalg
 * builds torch's API on.
 *
 * Note [LAPACK layout]: every matrix argument arrives as a contiguous
 * float32/float64/complex64/complex128 CPU tensor (complex ones go to the
 * c/z routines: ungqr for orgqr, heevd for syevd; their singular values and
 * eigenvalues are real) of shape (..., cols, rows): the row-major
 * transpose of the matrix, i.e. the matrix itself in Fortran (column-major)
 * order with leading dimension `rows`. The Python layer makes these copies
 * (A.mT.contiguous()) and reads results back through .mT, so this file never
 * transposes. Leading dims are a batch: one LAPACK call per matrix, with the
 * GIL released around the loop. Routines overwrite their matrix arguments in
 * place (the Python layer passes fresh copies) and return `info` per matrix
 * as an int32 tensor of the batch shape; the Python layer turns info into
 * torch's errors.
 *
 * The routines come from the OpenBLAS that blas.c links: the scipy-openblas32
 * wheel exports LAPACK's Fortran symbols with a scipy_ prefix (scipy_dgetrf_),
 * a system OpenBLAS without one (dgetrf_); both take 32-bit integers. A build
 * without OpenBLAS (EM_BLAS_SCIPY / EM_BLAS_SYSTEM undefined, as on the GPU
 * machine) still registers these functions, but they raise
 * RuntimeError("ember was built without LAPACK ...") — so do the linalg
 * decompositions built on them. */
#include "../ember.h"
#include <complex.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(EM_BLAS_SCIPY)
#define EM_LAPACK(name) scipy_##name##_
#define EM_CBLAS_L(name) scipy_cblas_##name
#elif defined(EM_BLAS_SYSTEM)
#define EM_LAPACK(name) name##_
#define EM_CBLAS_L(name) cblas_##name
#endif

#ifdef EM_LAPACK
/* ------------------------------------------------------- argument checks */

/* `t` as a LAPACK operand: a contiguous float32/float64 CPU tensor of at
 * least 2 dims whose dims fit LAPACK's int. Sets cols/rows (Note [LAPACK
 * layout]) and the batch count. */
static int check_mat(EmTensor *t, const char *fn, const char *what, int64_t *cols, int64_t *rows,
                     int64_t *batch) {
    EM_CHECK(t->ndim >= 2, PyExc_RuntimeError, "%s: %s must have at least 2 dimensions", fn, what);
    EM_CHECK(t->dtype == EM_FLOAT32 || t->dtype == EM_FLOAT64 || em_is_complex(t->dtype), PyExc_RuntimeError,
             "%s: %s must be float32, float64, complex64 or complex128, got %s", fn, what,
             em_dtype_info[t->dtype].name);
    EM_CHECK(em_device(t).type == EM_CPU && em_is_contiguous(t), PyExc_RuntimeError,
             "%s: %s must be a contiguous CPU tensor", fn, what);
    *cols = t->sizes[t->ndim - 2];
    *rows = t->sizes[t->ndim - 1];
    EM_CHECK(*cols < INT_MAX && *rows < INT_MAX, PyExc_RuntimeError,
             "%s: matrix dims %lld x %lld exceed LAPACK's 32-bit sizes", fn, (long long)*rows,
             (long long)*cols);
    *batch = 1;
    for (int i = 0; i < t->ndim - 2; i++) *batch *= t->sizes[i];
    return 0;
fail:
    return -1;
}

/* b's batch dims must equal a's (the Python layer broadcasts first). */
static int same_batch(EmTensor *a, EmTensor *b, const char *fn) {
    bool ok = a->ndim == b->ndim && a->dtype == b->dtype;
    for (int i = 0; ok && i < a->ndim - 2; i++) ok = a->sizes[i] == b->sizes[i];
    EM_CHECK(ok, PyExc_RuntimeError, "%s: operands must share dtype and batch shape", fn);
    return 0;
fail:
    return -1;
}

/* A new tensor of a's batch shape followed by `nextra` trailing sizes. */
static EmTensor *batch_tensor(EmTensor *a, int nextra, const int64_t *extra, EmDType dtype) {
    int64_t sizes[66];
    int nb = a->ndim - 2;
    if (nb > 64) {
        PyErr_Format(PyExc_RuntimeError, "linalg: at most 64 batch dimensions, got %d", nb);
        return NULL;
    }
    for (int i = 0; i < nb; i++) sizes[i] = a->sizes[i];
    for (int i = 0; i < nextra; i++) sizes[nb + i] = extra[i];
    return em_zeros(nb + nextra, sizes, dtype, em_cpu());
}

static int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

/* Fortran prototypes: every argument by address; gfortran appends the
 * lengths of CHARACTER arguments (size_t) after the others. */
#define DECLARE_COMMON(p, T)                                                                           \
    void EM_LAPACK(p##getrf)(const int *m, const int *n, T *a, const int *lda, int *ipiv, int *info);  \
    void EM_LAPACK(p##getrs)(const char *tr, const int *n, const int *nrhs, const T *a, const int *lda, \
                             const int *ipiv, T *b, const int *ldb, int *info, size_t);                \
    void EM_LAPACK(p##potrf)(const char *uplo, const int *n, T *a, const int *lda, int *info, size_t); \
    void EM_LAPACK(p##potrs)(const char *uplo, const int *n, const int *nrhs, const T *a,              \
                             const int *lda, T *b, const int *ldb, int *info, size_t);                 \
    void EM_LAPACK(p##geqrf)(const int *m, const int *n, T *a, const int *lda, T *tau, T *work,        \
                             const int *lwork, int *info);
#define DECLARE(p, T)                                                                                  \
    DECLARE_COMMON(p, T)                                                                               \
    void EM_LAPACK(p##geev)(const char *jobvl, const char *jobvr, const int *n, T *a, const int *lda,  \
                            T *wr, T *wi, T *vl, const int *ldvl, T *vr, const int *ldvr, T *work,     \
                            const int *lwork, int *info, size_t, size_t);                              \
    void EM_LAPACK(p##orgqr)(const int *m, const int *n, const int *k, T *a, const int *lda,           \
                             const T *tau, T *work, const int *lwork, int *info);                      \
    void EM_LAPACK(p##gesdd)(const char *jobz, const int *m, const int *n, T *a, const int *lda, T *s,  \
                             T *u, const int *ldu, T *vt, const int *ldvt, T *work, const int *lwork,   \
                             int *iwork, int *info, size_t);                                           \
    void EM_LAPACK(p##syevd)(const char *jobz, const char *uplo, const int *n, T *a, const int *lda,   \
                             T *w, T *work, const int *lwork, int *iwork, const int *liwork,           \
                             int *info, size_t, size_t);                                               \
    void EM_LAPACK(p##gelsd)(const int *m, const int *n, const int *nrhs, T *a, const int *lda, T *b,  \
                             const int *ldb, T *s, const T *rcond, int *rank, T *work,                 \
                             const int *lwork, int *iwork, int *info);                                 \
    void EM_CBLAS_L(p##trsm)(int order, int side, int uplo, int trans, int diag, int m, int n,         \
                             T alpha, const T *a, int lda, T *b, int ldb);
DECLARE(s, float)
DECLARE(d, double)
/* the complex routines: T complex, R its real type (singular values, eigenvalues, rwork) */
#define DECLARE_COMPLEX(p, T, R)                                                                       \
    DECLARE_COMMON(p, T)                                                                               \
    void EM_LAPACK(p##ungqr)(const int *m, const int *n, const int *k, T *a, const int *lda,           \
                             const T *tau, T *work, const int *lwork, int *info);                      \
    void EM_LAPACK(p##gesdd)(const char *jobz, const int *m, const int *n, T *a, const int *lda, R *s,  \
                             T *u, const int *ldu, T *vt, const int *ldvt, T *work, const int *lwork,   \
                             R *rwork, int *iwork, int *info, size_t);                                 \
    void EM_LAPACK(p##heevd)(const char *jobz, const char *uplo, const int *n, T *a, const int *lda,   \
                             R *w, T *work, const int *lwork, R *rwork, const int *lrwork, int *iwork, \
                             const int *liwork, int *info, size_t, size_t);                            \
    void EM_LAPACK(p##geev)(const char *jobvl, const char *jobvr, const int *n, T *a, const int *lda,  \
                            T *w, T *vl, const int *ldvl, T *vr, const int *ldvr, T *work,             \
                            const int *lwork, R *rwork, int *info, size_t, size_t);                    \
    void EM_LAPACK(p##gelsd)(const int *m, const int *n, const int *nrhs, T *a, const int *lda, T *b,  \
                             const int *ldb, R *s, const R *rcond, int *rank, T *work,                 \
                             const int *lwork, R *rwork, int *iwork, int *info);                       \
    void EM_CBLAS_L(p##trsm)(int order, int side, int uplo, int trans, int diag, int m, int n,         \
                             const void *alpha, const void *a, int lda, void *b, int ldb);
DECLARE_COMPLEX(c, float _Complex, float)
DECLARE_COMPLEX(z, double _Complex, double)
enum { CB_COL_MAJOR = 102, CB_NO_TRANS = 111, CB_TRANS = 112, CB_CONJ_TRANS = 113, CB_UPPER = 121, CB_LOWER = 122,
       CB_NON_UNIT = 131, CB_UNIT = 132, CB_LEFT = 141, CB_RIGHT = 142 };

/* A workspace query's answer (a float holding an int) as an allocation
 * size, rounded up: older LAPACKs round it down in single precision. */
static int lwork_of(double q) {
    double w = q * (1 + 1e-6) + 1;
    return w < (double)INT_MAX ? (int)w : INT_MAX;
}

/* The batched kernels, one copy per element type T with LAPACK prefix p.
 * Each returns 0, or -1 when a workspace allocation failed (GIL released:
 * the caller raises MemoryError). */
/* Note [non-finite input]: gesdd, syevd and gelsd rescale by the matrix's
 * norm, and with an Inf or NaN in A that step fails (xerbla prints "On entry
 * to DLASCL ...") and gelsd then loops forever. So those matrices are not
 * handed to LAPACK: svd reports info = -4 (LAPACK's code for a NaN in A; the
 * Python layer raises torch's "contained non-finite values"), eigh and
 * lstsq give NaN results. potrf lets a NaN through its diagonal test: a NaN
 * on the factor's diagonal is reported as that leading minor failing. */
/* Batches run on ember's OpenMP team when big enough (em_threads_for):
 * OpenBLAS itself is single-threaded (Note [GEMM threads] in blas.c), and
 * each thread gets its own slice of the workspace (TID()). */
#ifdef _OPENMP
#define OMP_BATCH _Pragma("omp parallel for schedule(static) num_threads(nt) if (nt > 1)")
#define TID() omp_get_thread_num()
#else
#define OMP_BATCH (void)nt;
#define TID() 0
#endif
/* NaN / finite tests that read both parts of a complex value (__imag__ of a real is 0) */
#define ANY_NAN(v) (isnan(__real__(v)) || isnan(__imag__(v)))
#define ALL_FINITE(v) (isfinite(__real__(v)) && isfinite(__imag__(v)))
#define KERNELS_COMMON(p, T)                                                                                 \
    static bool p##_finite(const T *x, int64_t n) {                                                          \
        for (int64_t i = 0; i < n; i++)                                                                      \
            if (!ALL_FINITE(x[i])) return false;                                                             \
        return true;                                                                                         \
    }                                                                                                        \
    static int p##_getrf(T *a, int m, int n, int64_t batch, int *ipiv, int *info) {                          \
        int lda = (int)imax(1, m), k = (int)imin(m, n);                                                      \
        int nt = em_threads_for(batch, (double)batch * m * n * k);                                           \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_LAPACK(p##getrf)(&m, &n, a + b * (int64_t)m * n, &lda, ipiv + b * k, info + b);               \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_getrs(const T *a, const int *ipiv, T *x, int n, int nrhs, int64_t batch, char tr, int *info) { \
        int lda = (int)imax(1, n);                                                                           \
        int nt = em_threads_for(batch, (double)batch * n * n * nrhs);                                        \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_LAPACK(p##getrs)(&tr, &n, &nrhs, a + b * (int64_t)n * n, &lda, ipiv + b * n,                  \
                                x + b * (int64_t)n * nrhs, &lda, info + b, 1);                               \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_potrf(T *a, int n, int64_t batch, char uplo, int *info) {                                 \
        int lda = (int)imax(1, n);                                                                           \
        int nt = em_threads_for(batch, (double)batch * n * n * n);                                           \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)n * n;                                                                  \
            EM_LAPACK(p##potrf)(&uplo, &n, ab, &lda, info + b, 1);                                           \
            for (int j = 0; j < n && info[b] == 0; j++)                                                      \
                if (ANY_NAN(ab[(int64_t)j * lda + j])) info[b] = j + 1;                                      \
        }                                                                                                    \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_potrs(const T *a, T *x, int n, int nrhs, int64_t batch, char uplo, int *info) {           \
        int lda = (int)imax(1, n);                                                                           \
        int nt = em_threads_for(batch, (double)batch * n * n * nrhs);                                        \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_LAPACK(p##potrs)(&uplo, &n, &nrhs, a + b * (int64_t)n * n, &lda, x + b * (int64_t)n * nrhs, &lda, \
                                info + b, 1);                                                                \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_geqrf(T *a, int m, int n, int64_t batch, void *tauv, int *info) {                         \
        T *tau = tauv;                                                                                       \
        int lda = (int)imax(1, m), k = (int)imin(m, n), lwork = -1;                                          \
        T q = 0;                                                                                             \
        EM_LAPACK(p##geqrf)(&m, &n, a, &lda, tau, &q, &lwork, info);                                         \
        lwork = lwork_of(q);                                                                                 \
        int nt = em_threads_for(batch, (double)batch * m * n * k);                                           \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        if (!work) return -1;                                                                                \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_LAPACK(p##geqrf)(&m, &n, a + b * (int64_t)m * n, &lda, tau + b * k, work + (int64_t)lwork * TID(), \
                                &lwork, info + b);                                                           \
        free(work);                                                                                          \
        return 0;                                                                                            \
    }
/* orgqr (real) / ungqr (complex): Q from geqrf's Householder vectors */
#define KERNEL_ORGQR(p, T, routine)                                                                          \
    static int p##_orgqr(T *a, int m, int n, int k, int64_t batch, const T *tau, int *info) {                \
        int lda = (int)imax(1, m), lwork = -1;                                                               \
        T q = 0;                                                                                             \
        EM_LAPACK(p##routine)(&m, &n, &k, a, &lda, tau, &q, &lwork, info);                                   \
        lwork = lwork_of(q);                                                                                 \
        int nt = em_threads_for(batch, (double)batch * m * n * k);                                           \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        if (!work) return -1;                                                                                \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_LAPACK(p##routine)(&m, &n, &k, a + b * (int64_t)m * n, &lda, tau + b * k,                     \
                                  work + (int64_t)lwork * TID(), &lwork, info + b);                          \
        free(work);                                                                                          \
        return 0;                                                                                            \
    }
#define KERNELS(p, T)                                                                                        \
    KERNELS_COMMON(p, T)                                                                                     \
    KERNEL_ORGQR(p, T, orgqr)                                                                                \
    /* the general eigendecomposition of a real matrix, written out complex: a                               \
     * pair wr +- i wi (wi > 0 first) has eigenvectors vr[:, j] +- i vr[:, j+1] */                           \
    static int p##_geev(T *a, int n, int64_t batch, T _Complex *w, T _Complex *v, int *info) {               \
        char jl = 'N', jr = v ? 'V' : 'N';                                                                   \
        int lda = (int)imax(1, n), ldvl = 1, ldvr = (int)imax(1, n), lwork = -1;                             \
        T q = 0, dummy = 0;                                                                                  \
        int64_t nn = (int64_t)n * n, scratch = 2 * (int64_t)n + (v ? nn : 0);                                \
        EM_LAPACK(p##geev)(&jl, &jr, &n, a, &lda, &dummy, &dummy, &dummy, &ldvl, &dummy, &ldvr, &q, &lwork,  \
                           info, 1, 1);                                                                      \
        lwork = lwork_of(q);                                                                                 \
        int nt = em_threads_for(batch, (double)batch * n * n * n * 10);                                      \
        T *work = malloc(sizeof(T) * ((int64_t)lwork + scratch) * nt);                                       \
        if (!work) return -1;                                                                                \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * nn, *wr = work + ((int64_t)lwork + scratch) * TID(), *wi = wr + n, *vr = wi + n; \
            if (!p##_finite(ab, nn)) { /* Note [non-finite input] */                                         \
                info[b] = -4;                                                                                \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##geev)(&jl, &jr, &n, ab, &lda, wr, wi, &dummy, &ldvl, v ? vr : &dummy, &ldvr,        \
                               vr + (v ? nn : 0), &lwork, info + b, 1, 1);                                   \
            T _Complex *wb = w + b * n, *vb = v ? v + b * nn : NULL;                                         \
            for (int j = 0; j < n; j++) {                                                                    \
                wb[j] = wr[j] + wi[j] * (T _Complex)I;                                                       \
                if (!vb) continue;                                                                           \
                const T *re = vr + (int64_t)j * n;                                                           \
                if (wi[j] > 0 && j + 1 < n) {                                                                \
                    const T *im = re + n;                                                                    \
                    for (int i = 0; i < n; i++) {                                                            \
                        vb[(int64_t)j * n + i] = re[i] + im[i] * (T _Complex)I;                              \
                        vb[(int64_t)(j + 1) * n + i] = re[i] - im[i] * (T _Complex)I;                        \
                    }                                                                                        \
                    wb[j + 1] = wr[j + 1] + wi[j + 1] * (T _Complex)I;                                       \
                    j++;                                                                                     \
                } else {                                                                                     \
                    for (int i = 0; i < n; i++) vb[(int64_t)j * n + i] = re[i];                              \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
        free(work);                                                                                          \
        return 0;                                                                                            \
    }                                                                                                        \
    /* jobz 'N': s only; 'S': u m x k, vt k x n; 'A': u m x m, vt n x n */                                   \
    static int p##_gesdd(T *a, int m, int n, int64_t batch, char jobz, T *s, T *u, int ucols, T *vt, int vtrows, \
                         int *info) {                                                                        \
        int lda = (int)imax(1, m), k = (int)imin(m, n), lwork = -1, liwork = (int)imax(1, 8 * k);            \
        int ldu = (int)imax(1, m), ldvt = (int)imax(1, vtrows);                                              \
        T q = 0, dummy = 0;                                                                                  \
        int nt = em_threads_for(batch, (double)batch * m * n * k * 10);                                      \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        if (!iwork) return -1;                                                                               \
        EM_LAPACK(p##gesdd)(&jobz, &m, &n, a, &lda, s, u ? u : &dummy, &ldu, vt ? vt : &dummy, &ldvt, &q, &lwork, \
                            iwork, info, 1);                                                                 \
        lwork = lwork_of(q);                                                                                 \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        if (!work) {                                                                                         \
            free(iwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)m * n, dum = 0;                                                         \
            if (!p##_finite(ab, (int64_t)m * n)) { /* Note [non-finite input] */                             \
                info[b] = -4;                                                                                \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##gesdd)(&jobz, &m, &n, ab, &lda, s + b * k, u ? u + b * (int64_t)m * ucols : &dum, &ldu, \
                                vt ? vt + b * (int64_t)vtrows * n : &dum, &ldvt, work + (int64_t)lwork * TID(), \
                                &lwork, iwork + (int64_t)liwork * TID(), info + b, 1);                       \
        }                                                                                                    \
        free(work);                                                                                          \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_syevd(T *a, int n, int64_t batch, char jobz, char uplo, void *wv, int *info) {            \
        T *w = wv;                                                                                           \
        int lda = (int)imax(1, n), lwork = -1, liwork = -1, iq = 0;                                          \
        T q = 0;                                                                                             \
        EM_LAPACK(p##syevd)(&jobz, &uplo, &n, a, &lda, w, &q, &lwork, &iq, &liwork, info, 1, 1);             \
        lwork = lwork_of(q);                                                                                 \
        liwork = iq > 1 ? iq : 1;                                                                            \
        int nt = em_threads_for(batch, (double)batch * n * n * n * 10);                                      \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        if (!work || !iwork) {                                                                               \
            free(work);                                                                                      \
            free(iwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)n * n;                                                                  \
            if (!p##_finite(ab, (int64_t)n * n)) { /* Note [non-finite input] */                             \
                for (int64_t i = 0; i < (int64_t)n * n; i++) ab[i] = (T)NAN;                                 \
                for (int i = 0; i < n; i++) w[b * n + i] = (T)NAN;                                           \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##syevd)(&jobz, &uplo, &n, ab, &lda, w + b * n, work + (int64_t)lwork * TID(), &lwork, \
                                iwork + (int64_t)liwork * TID(), &liwork, info + b, 1, 1);                   \
        }                                                                                                    \
        free(work);                                                                                          \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    /* b: ldb = max(m, n) rows, nrhs columns; the solution is its first n rows */                            \
    static int p##_gelsd(T *a, T *x, int m, int n, int nrhs, int64_t batch, double rcond, T *s, int *rank,   \
                         int *info) {                                                                        \
        int lda = (int)imax(1, m), ldb = (int)imax(1, imax(m, n)), k = (int)imin(m, n);                      \
        int lwork = -1, iq = 0, liwork;                                                                      \
        T q = 0, rc = (T)rcond;                                                                              \
        EM_LAPACK(p##gelsd)(&m, &n, &nrhs, a, &lda, x, &ldb, s, &rc, rank, &q, &lwork, &iq, info);           \
        lwork = lwork_of(q);                                                                                 \
        liwork = iq > 1 ? iq : 1;                                                                            \
        int nt = em_threads_for(batch, (double)batch * m * n * k * 10);                                      \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        if (!work || !iwork) {                                                                               \
            free(work);                                                                                      \
            free(iwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)m * n, *xb = x + b * (int64_t)ldb * nrhs;                               \
            if (!p##_finite(ab, (int64_t)m * n) || !p##_finite(xb, (int64_t)ldb * nrhs)) {                   \
                for (int64_t i = 0; i < (int64_t)ldb * nrhs; i++) xb[i] = (T)NAN; /* Note [non-finite input] */ \
                for (int i = 0; i < k; i++) s[b * k + i] = (T)NAN;                                           \
                rank[b] = 0;                                                                                 \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##gelsd)(&m, &n, &nrhs, ab, &lda, xb, &ldb, s + b * k, &rc, rank + b,                 \
                                work + (int64_t)lwork * TID(), &lwork, iwork + (int64_t)liwork * TID(), info + b); \
        }                                                                                                    \
        free(work);                                                                                          \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    /* X = op(A)^-1 B (left) or B op(A)^-1 (right), in place in b (m x n) */                                 \
    static int p##_trsm(const T *a, T *x, int m, int n, int64_t batch, bool left, bool upper, bool trans,    \
                        bool unit) {                                                                         \
        int k = left ? m : n, lda = (int)imax(1, k), ldb = (int)imax(1, m);                                  \
        int nt = em_threads_for(batch, (double)batch * m * n * k);                                           \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_CBLAS_L(p##trsm)(CB_COL_MAJOR, left ? CB_LEFT : CB_RIGHT, upper ? CB_UPPER : CB_LOWER,        \
                                trans ? CB_TRANS : CB_NO_TRANS, unit ? CB_UNIT : CB_NON_UNIT, m, n, (T)1,    \
                                a + b * (int64_t)k * k, lda, x + b * (int64_t)m * n, ldb);                   \
        return 0;                                                                                            \
    }
KERNELS(s, float)
KERNELS(d, double)

/* The complex kernels: T complex, R real. gesdd's rwork size is LAPACK's
 * documented minimum; heevd's and geev's sizes come from their queries. */
#define KERNELS_COMPLEX(p, T, R)                                                                             \
    KERNELS_COMMON(p, T)                                                                                     \
    KERNEL_ORGQR(p, T, ungqr)                                                                                \
    static int p##_gesdd(T *a, int m, int n, int64_t batch, char jobz, R *s, T *u, int ucols, T *vt, int vtrows, \
                         int *info) {                                                                        \
        int lda = (int)imax(1, m), k = (int)imin(m, n), mx = (int)imax(m, n), lwork = -1;                   \
        int liwork = (int)imax(1, 8 * k), ldu = (int)imax(1, m), ldvt = (int)imax(1, vtrows);                \
        int64_t lrwork = jobz == 'N' ? 7 * (int64_t)k                                                        \
                                     : imax(5 * (int64_t)k * k + 5 * k, 2 * (int64_t)mx * k + 2 * (int64_t)k * k + k); \
        lrwork = imax(1, lrwork);                                                                            \
        T q = 0, dummy = 0;                                                                                  \
        int nt = em_threads_for(batch, (double)batch * m * n * k * 40);                                      \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        R *rwork = malloc(sizeof(R) * lrwork * nt);                                                          \
        if (!iwork || !rwork) {                                                                              \
            free(iwork);                                                                                     \
            free(rwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        EM_LAPACK(p##gesdd)(&jobz, &m, &n, a, &lda, s, u ? u : &dummy, &ldu, vt ? vt : &dummy, &ldvt, &q, &lwork, \
                            rwork, iwork, info, 1);                                                          \
        lwork = lwork_of(creal(q));                                                                          \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        if (!work) {                                                                                         \
            free(iwork);                                                                                     \
            free(rwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)m * n, dum = 0;                                                         \
            if (!p##_finite(ab, (int64_t)m * n)) { /* Note [non-finite input] */                             \
                info[b] = -4;                                                                                \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##gesdd)(&jobz, &m, &n, ab, &lda, s + b * k, u ? u + b * (int64_t)m * ucols : &dum, &ldu, \
                                vt ? vt + b * (int64_t)vtrows * n : &dum, &ldvt, work + (int64_t)lwork * TID(), \
                                &lwork, rwork + lrwork * TID(), iwork + (int64_t)liwork * TID(), info + b, 1); \
        }                                                                                                    \
        free(work);                                                                                          \
        free(rwork);                                                                                         \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    static int p##_syevd(T *a, int n, int64_t batch, char jobz, char uplo, void *wv, int *info) {            \
        R *w = wv, rq = 0;                                                                                   \
        int lda = (int)imax(1, n), lwork = -1, lrwork = -1, liwork = -1, iq = 0;                             \
        T q = 0;                                                                                             \
        EM_LAPACK(p##heevd)(&jobz, &uplo, &n, a, &lda, w, &q, &lwork, &rq, &lrwork, &iq, &liwork, info, 1, 1); \
        lwork = lwork_of(creal(q));                                                                          \
        lrwork = lwork_of(rq);                                                                               \
        liwork = iq > 1 ? iq : 1;                                                                            \
        int nt = em_threads_for(batch, (double)batch * n * n * n * 40);                                      \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        R *rwork = malloc(sizeof(R) * lrwork * nt);                                                          \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        if (!work || !iwork || !rwork) {                                                                     \
            free(work);                                                                                      \
            free(rwork);                                                                                     \
            free(iwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)n * n;                                                                  \
            if (!p##_finite(ab, (int64_t)n * n)) { /* Note [non-finite input] */                             \
                for (int64_t i = 0; i < (int64_t)n * n; i++) ab[i] = (R)NAN;                                 \
                for (int i = 0; i < n; i++) w[b * n + i] = (R)NAN;                                           \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##heevd)(&jobz, &uplo, &n, ab, &lda, w + b * n, work + (int64_t)lwork * TID(), &lwork, \
                                rwork + (int64_t)lrwork * TID(), &lrwork, iwork + (int64_t)liwork * TID(),   \
                                &liwork, info + b, 1, 1);                                                    \
        }                                                                                                    \
        free(work);                                                                                          \
        free(rwork);                                                                                         \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    /* the general eigendecomposition: w (..., n) and, when vr, the right                                    \
     * eigenvectors as columns (unit 2-norm, as LAPACK normalizes them) */                                   \
    static int p##_geev(T *a, int n, int64_t batch, T *w, T *vr, int *info) {                                \
        char jl = 'N', jr = vr ? 'V' : 'N';                                                                  \
        int lda = (int)imax(1, n), ldvl = 1, ldvr = (int)imax(1, n), lwork = -1;                             \
        T q = 0, dummy = 0;                                                                                  \
        R rdummy = 0;                                                                                        \
        EM_LAPACK(p##geev)(&jl, &jr, &n, a, &lda, w, &dummy, &ldvl, vr ? vr : &dummy, &ldvr, &q, &lwork,     \
                           &rdummy, info, 1, 1);                                                             \
        lwork = lwork_of(creal(q));                                                                          \
        int nt = em_threads_for(batch, (double)batch * n * n * n * 40);                                      \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        R *rwork = malloc(sizeof(R) * imax(1, 2 * (int64_t)n) * nt);                                         \
        if (!work || !rwork) {                                                                               \
            free(work);                                                                                      \
            free(rwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)n * n, dum = 0;                                                         \
            if (!p##_finite(ab, (int64_t)n * n)) { /* Note [non-finite input] */                             \
                info[b] = -4;                                                                                \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##geev)(&jl, &jr, &n, ab, &lda, w + b * n, &dum, &ldvl,                               \
                               vr ? vr + b * (int64_t)n * n : &dum, &ldvr, work + (int64_t)lwork * TID(),    \
                               &lwork, rwork + 2 * (int64_t)n * TID(), info + b, 1, 1);                      \
        }                                                                                                    \
        free(work);                                                                                          \
        free(rwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    /* as the real gelsd, with rwork (its size from the query) */                                            \
    static int p##_gelsd(T *a, T *x, int m, int n, int nrhs, int64_t batch, double rcond, R *s, int *rank,   \
                         int *info) {                                                                        \
        int lda = (int)imax(1, m), ldb = (int)imax(1, imax(m, n)), k = (int)imin(m, n);                      \
        int lwork = -1, iq = 0, liwork, lrwork;                                                              \
        T q = 0;                                                                                             \
        R rq = 0, rc = (R)rcond;                                                                             \
        EM_LAPACK(p##gelsd)(&m, &n, &nrhs, a, &lda, x, &ldb, s, &rc, rank, &q, &lwork, &rq, &iq, info);      \
        lwork = lwork_of(creal(q));                                                                          \
        lrwork = lwork_of(rq);                                                                               \
        liwork = iq > 1 ? iq : 1;                                                                            \
        int nt = em_threads_for(batch, (double)batch * m * n * k * 40);                                      \
        T *work = malloc(sizeof(T) * lwork * nt);                                                            \
        R *rwork = malloc(sizeof(R) * lrwork * nt);                                                          \
        int *iwork = malloc(sizeof(int) * liwork * nt);                                                      \
        if (!work || !iwork || !rwork) {                                                                     \
            free(work);                                                                                      \
            free(rwork);                                                                                     \
            free(iwork);                                                                                     \
            return -1;                                                                                       \
        }                                                                                                    \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++) {                                                                \
            T *ab = a + b * (int64_t)m * n, *xb = x + b * (int64_t)ldb * nrhs;                               \
            if (!p##_finite(ab, (int64_t)m * n) || !p##_finite(xb, (int64_t)ldb * nrhs)) {                   \
                for (int64_t i = 0; i < (int64_t)ldb * nrhs; i++) xb[i] = (R)NAN; /* Note [non-finite input] */ \
                for (int i = 0; i < k; i++) s[b * k + i] = (R)NAN;                                           \
                rank[b] = 0;                                                                                 \
                continue;                                                                                    \
            }                                                                                                \
            EM_LAPACK(p##gelsd)(&m, &n, &nrhs, ab, &lda, xb, &ldb, s + b * k, &rc, rank + b,                 \
                                work + (int64_t)lwork * TID(), &lwork, rwork + (int64_t)lrwork * TID(),      \
                                iwork + (int64_t)liwork * TID(), info + b);                                  \
        }                                                                                                    \
        free(work);                                                                                          \
        free(rwork);                                                                                         \
        free(iwork);                                                                                         \
        return 0;                                                                                            \
    }                                                                                                        \
    /* trans is the conjugate transpose: the complex solves' adjoint */                                      \
    static int p##_trsm(const T *a, T *x, int m, int n, int64_t batch, bool left, bool upper, bool trans,    \
                        bool unit) {                                                                         \
        int k = left ? m : n, lda = (int)imax(1, k), ldb = (int)imax(1, m);                                  \
        int nt = em_threads_for(batch, (double)batch * m * n * k * 4);                                       \
        const T one = 1;                                                                                     \
        OMP_BATCH                                                                                            \
        for (int64_t b = 0; b < batch; b++)                                                                  \
            EM_CBLAS_L(p##trsm)(CB_COL_MAJOR, left ? CB_LEFT : CB_RIGHT, upper ? CB_UPPER : CB_LOWER,        \
                                trans ? CB_CONJ_TRANS : CB_NO_TRANS, unit ? CB_UNIT : CB_NON_UNIT, m, n,     \
                                &one, a + b * (int64_t)k * k, lda, x + b * (int64_t)m * n, ldb);             \
        return 0;                                                                                            \
    }
KERNELS_COMPLEX(c, float _Complex, float)
KERNELS_COMPLEX(z, double _Complex, double)

/* Run `call` (an int expression) with the GIL released; MemoryError on -1. */
#define RUN_NOGIL(call)                                                \
    do {                                                               \
        int rc_;                                                       \
        Py_BEGIN_ALLOW_THREADS rc_ = (call);                           \
        Py_END_ALLOW_THREADS                                           \
        EM_CHECK(rc_ == 0, PyExc_MemoryError, "LAPACK: out of memory for its workspace"); \
    } while (0)
/* the float32, float64, complex64 or complex128 kernel, by t's dtype (the
 * other buffers are passed as em_data's void pointers) */
#define TYPED(t, name, ...)                                                                          \
    ((t)->dtype == EM_FLOAT32   ? s_##name((float *)em_data(t), __VA_ARGS__)                         \
     : (t)->dtype == EM_FLOAT64 ? d_##name((double *)em_data(t), __VA_ARGS__)                        \
     : (t)->dtype == EM_COMPLEX64 ? c_##name((float _Complex *)em_data(t), __VA_ARGS__)              \
                                  : z_##name((double _Complex *)em_data(t), __VA_ARGS__))
/* the kernels that exist for real dtypes only */
#define TYPED_REAL(t, name, ...)                                                            \
    ((t)->dtype == EM_FLOAT32 ? s_##name((float *)em_data(t), __VA_ARGS__)                  \
                              : d_##name((double *)em_data(t), __VA_ARGS__))
#define NO_LAPACK_CHECK()
#else
#define NO_LAPACK_CHECK()                                                                         \
    do {                                                                                          \
        (void)c;                                                                                  \
        PyErr_SetString(PyExc_RuntimeError,                                                       \
                        "ember was built without LAPACK (no OpenBLAS found at build time): "     \
                        "torch.linalg's decompositions are not available in this build");        \
        return NULL;                                                                              \
    } while (0)
#endif

/* ------------------------------------------------------------- functions */

#define INFO_T(a) batch_tensor((a), 0, NULL, EM_INT32)

/* _lapack_getrf(a) -> (ipiv int32 (..., min(m,n)), info): a's m x n matrices
 * become L\U in place (getrf; ipiv is 1-based, as LAPACK's). */
static PyObject *f_getrf(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *ipiv = NULL, *info = NULL;
    int64_t n, m, batch;
    if (check_mat(a, "lu_factor", "A", &n, &m, &batch) < 0) return NULL;
    int64_t k = imin(m, n);
    ipiv = batch_tensor(a, 1, &k, EM_INT32);
    info = INFO_T(a);
    if (!ipiv || !info) goto fail;
    if (k > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, getrf, (int)m, (int)n, batch, (int *)em_data(ipiv), (int *)em_data(info)));
    return Py_BuildValue("(NN)", ipiv, info);
fail:
    Py_XDECREF(ipiv);
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_getrs(lu, ipiv, b, trans) -> info: solves A X = B (A^T X = B when
 * trans) in place in b (..., nrhs, n), from getrf's lu and ipiv. */
static PyObject *f_getrs(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *ipiv = em_arg_tensor(c, 1), *x = em_arg_tensor(c, 2), *info = NULL;
    bool trans;
    int64_t n, n2, nrhs, rows, batch, b2;
    if (em_arg_bool(c, 3, &trans) < 0 || check_mat(a, "lu_solve", "LU", &n, &n2, &batch) < 0 ||
        check_mat(x, "lu_solve", "B", &nrhs, &rows, &b2) < 0 || same_batch(a, x, "lu_solve") < 0)
        return NULL;
    EM_CHECK(n == n2 && rows == n && ipiv->dtype == EM_INT32 && em_is_contiguous(ipiv) &&
                 ipiv->numel == batch * n,
             PyExc_RuntimeError, "lu_solve: LU, pivots and B do not match");
    info = INFO_T(a);
    if (!info) goto fail;
    if (n > 0 && nrhs > 0 && batch > 0) {
        const int *pv = (const int *)em_data(ipiv);
        for (int64_t i = 0; i < batch * n; i++) /* a bad pivot would make getrs read out of bounds */
            EM_CHECK(pv[i] >= 1 && pv[i] <= n, PyExc_RuntimeError,
                     "lu_solve: pivots must be in [1, %lld], got %d", (long long)n, pv[i]);
        char tr = !trans ? 'N' : em_is_complex(a->dtype) ? 'C' : 'T'; /* the adjoint for complex */
        RUN_NOGIL(TYPED(a, getrs, pv, (void *)em_data(x), (int)n, (int)nrhs, batch, tr, (int *)em_data(info)));
    }
    return (PyObject *)info;
fail:
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_potrf(a, upper) -> info: the Cholesky factor in a's upper or lower
 * triangle (the other triangle is left as it was). */
static PyObject *f_potrf(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *info = NULL;
    bool upper;
    int64_t n, n2, batch;
    if (em_arg_bool(c, 1, &upper) < 0 || check_mat(a, "cholesky", "A", &n, &n2, &batch) < 0) return NULL;
    EM_CHECK(n == n2, PyExc_RuntimeError, "cholesky: A must be square");
    info = INFO_T(a);
    if (!info) goto fail;
    if (n > 0 && batch > 0) RUN_NOGIL(TYPED(a, potrf, (int)n, batch, upper ? 'U' : 'L', (int *)em_data(info)));
    return (PyObject *)info;
fail:
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_potrs(factor, b, upper) -> info: solves A X = B in place in b
 * from A's Cholesky factor. */
static PyObject *f_potrs(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *x = em_arg_tensor(c, 1), *info = NULL;
    bool upper;
    int64_t n, n2, nrhs, rows, batch, b2;
    if (em_arg_bool(c, 2, &upper) < 0 || check_mat(a, "cholesky_solve", "L", &n, &n2, &batch) < 0 ||
        check_mat(x, "cholesky_solve", "B", &nrhs, &rows, &b2) < 0 || same_batch(a, x, "cholesky_solve") < 0)
        return NULL;
    EM_CHECK(n == n2 && rows == n, PyExc_RuntimeError, "cholesky_solve: factor and B do not match");
    info = INFO_T(a);
    if (!info) goto fail;
    if (n > 0 && nrhs > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, potrs, (void *)em_data(x), (int)n, (int)nrhs, batch, upper ? 'U' : 'L', (int *)em_data(info)));
    return (PyObject *)info;
fail:
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_geqrf(a) -> tau (..., min(m,n)): R and the Householder vectors in a. */
static PyObject *f_geqrf(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *tau = NULL, *info = NULL;
    int64_t n, m, batch;
    if (check_mat(a, "qr", "A", &n, &m, &batch) < 0) return NULL;
    int64_t k = imin(m, n);
    tau = batch_tensor(a, 1, &k, a->dtype);
    info = INFO_T(a);
    if (!tau || !info) goto fail;
    if (k > 0 && batch > 0) RUN_NOGIL(TYPED(a, geqrf, (int)m, (int)n, batch, (void *)em_data(tau), (int *)em_data(info)));
    Py_DECREF(info);
    return (PyObject *)tau;
fail:
    Py_XDECREF(tau);
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_orgqr(a, tau): a (m x n, m >= n >= k, the first k columns holding
 * Householder vectors) becomes Q's first n columns, in place. */
static PyObject *f_orgqr(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *tau = em_arg_tensor(c, 1), *info = NULL;
    int64_t n, m, batch;
    if (check_mat(a, "householder_product", "A", &n, &m, &batch) < 0) return NULL;
    int64_t k = tau->ndim ? tau->sizes[tau->ndim - 1] : 0;
    EM_CHECK(tau->dtype == a->dtype && em_is_contiguous(tau) && tau->ndim == a->ndim - 1 &&
                 tau->numel == batch * k && m >= n && n >= k,
             PyExc_RuntimeError, "householder_product: A and tau do not match");
    info = INFO_T(a);
    if (!info) goto fail;
    if (n > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, orgqr, (int)m, (int)n, (int)k, batch, (void *)em_data(tau), (int *)em_data(info)));
    Py_DECREF(info);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_gesdd(a, compute_uv, full_matrices) -> (U, S, Vh, info), U and Vh
 * column-major like a (U: (..., ucols, m), Vh: (..., n, vtrows)) or None.
 * a is destroyed. */
static PyObject *f_gesdd(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *u = NULL, *s = NULL, *vt = NULL, *info = NULL;
    bool uv, full;
    int64_t n, m, batch;
    if (em_arg_bool(c, 1, &uv) < 0 || em_arg_bool(c, 2, &full) < 0 ||
        check_mat(a, "svd", "A", &n, &m, &batch) < 0)
        return NULL;
    int64_t k = imin(m, n), ucols = full ? m : k, vtrows = full ? n : k;
    int64_t us[2] = {ucols, m}, vs[2] = {n, vtrows};
    s = batch_tensor(a, 1, &k, em_complex_part(a->dtype)); /* real singular values */
    info = INFO_T(a);
    if (!s || !info) goto fail;
    if (uv) {
        u = batch_tensor(a, 2, us, a->dtype);
        vt = batch_tensor(a, 2, vs, a->dtype);
        if (!u || !vt) goto fail;
    }
    if (k > 0 && batch > 0) {
        char jobz = !uv ? 'N' : full ? 'A' : 'S';
        RUN_NOGIL(TYPED(a, gesdd, (int)m, (int)n, batch, jobz, (void *)em_data(s), u ? (void *)em_data(u) : NULL, (int)ucols,
                        vt ? (void *)em_data(vt) : NULL, (int)vtrows, (int *)em_data(info)));
    }
    if (!uv) {
        u = (EmTensor *)Py_NewRef(Py_None);
        vt = (EmTensor *)Py_NewRef(Py_None);
    }
    return Py_BuildValue("(NNNN)", u, s, vt, info);
fail:
    Py_XDECREF(u);
    Py_XDECREF(s);
    Py_XDECREF(vt);
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_syevd(a, upper, compute_v) -> (w, info): eigenvalues ascending;
 * a becomes the eigenvectors (columns) when compute_v. */
static PyObject *f_syevd(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *w = NULL, *info = NULL;
    bool upper, v;
    int64_t n, n2, batch;
    if (em_arg_bool(c, 1, &upper) < 0 || em_arg_bool(c, 2, &v) < 0 ||
        check_mat(a, "eigh", "A", &n, &n2, &batch) < 0)
        return NULL;
    EM_CHECK(n == n2, PyExc_RuntimeError, "eigh: A must be square");
    w = batch_tensor(a, 1, &n, em_complex_part(a->dtype)); /* real eigenvalues (heevd for complex) */
    info = INFO_T(a);
    if (!w || !info) goto fail;
    if (n > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, syevd, (int)n, batch, v ? 'V' : 'N', upper ? 'U' : 'L', (void *)em_data(w),
                        (int *)em_data(info)));
    return Py_BuildValue("(NN)", w, info);
fail:
    Py_XDECREF(w);
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_gelsd(a, b, rcond) -> (S, rank int64, info): minimum-norm least
 * squares; b (..., nrhs, max(m,n)) holds the solution in its first n rows. */
static PyObject *f_gelsd(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *x = em_arg_tensor(c, 1), *s = NULL, *rank = NULL, *info = NULL;
    int *rk = NULL;
    double rcond;
    int64_t n, m, batch, nrhs, ldb, b2;
    if (em_arg_float(c, 2, &rcond) < 0 || check_mat(a, "lstsq", "A", &n, &m, &batch) < 0 ||
        check_mat(x, "lstsq", "B", &nrhs, &ldb, &b2) < 0 || same_batch(a, x, "lstsq") < 0)
        return NULL;
    EM_CHECK(ldb == imax(m, n), PyExc_RuntimeError, "lstsq: B must have max(m, n) rows");
    int64_t k = imin(m, n);
    s = batch_tensor(a, 1, &k, em_complex_part(a->dtype)); /* real singular values */
    rank = batch_tensor(a, 0, NULL, EM_INT64);
    info = INFO_T(a);
    rk = calloc(imax(1, batch), sizeof(int));
    if (!s || !rank || !info) goto fail;
    EM_CHECK(rk, PyExc_MemoryError, "lstsq: out of memory");
    if (k > 0 && nrhs > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, gelsd, (void *)em_data(x), (int)m, (int)n, (int)nrhs, batch, rcond, (void *)em_data(s), rk,
                        (int *)em_data(info)));
    for (int64_t i = 0; i < batch; i++) ((int64_t *)em_data(rank))[i] = rk[i];
    free(rk);
    return Py_BuildValue("(NNN)", s, rank, info);
fail:
    free(rk);
    Py_XDECREF(s);
    Py_XDECREF(rank);
    Py_XDECREF(info);
    return NULL;
#endif
}

/* _lapack_trsm(a, b, left, upper, trans, unit): B <- op(A)^-1 B (left) or
 * B op(A)^-1, in place in b (BLAS trsm: a zero on the diagonal gives
 * inf/nan, as torch's solve_triangular, rather than an error). */
static PyObject *f_trsm(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *x = em_arg_tensor(c, 1);
    bool left, upper, trans, unit;
    int64_t k, k2, ncol, m, batch, b2;
    if (em_arg_bool(c, 2, &left) < 0 || em_arg_bool(c, 3, &upper) < 0 || em_arg_bool(c, 4, &trans) < 0 ||
        em_arg_bool(c, 5, &unit) < 0 || check_mat(a, "solve_triangular", "A", &k, &k2, &batch) < 0 ||
        check_mat(x, "solve_triangular", "B", &ncol, &m, &b2) < 0 || same_batch(a, x, "solve_triangular") < 0)
        return NULL;
    EM_CHECK(k == k2 && k == (left ? m : ncol), PyExc_RuntimeError, "solve_triangular: A and B do not match");
    if (m > 0 && ncol > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, trsm, (void *)em_data(x), (int)m, (int)ncol, batch, left, upper, trans, unit));
    Py_RETURN_NONE;
fail:
    return NULL;
#endif
}

/* _lapack_geev(a, compute_v) -> (w, vr, info): a's eigenvalues (..., n) and,
 * when compute_v, its right eigenvectors as the columns of vr (column-major
 * like a; None otherwise), both complex (complex64 for float32 / complex64
 * a). a is destroyed. */
static PyObject *f_geev(EmCall *c) {
    NO_LAPACK_CHECK();
#ifdef EM_LAPACK
    EmTensor *a = em_arg_tensor(c, 0), *w = NULL, *vr = NULL, *info = NULL;
    bool v;
    int64_t n, n2, batch;
    if (em_arg_bool(c, 1, &v) < 0 || check_mat(a, "eig", "A", &n, &n2, &batch) < 0) return NULL;
    EM_CHECK(n == n2, PyExc_RuntimeError, "eig: A must be square");
    int64_t vs[2] = {n, n};
    EmDType cdt = em_complex_of(a->dtype); /* complex results for real input too (sgeev/dgeev) */
    w = batch_tensor(a, 1, &n, cdt);
    info = INFO_T(a);
    if (!w || !info) goto fail;
    if (v && !(vr = batch_tensor(a, 2, vs, cdt))) goto fail;
    if (n > 0 && batch > 0)
        RUN_NOGIL(TYPED(a, geev, (int)n, batch, (void *)em_data(w), vr ? (void *)em_data(vr) : NULL,
                        (int *)em_data(info)));
    if (!vr) vr = (EmTensor *)Py_NewRef(Py_None);
    return Py_BuildValue("(NNN)", w, vr, info);
fail:
    Py_XDECREF(w);
    Py_XDECREF(vr);
    Py_XDECREF(info);
    return NULL;
#endif
}

static EmOpDef lapack_functions[] = {
    {"_lapack_getrf", "_lapack_getrf(Tensor a)", f_getrf},
    {"_lapack_getrs", "_lapack_getrs(Tensor lu, Tensor pivots, Tensor b, bool trans=False)", f_getrs},
    {"_lapack_potrf", "_lapack_potrf(Tensor a, bool upper=False)", f_potrf},
    {"_lapack_potrs", "_lapack_potrs(Tensor factor, Tensor b, bool upper=False)", f_potrs},
    {"_lapack_geqrf", "_lapack_geqrf(Tensor a)", f_geqrf},
    {"_lapack_orgqr", "_lapack_orgqr(Tensor a, Tensor tau)", f_orgqr},
    {"_lapack_gesdd", "_lapack_gesdd(Tensor a, bool compute_uv=True, bool full_matrices=False)", f_gesdd},
    {"_lapack_syevd", "_lapack_syevd(Tensor a, bool upper=False, bool compute_v=True)", f_syevd},
    {"_lapack_geev", "_lapack_geev(Tensor a, bool compute_v=True)", f_geev},
    {"_lapack_gelsd", "_lapack_gelsd(Tensor a, Tensor b, float rcond=-1)", f_gelsd},
    {"_lapack_trsm", "_lapack_trsm(Tensor a, Tensor b, bool left=True, bool upper=True, bool trans=False, bool unit=False)", f_trsm},
};

int em_init_lapack(PyObject *m) {
#ifdef EM_LAPACK
    if (PyModule_AddIntConstant(m, "_has_lapack", 1) < 0) return -1;
#else
    if (PyModule_AddIntConstant(m, "_has_lapack", 0) < 0) return -1;
#endif
    return em_register_functions(m, lapack_functions, sizeof lapack_functions / sizeof lapack_functions[0]);
}
