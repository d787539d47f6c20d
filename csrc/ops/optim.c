/* optim.c — fused optimizer steps (DESIGN.md §7: fused kernels where training
 * spends its time).
 *
 *   _fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *,
 *                lr, beta1, beta2, weight_decay, eps, maximize)
 *   _fused_adamw_(...)  the same with decoupled weight decay
 *
 * torch's private ops of the same names, for python/ember/optim/adam.py and
 * adamw.py: one pass over param, grad, exp_avg, exp_avg_sq [, max_exp_avg_sq]
 * per parameter instead of a dozen elementwise ops each reading and writing
 * whole tensors. The lists hold one entry per parameter; max_exp_avg_sqs is
 * empty unless amsgrad (torch passes a separate amsgrad flag; here the list
 * says it, which keeps the signature within EM_MAX_PARAMS). state_steps are
 * the 0-d 'step' tensors, already incremented by the caller (as torch does).
 *
 * Only contiguous floating CPU tensors of one dtype per parameter are taken
 * (the optimizers fall back to their op-by-op path otherwise; torch's also
 * takes strided ones). Half types compute in float32 and round on store. Every
 * argument is checked before anything is written, so a bad call changes
 * nothing. The math is torch's documented Adam/AdamW step, in the order the
 * op-by-op path runs it:
 *
 *   g  = maximize ? -grad : grad
 *   Adam:  g += weight_decay * param        AdamW: param *= 1 - lr * weight_decay
 *   m  = lerp(m, g, 1 - beta1)
 *   v  = beta2 * v + (1 - beta2) * g * g
 *   vmax = max(vmax, v)                      (amsgrad; the denominator uses vmax)
 *   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
 *
 * GPU parameters go to the backend's `adam` entry, one call for the whole
 * list, after the same checks (the steps are read on the host: they are
 * 0-d CPU tensors as the optimizers keep them, or copied over once).
 */
#include "ember.h"
#include "ops/fused_gpu.h"
#include "ops/device_slot.h"
#include "cpu/reduce.h" /* EM_CLONES */

#include <math.h>

/* The step's constants, computed once per parameter in double. */
typedef struct {
    double lr, beta1, beta2, weight_decay, eps;
    double step_size;             /* lr / (1 - beta1^step) */
    double bias_correction2_sqrt; /* sqrt(1 - beta2^step) */
    bool maximize, decoupled;
} AdamCoef;

/* One parameter's n elements; vmax NULL unless amsgrad. T the storage type,
 * CT the compute type (float for float32 and the half types, double for
 * float64), LD/ST convert between them; the constants are rounded to CT once,
 * as a tensor op holds its scalar arguments.
 *
 * The loop body takes the step's options as constants (l2: Adam's weight
 * decay, ams: amsgrad, low: which form of lerp) and the kernel calls it once
 * per combination, so that each loop is branch-free and the compiler
 * vectorizes it. maximize and AdamW's decay are multiplications by 1 when
 * off, which change nothing. */
#define LD_SAME(x) (x)
#define ADAM_KERNEL(T, CT, LD, ST, SQRT, NAME)                                                      \
    static inline __attribute__((always_inline)) void NAME##_loop(                                  \
        T *restrict p, const T *restrict g_in, T *restrict m, T *restrict v, T *restrict vmax,      \
        int64_t n, const AdamCoef *c, const bool l2, const bool ams, const bool low) {              \
        const CT wd = (CT)c->weight_decay;                                                          \
        const CT decay = c->decoupled ? (CT)(1.0 - c->lr * c->weight_decay) : (CT)1;                \
        const CT w1 = (CT)(1.0 - c->beta1), b2 = (CT)c->beta2, w2 = (CT)(1.0 - c->beta2);           \
        const CT bc2 = (CT)c->bias_correction2_sqrt, eps = (CT)c->eps;                              \
        const CT neg_step = (CT)(-c->step_size);                                                    \
        const CT sign = c->maximize ? (CT)-1 : (CT)1;                                               \
        for (int64_t i = 0; i < n; i++) {                                                           \
            CT g = sign * LD(g_in[i]), x = LD(p[i]), m0 = LD(m[i]);                                 \
            if (l2) g = g + wd * x;                                                                 \
            x = x * decay;                                                                          \
            /* torch's lerp: start + w * (end - start) for w < 0.5, else the mirror form */       \
            CT mi = low ? m0 + w1 * (g - m0) : g - (g - m0) * ((CT)1 - w1);                         \
            CT vi = LD(v[i]) * b2 + w2 * g * g;                                                     \
            m[i] = ST(mi);                                                                          \
            v[i] = ST(vi);                                                                          \
            if (ams) {                                                                              \
                CT old = LD(vmax[i]);                                                               \
                vi = old > vi || old != old ? old : vi; /* maximum: nan wins */                     \
                vmax[i] = ST(vi);                                                                   \
            }                                                                                       \
            CT denom = SQRT(vi) / bc2 + eps;                                                        \
            p[i] = ST(x + neg_step * (mi / denom));                                                 \
        }                                                                                           \
    }                                                                                               \
    EM_CLONES static void NAME(T *p, const T *g, T *m, T *v, T *vmax, int64_t n, const AdamCoef *c) { \
        bool l2 = !c->decoupled && c->weight_decay != 0, ams = vmax != NULL;                        \
        bool low = (CT)(1.0 - c->beta1) < (CT)0.5;                                                  \
        switch ((l2 ? 4 : 0) | (ams ? 2 : 0) | (low ? 1 : 0)) {                                    \
        case 0: NAME##_loop(p, g, m, v, vmax, n, c, false, false, false); break;                    \
        case 1: NAME##_loop(p, g, m, v, vmax, n, c, false, false, true); break;                     \
        case 2: NAME##_loop(p, g, m, v, vmax, n, c, false, true, false); break;                     \
        case 3: NAME##_loop(p, g, m, v, vmax, n, c, false, true, true); break;                      \
        case 4: NAME##_loop(p, g, m, v, vmax, n, c, true, false, false); break;                     \
        case 5: NAME##_loop(p, g, m, v, vmax, n, c, true, false, true); break;                      \
        case 6: NAME##_loop(p, g, m, v, vmax, n, c, true, true, false); break;                      \
        default: NAME##_loop(p, g, m, v, vmax, n, c, true, true, true); break;                      \
        }                                                                                           \
    }
ADAM_KERNEL(float, float, LD_SAME, LD_SAME, sqrtf, adam_f32)
ADAM_KERNEL(double, double, LD_SAME, LD_SAME, sqrt, adam_f64)
ADAM_KERNEL(uint16_t, float, em_f16_to_f32, em_f32_to_f16, sqrtf, adam_f16)
ADAM_KERNEL(uint16_t, float, em_bf16_to_f32, em_f32_to_bf16, sqrtf, adam_bf16)

/* A parameter's pointers, gathered while checking. */
typedef struct {
    char *p, *g, *m, *v, *vmax;
    int64_t n;
    EmDType dtype;
    AdamCoef coef;
    double step; /* as read (rounded to float32) */
} AdamJob;

static void adam_job_run(const AdamJob *j, int64_t lo, int64_t hi) {
    int64_t sz = em_itemsize(j->dtype), k = hi - lo;
    char *p = j->p + lo * sz, *g = j->g + lo * sz, *m = j->m + lo * sz, *v = j->v + lo * sz;
    char *vmax = j->vmax ? j->vmax + lo * sz : NULL;
    switch (j->dtype) {
    case EM_FLOAT32: adam_f32((float *)p, (float *)g, (float *)m, (float *)v, (float *)vmax, k, &j->coef); break;
    case EM_FLOAT64: adam_f64((double *)p, (double *)g, (double *)m, (double *)v, (double *)vmax, k, &j->coef); break;
    case EM_FLOAT16:
        adam_f16((uint16_t *)p, (uint16_t *)g, (uint16_t *)m, (uint16_t *)v, (uint16_t *)vmax, k, &j->coef);
        break;
    default:
        adam_bf16((uint16_t *)p, (uint16_t *)g, (uint16_t *)m, (uint16_t *)v, (uint16_t *)vmax, k, &j->coef);
        break;
    }
}

static void adam_chunk(void *ctx, Py_ssize_t k, int64_t chunk, int64_t lo, int64_t hi) {
    (void)chunk;
    adam_job_run((const AdamJob *)ctx + k, lo, hi);
}

/* One parameter's step on host memory (the fake CUDA backend runs it). */
void em_cpu_adam_step(int dtype, void *p, const void *g, void *m, void *v, void *vmax, int64_t n, double lr,
                      double beta1, double beta2, double weight_decay, double eps, double step, bool maximize,
                      bool decoupled) {
    AdamJob j = {p, (char *)g, m, v, vmax, n, (EmDType)dtype,
                 {lr, beta1, beta2, weight_decay, eps, lr / (1.0 - pow(beta1, step)), sqrt(1.0 - pow(beta2, step)),
                  maximize, decoupled}};
    adam_job_run(&j, 0, n);
}

/* Check that t can be written by the fused step as the `what` of parameter
 * k, with p's shape and dtype (t == p for the parameter itself); `written`:
 * the step writes it (all but the grad). */
static int check_operand(EmCall *c, EmTensor *t, EmTensor *p, const char *what, Py_ssize_t k,
                         bool written) {
    char b1[EM_SHAPE_BUF], b2[EM_SHAPE_BUF];
    const char *name = c->def->name;
    if (em_is_cpu(p) && em_check_cpu(t, name) < 0) return -1; /* not dispatch: a CPU operand's rules */
    if (!em_device_eq(em_device(t), em_device(p))) {
        char b[32];
        PyErr_Format(PyExc_RuntimeError, "%s(): %s %zd is on %s, not on its parameter's device", name, what, k,
                     em_device_str(em_device(t), b, sizeof b));
        return -1;
    }
    if (!em_is_float((EmDType)t->dtype)) { /* torch's dispatch error */
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s' (%s %zd)",
                     name, em_dtype_name((EmDType)t->dtype), what, k);
        return -1;
    }
    if (t->dtype != p->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s(): %s %zd has dtype %s but its parameter has dtype %s",
                     name, what, k, em_dtype_name((EmDType)t->dtype), em_dtype_name((EmDType)p->dtype));
        return -1;
    }
    if (t->ndim != p->ndim || memcmp(t->sizes, p->sizes, sizeof(int64_t) * p->ndim) != 0) {
        PyErr_Format(PyExc_RuntimeError, "%s(): %s %zd has shape %s but its parameter has shape %s",
                     name, what, k, em_shape_str(t->ndim, t->sizes, b1, sizeof b1),
                     em_shape_str(p->ndim, p->sizes, b2, sizeof b2));
        return -1;
    }
    if (!em_is_contiguous(t)) {
        PyErr_Format(PyExc_RuntimeError, "%s(): %s %zd is not contiguous", name, what, k);
        return -1;
    }
    if (written && t->is_inference && !em_inference_mode()) {
        PyErr_SetString(PyExc_RuntimeError,
                     "Inplace update to inference tensor outside InferenceMode is not allowed.");
        return -1;
    }
    /* like any in-place op: a leaf that requires grad is written only under no_grad */
    if (written && em_grad_enabled() && t->requires_grad && !t->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a leaf Variable that requires grad is being used in an in-place operation.");
        return -1;
    }
    return 0;
}

/* 1 when a and b's element ranges share memory. */
static bool overlaps(const EmTensor *a, const EmTensor *b) {
    if (a->storage != b->storage || a->numel == 0 || b->numel == 0) return false;
    int64_t sa = a->offset, sb = b->offset;
    return sa < sb + b->numel && sb < sa + a->numel;
}

/* The checked jobs in one backend call (jobs hold device pointers). 0 / -1. */
static int adam_gpu(const AdamJob *jobs, Py_ssize_t n, EmDevice dev) {
    size_t np = (size_t)n;
    void **ptrs = PyMem_Calloc(5 * np, sizeof(void *));
    int *dtypes = PyMem_Calloc(np, sizeof(int));
    int64_t *numels = PyMem_Calloc(np, sizeof(int64_t));
    double *steps = PyMem_Calloc(np, sizeof(double));
    int rc = -1;
    if (!ptrs || !dtypes || !numels || !steps) {
        PyErr_NoMemory();
        goto done;
    }
    bool ams = jobs[0].vmax != NULL;
    for (size_t k = 0; k < np; k++) {
        const AdamJob *j = &jobs[k];
        ptrs[k] = j->p, ptrs[np + k] = j->g, ptrs[2 * np + k] = j->m, ptrs[3 * np + k] = j->v;
        ptrs[4 * np + k] = j->vmax;
        dtypes[k] = j->dtype;
        numels[k] = j->n;
        steps[k] = j->step;
    }
    const AdamCoef *c0 = &jobs[0].coef;
    EmCudaAdam a = {(int)n, dtypes, ptrs, (const void *const *)(ptrs + np), ptrs + 2 * np, ptrs + 3 * np,
                    ams ? ptrs + 4 * np : NULL, numels, steps, c0->lr, c0->beta1, c0->beta2, c0->weight_decay,
                    c0->eps, c0->maximize, c0->decoupled};
    rc = em_cuda->adam(dev.index, &a) < 0 ? em_cuda_error(c0->decoupled ? "_fused_adamw_" : "_fused_adam_") : 0;
done:
    PyMem_Free(ptrs);
    PyMem_Free(dtypes);
    PyMem_Free(numels);
    PyMem_Free(steps);
    return rc;
}

static PyObject *fused_adam_op(EmCall *c, bool gpu) {
    enum { P, G, M, V, VMAX, STEPS };
    PyObject *lists[6] = {NULL};
    AdamJob *jobs = NULL;
    int64_t *sizes = NULL;
    PyObject *result = NULL;
    const char *name = c->def->name;
    bool decoupled = c->def == &em_op_defs[EM_OP__fused_adamw_];
    double lr, beta1, beta2, wd, eps;
    bool maximize;
    EM_TRY(em_arg_float(c, 6, &lr) == 0 && em_arg_float(c, 7, &beta1) == 0 &&
           em_arg_float(c, 8, &beta2) == 0 && em_arg_float(c, 9, &wd) == 0 &&
           em_arg_float(c, 10, &eps) == 0 && em_arg_bool(c, 11, &maximize) == 0);

    Py_ssize_t n = -1, nmax = -1;
    EM_TRY(lists[P] = em_arg_tensor_list(c, P, &n));
    EM_TRY(lists[G] = em_arg_tensor_list(c, G, &n));
    EM_TRY(lists[M] = em_arg_tensor_list(c, M, &n));
    EM_TRY(lists[V] = em_arg_tensor_list(c, V, &n));
    EM_TRY(lists[VMAX] = em_arg_tensor_list(c, VMAX, &nmax));
    EM_TRY(lists[STEPS] = em_arg_tensor_list(c, STEPS, &n));
    bool amsgrad = nmax > 0;
    EM_CHECK(!amsgrad || nmax == n, PyExc_RuntimeError,
             "%s(): Tensor list 'max_exp_avg_sqs' must be empty or have the same length as 'self' (%zd), "
             "but got %zd", name, n, nmax);
    if (gpu && !em_cuda->adam) {
        em_fused_no_kernel(name);
        goto fail;
    }
    jobs = PyMem_Calloc(n ? n : 1, sizeof(AdamJob));
    sizes = PyMem_Calloc(n ? n : 1, sizeof(int64_t));
    if (!jobs || !sizes) {
        PyErr_NoMemory();
        goto fail;
    }

    /* check everything first: a failed call writes nothing */
    for (Py_ssize_t k = 0; k < n; k++) {
        EmTensor *t[5];
        for (int l = P; l <= VMAX; l++)
            t[l] = l == VMAX && !amsgrad ? NULL : (EmTensor *)PySequence_Fast_GET_ITEM(lists[l], k);
        static const char *what[5] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
        for (int l = P; l <= VMAX; l++) {
            if (t[l]) EM_TRY(check_operand(c, t[l], t[P], what[l], k, l != G) == 0);
        }
        /* the written tensors must be distinct memory (the grad may be anything read-only) */
        for (int a = P; a <= VMAX; a++) {
            for (int b = a + 1; b <= VMAX; b++) {
                if (a == G || !t[a] || !t[b]) continue;
                EM_CHECK(!overlaps(t[a], t[b]), PyExc_RuntimeError,
                         "%s(): %s %zd and %s %zd share memory", name, what[a], k, what[b], k);
            }
        }
        EmTensor *st = (EmTensor *)PySequence_Fast_GET_ITEM(lists[STEPS], k);
        if (!gpu) EM_TRY(em_check_cpu(st, name) == 0);
        EM_CHECK(st->numel == 1, PyExc_RuntimeError,
                 "%s(): state_steps %zd must hold one value, but has %lld elements", name, k,
                 (long long)st->numel);
        double step;
        if (em_is_cpu(st)) { /* not dispatch: torch keeps 0-d steps on the host beside GPU parameters */
            step = em_scalar_to_double(em_scalar_load(em_data(st), (EmDType)st->dtype));
        } else { /* a step kept on the device: read it once */
            EmTensor *h = em_to_device(st, em_cpu(), false);
            EM_TRY(h);
            step = em_scalar_to_double(em_scalar_load(em_data(h), (EmDType)h->dtype));
            Py_DECREF(h);
        }
        AdamJob *j = &jobs[k];
        j->p = em_data(t[P]);
        j->g = em_data(t[G]);
        j->m = em_data(t[M]);
        j->v = em_data(t[V]);
        j->vmax = amsgrad ? em_data(t[VMAX]) : NULL;
        j->n = t[P]->numel;
        j->dtype = (EmDType)t[P]->dtype;
        /* torch reads the step as float32 and computes the corrections in double */
        step = (double)(float)step;
        j->step = step;
        j->coef = (AdamCoef){lr, beta1, beta2, wd, eps, lr / (1.0 - pow(beta1, step)),
                             sqrt(1.0 - pow(beta2, step)), maximize, decoupled};
    }

    if (gpu) {
        EM_TRY(adam_gpu(jobs, n, em_device((EmTensor *)PySequence_Fast_GET_ITEM(lists[P], 0))) == 0);
        goto versions;
    }
    /* All parameters in one parallel region (a region per tensor cost a fork
     * and a barrier for each bias and norm weight). */
    for (Py_ssize_t k = 0; k < n; k++) sizes[k] = jobs[k].n;
    em_parallel_chunks(n, sizes, adam_chunk, jobs);

versions:
    /* Note [when versions change]: every written tensor */
    for (Py_ssize_t k = 0; k < n; k++) {
        for (int l = P; l <= VMAX; l++) {
            if (l == G || (l == VMAX && !amsgrad)) continue;
            em_bump_version((EmTensor *)PySequence_Fast_GET_ITEM(lists[l], k));
        }
    }
    result = Py_NewRef(Py_None);
fail:
    for (int l = 0; l < 6; l++) Py_XDECREF(lists[l]);
    PyMem_Free(jobs);
    PyMem_Free(sizes);
    return result;
}
EM_DEVICE_SLOTS(fused_adam, fused_adam_op)
