/* attention.c — front-ends of the fused CPU attention (torch's
 * _scaled_dot_product_flash_attention_for_cpu and its _backward): argument
 * checks with torch's messages, operands in the compute dtype (half types
 * compute in float32; strided views with a unit last stride are read in
 * place), the mask's broadcast strides, and the kernels in cpu/attention.c
 * (Note [attention layout]). F.scaled_dot_product_attention picks this op
 * where torch picks its CPU flash kernel. Beyond torch's op, the mask may
 * also be bool (true takes part), and the backward takes attn_mask and
 * scale positionally too. Backward formula: autograd/derivatives_attn.c.
 * Also torch's CUDA op _scaled_dot_product_flash_attention and its backward
 * (the GPU kernels: cuda/attention.cu), with dropout inside the kernel, and
 * torch's memory-efficient op _scaled_dot_product_efficient_attention (any
 * float dtype, an attn_bias) on the same kernels (their EmCudaAttentionEx entries). */
#include "../ember.h"
#include "../cpu/attention.h"
#include "fused_gpu.h"
#include <math.h>



/* Tensors a call made (operands in the compute dtype), released together. */
typedef struct {
    EmTensor *own[16];
    int n;
} Owned;

static EmTensor *own(Owned *o, EmTensor *t) {
    if (t && o->n == 16) { /* never: a call makes at most 12 */
        Py_DECREF(t);
        PyErr_SetString(PyExc_SystemError, "ember: attention operand list overflow");
        return NULL;
    }
    if (t) o->own[o->n++] = t;
    return t;
}

static void release(Owned *o) {
    for (int i = 0; i < o->n; i++) Py_DECREF(o->own[i]);
    o->n = 0;
}

/* t (4-d) in the compute dtype with unit last stride and a row stride BLAS
 * accepts as a leading dimension: t itself when it already is (a strided
 * view such as nanoGPT's q.view(B, T, H, D).transpose(1, 2) is read in
 * place), else a contiguous copy. */
static EmTensor *operand(Owned *o, EmTensor *t, EmDType ct, EmAttnOperand *op) {
    EmTensor *x = own(o, em_to_dtype(t, ct, false));
    if (!x) return NULL;
    int64_t last = x->sizes[3];
    bool direct = (x->strides[3] == 1 || last <= 1) && x->strides[2] >= (last > 1 ? last : 1);
    if (!direct && !(x = own(o, em_contiguous(x)))) return NULL;
    if (op) {
        op->data = em_data(x);
        op->sb = x->strides[0];
        op->sh = x->strides[1];
        op->sr = x->strides[2];
    }
    return x;
}

/* The checks the CPU and CUDA ops share (torch's messages): 4-d, one
 * floating dtype, (B, H, L, D) / (B, Hk, S, D) shapes, Hk dividing H. */
static int check_qkv(const char *who, EmTensor *q, EmTensor *k, EmTensor *v, double dropout) {
    if (dropout > 0) {
        PyErr_Format(PyExc_RuntimeError, "%s: Currently do not support dropout > 0", who);
        return -1;
    }
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
        PyErr_Format(PyExc_RuntimeError, "%s: Accept only 4 dims inputs shape of {B, H, T, K}", who);
        return -1;
    }
    if (q->dtype != k->dtype || q->dtype != v->dtype) {
        PyErr_Format(PyExc_RuntimeError, "Expected query, key, and value to have the same dtype, but got "
                     "query.dtype: %s key.dtype: %s and value.dtype: %s instead.", em_dtype_ctype((EmDType)q->dtype),
                     em_dtype_ctype((EmDType)k->dtype), em_dtype_ctype((EmDType)v->dtype));
        return -1;
    }
    if (!em_is_float((EmDType)q->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected query, key and value of a floating point dtype, but got %s",
                     who, em_dtype_ctype((EmDType)q->dtype));
        return -1;
    }
    char a[128], b[128], c[128];
    em_shape_str(q->ndim, q->sizes, a, sizeof a);
    em_shape_str(k->ndim, k->sizes, b, sizeof b);
    em_shape_str(v->ndim, v->sizes, c, sizeof c);
    if (q->sizes[0] != k->sizes[0] || q->sizes[0] != v->sizes[0] || k->sizes[1] != v->sizes[1] ||
        k->sizes[2] != v->sizes[2] || q->sizes[3] != k->sizes[3] || q->sizes[3] != v->sizes[3]) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected query (B, H, L, D), key (B, Hk, S, D) and value "
                     "(B, Hk, S, D), but got query %s, key %s and value %s", who, a, b, c);
        return -1;
    }
    if (k->sizes[1] == 0 ? q->sizes[1] != 0 : q->sizes[1] % k->sizes[1] != 0) {
        PyErr_SetString(PyExc_RuntimeError, "Number of heads in key and value must divide the number of heads in query");
        return -1;
    }
    return 0;
}

/* The checks shared by forward and backward, then the problem p with its
 * operands (owned by o). q, k, v, mask as given by the user. */
static int setup(EmAttn *p, Owned *o, EmTensor *q, EmTensor *k, EmTensor *v, EmTensor *mask, double dropout,
                 bool causal, PyObject *scale_arg) {
    const char *who = "scaled_dot_product_attention_flash_attention";
    if (check_qkv(who, q, k, v, dropout) < 0) return -1;
    EmDType ct = em_compute_dtype((EmDType)q->dtype);
    *p = (EmAttn){.dt = ct, .B = q->sizes[0], .H = q->sizes[1], .Hk = k->sizes[1], .L = q->sizes[2],
                  .S = k->sizes[2], .D = q->sizes[3], .Dv = v->sizes[3], .causal = causal};
    if (p->Hk == 0) p->Hk = 1, p->H = 0; /* no heads at all: nothing to do */
    if (scale_arg == Py_None || !scale_arg) {
        p->scale = p->D > 0 ? 1.0 / sqrt((double)p->D) : INFINITY;
    } else {
        p->scale = PyFloat_AsDouble(scale_arg);
        if (p->scale == -1.0 && PyErr_Occurred()) return -1;
    }
    if (!operand(o, q, ct, &p->q) || !operand(o, k, ct, &p->k) || !operand(o, v, ct, &p->v)) return -1;
    if (mask) {
        if (mask->dtype != EM_BOOL && !em_is_float((EmDType)mask->dtype)) {
            PyErr_Format(PyExc_RuntimeError, "Expected attn_mask dtype to be bool or float or to match query "
                         "dtype, but got attn_mask.dtype: %s and  query.dtype: %s instead.",
                         em_dtype_ctype((EmDType)mask->dtype), em_dtype_ctype((EmDType)q->dtype));
            return -1;
        }
        const int64_t full[4] = {p->B, q->sizes[1], p->L, p->S};
        if (mask->ndim > 4) goto bad_mask;
        for (int d = 0; d < 4; d++) {
            int md = d - (4 - mask->ndim);
            int64_t size = md < 0 ? 1 : mask->sizes[md];
            if (size != 1 && size != full[d]) goto bad_mask;
        }
        EmTensor *m = mask;
        if (mask->dtype != EM_BOOL && !(m = own(o, em_to_dtype(mask, ct, false)))) return -1;
        for (int d = 0; d < 4; d++) { /* broadcast strides of the (converted) mask */
            int md = d - (4 - m->ndim);
            p->ms[d] = md < 0 || m->sizes[md] == 1 ? 0 : m->strides[md];
        }
        p->mask = em_data(m);
        p->mask_bool = mask->dtype == EM_BOOL;
    }
    return 0;
bad_mask:;
    char ms[128];
    em_shape_str(mask->ndim, mask->sizes, ms, sizeof ms);
    PyErr_Format(PyExc_RuntimeError, "%s: attn_mask of shape %s does not broadcast to (B, H, L, S) = "
                 "[%lld, %lld, %lld, %lld]", who, ms, (long long)p->B, (long long)q->sizes[1], (long long)p->L,
                 (long long)p->S);
    return -1;
}

/* a result in the compute dtype, rounded to the user's dtype (half types) */
static EmTensor *to_user(EmTensor *t, EmDType dt) {
    EmTensor *r = em_to_dtype(t, dt, false);
    Py_DECREF(t);
    return r;
}

static bool big(const EmAttn *p) { return em_cpu_attention_work(p) >= 65536.0; }

/* A new tensor of `sizes` on `dev` whose dims are laid out in the order of
 * like's strides (outermost first; ties keep dim order), as torch's
 * empty_like infers for a strided input: the output of nanoGPT's q (a
 * [B, T, H, D] buffer seen as [B, H, T, D]) and its gradient come out in the
 * same [B, T, H, D] order, so the way back to [B, T, C] is a view, not a
 * copy. Contiguous when that order would not keep the last dim innermost
 * (the kernels write whole rows). st gets the (batch, head, row) element
 * strides. */
static EmTensor *empty_in_dim_order(const EmTensor *like, const int64_t sizes[4], EmDType dt, EmDevice dev,
                                    int64_t st[3]) {
    int perm[4] = {0, 1, 2, 3};
    for (int i = 1; i < 4; i++) { /* insertion sort, stable: descending strides */
        int x = perm[i], j = i;
        while (j > 0 && like->strides[perm[j - 1]] < like->strides[x]) {
            perm[j] = perm[j - 1];
            j--;
        }
        perm[j] = x;
    }
    if (perm[3] != 3)
        for (int i = 0; i < 4; i++) perm[i] = i;
    int64_t strides[4], acc = 1;
    for (int i = 3; i >= 0; i--) {
        strides[perm[i]] = acc;
        acc *= sizes[perm[i]] > 1 ? sizes[perm[i]] : 1;
    }
    EmTensor *t = em_empty_strided(4, sizes, strides, dt, dev);
    if (t)
        for (int d = 0; d < 3; d++) st[d] = t->strides[d];
    return t;
}

/* The CPU forward: (output in q's dtype, logsumexp in the compute dtype) */
static PyObject *cpu_forward(EmTensor *q, EmTensor *k, EmTensor *v, EmTensor *mask, double dropout, bool causal,
                             PyObject *scale_arg) {
    EmAttn p;
    Owned o = {{0}, 0};
    EmTensor *out = NULL, *lse = NULL;
    PyObject *res = NULL;
    if (setup(&p, &o, q, k, v, mask, dropout, causal, scale_arg) < 0) goto done;
    const int64_t os[4] = {q->sizes[0], q->sizes[1], q->sizes[2], v->sizes[3]};
    const EmDevice dev = em_device(q); /* the CPU, or meta (Note [meta device]: no kernel) */
    if (!(out = empty_in_dim_order(q, os, p.dt, dev, p.out_st)) || !(lse = em_empty(3, os, p.dt, dev))) goto done;
    if (!em_is_meta(q)) {
        PyThreadState *ts = big(&p) ? PyEval_SaveThread() : NULL;
        int rc = em_cpu_attention_forward(&p, em_data(out), em_data(lse));
        if (ts) PyEval_RestoreThread(ts);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (!(out = to_user(out, (EmDType)q->dtype))) goto done;
    res = PyTuple_Pack(2, out, lse);
done:
    release(&o);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    return res;
}

/* (query, key, value, dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp) */
PyObject *em_impl_sdpa_flash_cpu(EmCall *c) {
    double dropout;
    bool causal;
    if (em_arg_float(c, 3, &dropout) < 0 || em_arg_bool(c, 4, &causal) < 0) return NULL;
    return cpu_forward(em_arg_tensor(c, 0), em_arg_tensor(c, 1), em_arg_tensor(c, 2), em_arg_tensor(c, 5), dropout,
                       causal, c->args[6]);
}

static int expect_shape(const char *who, EmTensor *t, const char *what, int nd, const int64_t *s) {
    bool ok = t->ndim == nd;
    for (int d = 0; ok && d < nd; d++) ok = t->sizes[d] == s[d];
    if (ok) return 0;
    char a[128];
    em_shape_str(t->ndim, t->sizes, a, sizeof a);
    PyErr_Format(PyExc_RuntimeError, "%s: %s of shape %s does not fit the forward's (expected %d dims: [%lld, "
                 "%lld, %lld%s])", who, what, a, nd, (long long)s[0], (long long)s[1], (long long)s[2],
                 nd == 4 ? ", Dv" : "");
    return -1;
}

/* Note [attention gradients share a storage]: when q, k and v are equal
 * views of one storage a fixed distance apart, laid out so that together
 * they overlap nowhere (the pieces of one qkv projection, split and viewed
 * into heads, as in nanoGPT), their gradients are made the same way: views
 * of one new storage at the same relative offsets. The gradients then pass
 * back through the views as views, and split's backward finds them already
 * side by side (Note [gradient pieces in place]): no concatenating copies.
 * Returns 1 with the three views set (zeroed), 0 when the inputs are not
 * laid out so (nothing set), -1 on error. */
static int grads_sharing_storage(EmTensor *q, EmTensor *k, EmTensor *v, EmDType dt, EmTensor **dq, EmTensor **dk,
                                 EmTensor **dv) {
    EmTensor *in[3] = {q, k, v};
    for (int i = 1; i < 3; i++)
        if (in[i]->storage != q->storage || memcmp(in[i]->sizes, q->sizes, sizeof(int64_t) * 4) != 0 ||
            memcmp(in[i]->strides, q->strides, sizeof(int64_t) * 4) != 0)
            return 0;
    if (q->dtype != dt || q->numel == 0 || (q->strides[3] != 1 && q->sizes[3] != 1)) return 0;
    int64_t lo = q->offset, hi = q->offset;
    for (int i = 1; i < 3; i++) {
        lo = in[i]->offset < lo ? in[i]->offset : lo;
        hi = in[i]->offset > hi ? in[i]->offset : hi;
    }
    int64_t mid = q->offset + k->offset + v->offset - lo - hi, gap = mid - lo;
    if (gap <= 0 || hi - mid != gap) return 0;
    /* the three as one layout with a leading dim of 3 (stride gap) */
    int64_t sizes[5] = {3, q->sizes[0], q->sizes[1], q->sizes[2], q->sizes[3]};
    int64_t strides[5] = {gap, q->strides[0], q->strides[1], q->strides[2], q->strides[3]};
    for (int d = 0; d < 4; d++)
        if (q->strides[d] < 0) return 0;
    if (!em_layout_non_overlapping(5, sizes, strides)) return 0;
    int64_t span = 1 + 2 * gap;
    for (int d = 0; d < 4; d++) span += (q->sizes[d] - 1) * q->strides[d];
    EmTensor *base = em_empty(1, &span, dt, em_cpu());
    if (!base) return -1;
    memset(em_data(base), 0, (size_t)span * em_itemsize(dt)); /* the kernels accumulate: one zeroing pass */
    EmTensor **outs[3] = {dq, dk, dv};
    for (int i = 0; i < 3; i++)
        *outs[i] = em_view_of(base, 4, q->sizes, q->strides, in[i]->offset - lo);
    Py_DECREF(base);
    if (!*dq || !*dk || !*dv) return -1;
    return 1;
}

/* The CPU backward: (grad_query, grad_key, grad_value) in q's dtype */
static PyObject *cpu_backward(const char *who, EmTensor *g, EmTensor *q, EmTensor *k, EmTensor *v, EmTensor *out,
                              EmTensor *lse, EmTensor *mask, double dropout, bool causal, PyObject *scale_arg) {
    EmAttn p;
    Owned o = {{0}, 0};
    EmTensor *dq = NULL, *dk = NULL, *dv = NULL, *lc = NULL;
    PyObject *res = NULL;
    if (setup(&p, &o, q, k, v, mask, dropout, causal, scale_arg) < 0) goto done;
    const int64_t os[4] = {q->sizes[0], q->sizes[1], q->sizes[2], v->sizes[3]};
    if (expect_shape(who, g, "grad_out", 4, os) < 0 || expect_shape(who, out, "out", 4, os) < 0 ||
        expect_shape(who, lse, "logsumexp", 3, os) < 0)
        goto done;
    EmAttnOperand go, oo;
    if (!operand(&o, g, p.dt, &go) || !operand(&o, out, p.dt, &oo)) goto done;
    EmTensor *l = own(&o, em_to_dtype(lse, p.dt, false));
    if (!l || !(lc = em_contiguous(l))) goto done;
    const EmScalar zero = {'i', {0}};
    /* the gradients in the inputs' dim order (empty_in_dim_order): nanoGPT's
     * dq.transpose(1, 2).view(B, T, C) then needs no copy */
    const bool meta = em_is_meta(q); /* Note [meta device]: the gradients' shapes and layouts only */
    int shared = meta ? 0 : grads_sharing_storage(q, k, v, p.dt, &dq, &dk, &dv);
    if (shared < 0) goto done;
    if (shared)
        for (int d = 0; d < 3; d++) p.dq_st[d] = p.dk_st[d] = p.dv_st[d] = q->strides[d];
    else if (!(dq = empty_in_dim_order(q, q->sizes, p.dt, em_device(q), p.dq_st)) ||
             !(dk = empty_in_dim_order(k, k->sizes, p.dt, em_device(q), p.dk_st)) ||
             !(dv = empty_in_dim_order(v, v->sizes, p.dt, em_device(q), p.dv_st)) || em_fill_(dq, zero) < 0 ||
             em_fill_(dk, zero) < 0 || em_fill_(dv, zero) < 0)
        goto done;
    if (!meta) {
        PyThreadState *ts = big(&p) ? PyEval_SaveThread() : NULL;
        int rc = em_cpu_attention_backward(&p, &go, &oo, em_data(lc), em_data(dq), em_data(dk), em_data(dv));
        if (ts) PyEval_RestoreThread(ts);
        if (rc < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    EmDType dt = (EmDType)q->dtype;
    if (!(dq = to_user(dq, dt)) || !(dk = to_user(dk, dt)) || !(dv = to_user(dv, dt))) goto done;
    res = PyTuple_Pack(3, dq, dk, dv);
done:
    release(&o);
    Py_XDECREF(lc);
    Py_XDECREF(dq);
    Py_XDECREF(dk);
    Py_XDECREF(dv);
    return res;
}

/* (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal,
 *  attn_mask, scale) -> (grad_query, grad_key, grad_value) */
PyObject *em_impl_sdpa_flash_cpu_backward(EmCall *c) {
    double dropout;
    bool causal;
    if (em_arg_float(c, 6, &dropout) < 0 || em_arg_bool(c, 7, &causal) < 0) return NULL;
    return cpu_backward("_scaled_dot_product_flash_attention_for_cpu_backward", em_arg_tensor(c, 0),
                        em_arg_tensor(c, 1), em_arg_tensor(c, 2), em_arg_tensor(c, 3), em_arg_tensor(c, 4),
                        em_arg_tensor(c, 5), em_arg_tensor(c, 8), dropout, causal, c->args[9]);
}

/* ---- torch's CUDA flash op (Note [CUDA attention] in cuda/attention.h).
 * GPU tensors go to the backend's fused kernels in their own dtype (float16,
 * bfloat16, and float32 beyond torch's flash kernel); float64 (also beyond
 * torch) raises EmNoCudaKernel, and on CPU tensors (Note [CUDA fallback]'s
 * host twins) the CPU kernel runs. torch returns nine things; ember fills what it has: output,
 * logsumexp (float32; float64 for float64 data), empty int32 cum_seq_q / cum_seq_k (no nested
 * tensors), max_q / max_k as 0-d int64 tensors (torch: ints), philox seed
 * and offset as 0-d int64 zeros (no dropout), an empty debug mask. */

static const char *FLASH = "_scaled_dot_product_flash_attention";
static const char *FLASH_BW = "_scaled_dot_product_flash_attention_backward";

/* The checks both front-ends make; `kernel_dropout`: the kernel applies
 * dropout itself (the GPU one; the CPU kernel has none). */
static int flash_checks(const char *who, EmTensor *q, EmTensor *k, EmTensor *v, double dropout, bool debug,
                        bool kernel_dropout) {
    char p[32]; /* PyErr_Format has no %g */
    snprintf(p, sizeof p, "%g", dropout);
    if (!(dropout >= 0 && dropout <= 1)) {
        PyErr_Format(PyExc_RuntimeError, "%s: dropout probability has to be between 0 and 1, but got %s", who, p);
        return -1;
    }
    if (dropout > 0 && !kernel_dropout) {
        PyErr_Format(PyExc_RuntimeError, "%s: dropout_p > 0 is not supported by ember's CPU kernel (got %s)", who, p);
        return -1;
    }
    if (debug) {
        PyErr_Format(PyExc_RuntimeError, "%s: return_debug_mask=True is not supported by ember's kernel", who);
        return -1;
    }
    if (check_qkv(who, q, k, v, 0.0) < 0) return -1;
    if (q->sizes[3] > 256) {
        PyErr_Format(PyExc_RuntimeError, "%s: FlashAttention forward only supports head dimension at most 256, "
                     "but got %lld", who, (long long)q->sizes[3]);
        return -1;
    }
    return 0;
}

static double flash_scale(PyObject *scale_arg, int64_t D, int *err) {
    *err = 0;
    if (!scale_arg || scale_arg == Py_None) return D > 0 ? 1.0 / sqrt((double)D) : INFINITY;
    double s = PyFloat_AsDouble(scale_arg);
    if (s == -1.0 && PyErr_Occurred()) *err = -1;
    return s;
}

/* t on the device with unit last stride (itself, or a contiguous copy owned
 * by o); its element strides {batch, head, row} into s. */
static EmTensor *gpu_operand(Owned *o, EmTensor *t, int64_t *s) {
    EmTensor *x = t;
    if (t->strides[3] != 1 && t->sizes[3] > 1 && !(x = own(o, em_contiguous(t)))) return NULL;
    for (int d = 0; d < 3; d++) s[d] = x->strides[d];
    return x;
}

/* The nine results around (out, lse); steals both. */
static PyObject *flash_results(EmTensor *out, EmTensor *lse, int64_t L, int64_t S, EmDevice dev, uint64_t seed,
                               uint64_t offset) {
    const int64_t zero = 0;
    PyObject *items[9] = {(PyObject *)out, (PyObject *)lse};
    items[2] = (PyObject *)em_empty(1, &zero, EM_INT32, dev);
    items[3] = (PyObject *)em_empty(1, &zero, EM_INT32, dev);
    items[4] = (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = L}}, EM_INT64, em_cpu());
    items[5] = (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = S}}, EM_INT64, em_cpu());
    items[6] = (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = (int64_t)seed}}, EM_INT64, em_cpu());
    items[7] = (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = (int64_t)offset}}, EM_INT64, em_cpu());
    items[8] = (PyObject *)em_empty(1, &zero, (EmDType)out->dtype, dev);
    PyObject *res = PyTuple_New(9);
    for (int i = 0; i < 9; i++) {
        if (!items[i]) Py_CLEAR(res);
        if (res) PyTuple_SET_ITEM(res, i, items[i]);
        else Py_XDECREF(items[i]);
    }
    return res;
}

/* ---- the extended entries (EmCudaAttentionEx in cuda_backend.h):
 * dropout drawn once per call from the device generator (Note [GPU random
 * numbers]) and returned as torch's philox_seed / philox_offset, a mask, and
 * gradients in the inputs' layouts. */

/* philox_seed / philox_offset of a backward: a one-element int64 CPU tensor
 * (what the forward returned); None reads as 0 when there is no dropout. */
static int philox_arg(const char *who, EmTensor *t, const char *what, double dropout, uint64_t *out) {
    *out = 0;
    if (!t) {
        if (dropout <= 0) return 0;
        char p[32];
        snprintf(p, sizeof p, "%g", dropout);
        PyErr_Format(PyExc_RuntimeError, "%s: dropout_p = %s needs the forward's %s, but got None", who, p, what);
        return -1;
    }
    /* not dispatch: torch keeps the philox state on the host whatever the inputs' device */
    if (t->dtype != EM_INT64 || t->numel != 1 || !em_is_cpu(t)) {
        char sh[128];
        em_shape_str(t->ndim, t->sizes, sh, sizeof sh);
        PyErr_Format(PyExc_RuntimeError, "%s: expected %s as a one-element int64 CPU tensor, but got %s of shape %s "
                     "on %s", who, what, em_dtype_ctype((EmDType)t->dtype), sh, em_is_cpu(t) ? "cpu" : "cuda");
        return -1;
    }
    *out = (uint64_t)*(const int64_t *)em_data(t);
    return 0;
}

/* mask (bool, or a float type rounded to q's dtype) as the kernels read it:
 * broadcast to (B, H, L, S) with 0 strides, on q's device. */
static int gpu_mask(const char *who, Owned *o, EmTensor *mask, EmTensor *q, int64_t S, EmCudaAttentionEx *x) {
    if (!mask) return 0;
    if (mask->dtype != EM_BOOL && !em_is_float((EmDType)mask->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "Expected attn_mask dtype to be bool or float or to match query dtype, but "
                     "got attn_mask.dtype: %s and  query.dtype: %s instead.", em_dtype_ctype((EmDType)mask->dtype),
                     em_dtype_ctype((EmDType)q->dtype));
        return -1;
    }
    const int64_t full[4] = {q->sizes[0], q->sizes[1], q->sizes[2], S};
    bool ok = mask->ndim <= 4;
    for (int d = 0; ok && d < 4; d++) {
        int md = d - (4 - mask->ndim);
        int64_t size = md < 0 ? 1 : mask->sizes[md];
        ok = size == 1 || size == full[d];
    }
    if (!ok) {
        char ms[128];
        em_shape_str(mask->ndim, mask->sizes, ms, sizeof ms);
        PyErr_Format(PyExc_RuntimeError, "%s: attn_mask of shape %s does not broadcast to (B, H, L, S) = [%lld, "
                     "%lld, %lld, %lld]", who, ms, (long long)full[0], (long long)full[1], (long long)full[2],
                     (long long)full[3]);
        return -1;
    }
    EmTensor *m = mask;
    if (mask->dtype != EM_BOOL && mask->dtype != q->dtype && !(m = own(o, em_to_dtype(mask, (EmDType)q->dtype, false))))
        return -1;
    /* not dispatch: a 0-d CPU mask may sit beside GPU tensors as a scalar */
    if (em_is_cpu(m) && !(m = own(o, em_to_device(m, em_device(q), false)))) return -1;
    for (int d = 0; d < 4; d++) {
        int md = d - (4 - m->ndim);
        x->sm[d] = md < 0 || m->sizes[md] == 1 ? 0 : m->strides[md];
    }
    x->mask = em_data(m);
    x->mask_kind = mask->dtype == EM_BOOL ? 1 : 2;
    return 0;
}

/* The problem of the extended entries, operands owned by o (the checks of
 * flash_checks done). */
static int gpu_problem(Owned *o, EmTensor *q, EmTensor *k, EmTensor *v, double dropout, bool causal,
                       PyObject *scale_arg, EmCudaAttentionEx *x) {
    int err;
    const int64_t D = q->sizes[3];
    *x = (EmCudaAttentionEx){.a = {.dtype = q->dtype, .B = q->sizes[0], .H = q->sizes[1], .Hkv = k->sizes[1],
                                   .L = q->sizes[2], .S = k->sizes[2], .D = D, .causal = causal},
                             .dropout_p = dropout, .lse_ld = q->sizes[2]};
    x->a.scale = flash_scale(scale_arg, D, &err);
    if (err < 0) return -1;
    if (x->a.Hkv == 0) x->a.Hkv = 1, x->a.H = 0; /* no heads: nothing to compute */
    EmTensor *t;
    if (!(t = gpu_operand(o, q, x->a.sq))) return -1;
    x->a.q = em_data(t);
    if (!(t = gpu_operand(o, k, x->a.sk))) return -1;
    x->a.k = em_data(t);
    if (!(t = gpu_operand(o, v, x->a.sv))) return -1;
    x->a.v = em_data(t);
    return 0;
}

/* The GPU forward on attention_forward_ex: out (B, H, L, D) with rows laid
 * out (B, L, H, D) as torch's kernels, lse (B, H, L) float32, and the
 * (seed, offset) drawn when dropout > 0 (one draw per call). */
static int gpu_forward_ex(const char *who, EmTensor *q, EmTensor *k, EmTensor *v, EmTensor *mask, double dropout,
                          bool causal, PyObject *scale_arg, EmTensor **out_p, EmTensor **lse_p, uint64_t *seed,
                          uint64_t *offset) {
    EmCudaAttentionEx x;
    Owned o = {{0}, 0};
    EmTensor *out = NULL, *lse = NULL, *ot = NULL;
    EmDevice dev = em_device(q);
    *seed = *offset = 0;
    if (gpu_problem(&o, q, k, v, dropout, causal, scale_arg, &x) < 0 || gpu_mask(who, &o, mask, q, k->sizes[2], &x) < 0)
        goto fail;
    const int64_t B = q->sizes[0], H = q->sizes[1], L = q->sizes[2], D = q->sizes[3];
    const int64_t blhd[4] = {B, L, H, D}, bhl[3] = {B, H, L};
    if (!(ot = em_empty(4, blhd, (EmDType)q->dtype, dev)) || !(out = em_transpose(ot, 1, 2)) ||
        !(lse = em_empty(3, bhl, EM_FLOAT32, dev)))
        goto fail;
    x.a.out = em_data(out);
    x.a.so[0] = out->strides[0], x.a.so[1] = out->strides[1], x.a.so[2] = out->strides[2];
    x.a.lse = (float *)em_data(lse);
    if (dropout > 0) em_cuda_generator_next(dev.index, seed, offset); /* once per call, as torch */
    x.seed = *seed, x.offset = *offset;
    if (em_cuda->attention_forward_ex(dev.index, &x) < 0) {
        em_cuda_error(who);
        goto fail;
    }
    release(&o);
    Py_DECREF(ot);
    *out_p = out, *lse_p = lse;
    return 0;
fail:
    release(&o);
    Py_XDECREF(ot);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    return -1;
}

/* The GPU backward on attention_backward_ex: (grad_query, grad_key,
 * grad_value) in the layouts of empty_in_dim_order. lse: (B, H, >= L) float32 rows. */
static PyObject *gpu_backward_ex(const char *who, EmTensor *g, EmTensor *q, EmTensor *k, EmTensor *v, EmTensor *out,
                                 EmTensor *lse, EmTensor *mask, double dropout, bool causal, PyObject *scale_arg,
                                 uint64_t seed, uint64_t offset) {
    EmCudaAttentionEx x;
    Owned o = {{0}, 0};
    EmTensor *dq = NULL, *dk = NULL, *dv = NULL, *t;
    PyObject *res = NULL;
    EmDevice dev = em_device(q);
    if (gpu_problem(&o, q, k, v, dropout, causal, scale_arg, &x) < 0 || gpu_mask(who, &o, mask, q, k->sizes[2], &x) < 0)
        goto done;
    if (!(t = gpu_operand(&o, out, x.a.so))) goto done;
    x.a.out = em_data(t);
    if (!(t = gpu_operand(&o, g, x.a.sdo))) goto done;
    x.a.dout = em_data(t);
    if (!(t = own(&o, em_to_dtype(lse, EM_FLOAT32, false))) || !(t = own(&o, em_contiguous(t)))) goto done;
    x.a.lse = (float *)em_data(t);
    x.lse_ld = lse->sizes[2];
    x.seed = seed, x.offset = offset;
    if (!(dq = empty_in_dim_order(q, q->sizes, (EmDType)q->dtype, em_device(q), x.sdq)) ||
        !(dk = empty_in_dim_order(k, k->sizes, (EmDType)k->dtype, em_device(k), x.sdk)) ||
        !(dv = empty_in_dim_order(v, v->sizes, (EmDType)v->dtype, em_device(v), x.sdv)))
        goto done;
    x.a.dq = em_data(dq), x.a.dk = em_data(dk), x.a.dv = em_data(dv);
    if (em_cuda->attention_backward_ex(dev.index, &x) < 0) {
        em_cuda_error(who);
        goto done;
    }
    res = PyTuple_Pack(3, dq, dk, dv);
done:
    release(&o);
    Py_XDECREF(dq);
    Py_XDECREF(dk);
    Py_XDECREF(dv);
    return res;
}

/* (query, key, value, dropout_p, is_causal, return_debug_mask, *, scale) ->
 * (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset, debug_attn_mask) */
static int flash_args(EmCall *c, bool kernel_dropout, double *dropout, bool *causal) {
    bool debug;
    if (em_arg_float(c, 3, dropout) < 0 || em_arg_bool(c, 4, causal) < 0 || em_arg_bool(c, 5, &debug) < 0)
        return -1;
    return flash_checks(FLASH, em_arg_tensor(c, 0), em_arg_tensor(c, 1), em_arg_tensor(c, 2), *dropout, debug,
                        kernel_dropout);
}

PyObject *em_impl_sdpa_flash(EmCall *c) {
    EmTensor *q = em_arg_tensor(c, 0), *k = em_arg_tensor(c, 1), *v = em_arg_tensor(c, 2);
    double dropout;
    bool causal;
    if (flash_args(c, false, &dropout, &causal) < 0) return NULL;
    const int64_t L = q->sizes[2], S = k->sizes[2];
    PyObject *r = cpu_forward(q, k, v, NULL, 0.0, causal, c->args[6]);
    if (!r) return NULL;
    EmTensor *out = (EmTensor *)Py_NewRef(PyTuple_GET_ITEM(r, 0));
    /* logsumexp in float32 (float64 for float64 data, beyond torch's kernel) */
    EmTensor *lse = em_to_dtype((EmTensor *)PyTuple_GET_ITEM(r, 1), q->dtype == EM_FLOAT64 ? EM_FLOAT64 : EM_FLOAT32,
                                false);
    Py_DECREF(r);
    if (!lse) {
        Py_DECREF(out);
        return NULL;
    }
    if (S == 0) { /* the GPU kernels' contract: a row that sees no key has lse -inf */
        if (em_fill_(lse, (EmScalar){'f', {.f = -INFINITY}}) < 0) {
            Py_DECREF(out);
            Py_DECREF(lse);
            return NULL;
        }
    }
    return flash_results(out, lse, L, S, em_device(q), 0, 0);
}

/* The CUDA front-end (Note [device slot]). */
PyObject *em_impl_sdpa_flash_cuda(EmCall *c) {
    EmTensor *q = em_arg_tensor(c, 0), *k = em_arg_tensor(c, 1), *v = em_arg_tensor(c, 2);
    double dropout;
    bool causal;
    if (flash_args(c, true, &dropout, &causal) < 0) return NULL;
    const int64_t B = q->sizes[0], H = q->sizes[1], L = q->sizes[2], S = k->sizes[2], D = q->sizes[3];
    /* float64 (beyond torch's kernel) has no GPU kernel: Note [CUDA fallback] runs the CPU one */
    if (!em_cuda || !em_cuda->attention_forward || q->dtype == EM_FLOAT64) return em_fused_no_kernel(FLASH);
    if (dropout > 0) { /* dropout inside the kernel: the extended entry */
        if (!em_cuda->attention_forward_ex) return em_fused_no_kernel(FLASH);
        EmTensor *out, *lse;
        uint64_t seed, offset;
        if (gpu_forward_ex(FLASH, q, k, v, NULL, dropout, causal, c->args[6], &out, &lse, &seed, &offset) < 0)
            return NULL;
        return flash_results(out, lse, L, S, em_device(q), seed, offset);
    }
    int err;
    double scale = flash_scale(c->args[6], D, &err);
    if (err < 0) return NULL;
    EmCudaAttention a = {.dtype = q->dtype, .B = B, .H = H, .Hkv = k->sizes[1], .L = L, .S = S, .D = D,
                         .scale = scale, .causal = causal};
    if (a.Hkv == 0) a.Hkv = 1, a.H = 0; /* no heads: nothing to compute */
    Owned o = {{0}, 0};
    EmTensor *out = NULL, *lse = NULL, *ot = NULL, *x;
    EmDevice dev = em_device(q);
    if (!(x = gpu_operand(&o, q, a.sq))) goto fail;
    a.q = em_data(x);
    if (!(x = gpu_operand(&o, k, a.sk))) goto fail;
    a.k = em_data(x);
    if (!(x = gpu_operand(&o, v, a.sv))) goto fail;
    a.v = em_data(x);
    /* output rows laid out (B, L, H, D), as torch's kernel does: attention's
     * usual transpose(1, 2).reshape(B, L, H * D) afterwards is then a view */
    const int64_t blhd[4] = {B, L, H, D}, bhl[3] = {B, H, L};
    if (!(ot = em_empty(4, blhd, (EmDType)q->dtype, dev)) || !(out = em_transpose(ot, 1, 2)) ||
        !(lse = em_empty(3, bhl, EM_FLOAT32, dev)))
        goto fail;
    a.out = em_data(out);
    a.so[0] = out->strides[0], a.so[1] = out->strides[1], a.so[2] = out->strides[2];
    a.lse = (float *)em_data(lse);
    if (em_cuda->attention_forward(dev.index, &a) < 0) {
        em_cuda_error(FLASH);
        goto fail;
    }
    release(&o);
    Py_DECREF(ot);
    return flash_results(out, lse, L, S, dev, 0, 0);
fail:
    release(&o);
    Py_XDECREF(ot);
    Py_XDECREF(out);
    Py_XDECREF(lse);
    return NULL;
}

/* (grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q,
 *  max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale)
 *  -> (grad_query, grad_key, grad_value) */
PyObject *em_impl_sdpa_flash_backward(EmCall *c) {
    EmTensor *g = em_arg_tensor(c, 0), *q = em_arg_tensor(c, 1), *k = em_arg_tensor(c, 2), *v = em_arg_tensor(c, 3);
    EmTensor *out = em_arg_tensor(c, 4), *lse = em_arg_tensor(c, 5);
    double dropout;
    bool causal;
    if (em_arg_float(c, 10, &dropout) < 0 || em_arg_bool(c, 11, &causal) < 0) return NULL;
    if (flash_checks(FLASH_BW, q, k, v, dropout, false, false) < 0) return NULL;
    return cpu_backward(FLASH_BW, g, q, k, v, out, lse, NULL, 0.0, causal, c->args[14]);
}

/* The CUDA front-end (Note [device slot]). */
PyObject *em_impl_sdpa_flash_backward_cuda(EmCall *c) {
    EmTensor *g = em_arg_tensor(c, 0), *q = em_arg_tensor(c, 1), *k = em_arg_tensor(c, 2), *v = em_arg_tensor(c, 3);
    EmTensor *out = em_arg_tensor(c, 4), *lse = em_arg_tensor(c, 5);
    double dropout;
    bool causal;
    if (em_arg_float(c, 10, &dropout) < 0 || em_arg_bool(c, 11, &causal) < 0) return NULL;
    if (flash_checks(FLASH_BW, q, k, v, dropout, false, true) < 0) return NULL;
    const int64_t B = q->sizes[0], H = q->sizes[1], L = q->sizes[2], S = k->sizes[2], D = q->sizes[3];
    const int64_t os[4] = {B, H, L, D};
    if (expect_shape(FLASH_BW, g, "grad_out", 4, os) < 0 || expect_shape(FLASH_BW, out, "out", 4, os) < 0 ||
        expect_shape(FLASH_BW, lse, "logsumexp", 3, os) < 0)
        return NULL;
    if (g->dtype != q->dtype || out->dtype != q->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_out (%s) and out (%s) must have query's dtype %s", FLASH_BW,
                     em_dtype_ctype((EmDType)g->dtype), em_dtype_ctype((EmDType)out->dtype),
                     em_dtype_ctype((EmDType)q->dtype));
        return NULL;
    }
    if (!em_cuda || !em_cuda->attention_backward || q->dtype == EM_FLOAT64) return em_fused_no_kernel(FLASH_BW);
    if (em_cuda->attention_backward_ex) { /* gradients in the inputs' layouts; dropout */
        uint64_t seed, offset;
        if (philox_arg(FLASH_BW, em_arg_tensor(c, 12), "philox_seed", dropout, &seed) < 0 ||
            philox_arg(FLASH_BW, em_arg_tensor(c, 13), "philox_offset", dropout, &offset) < 0)
            return NULL;
        return gpu_backward_ex(FLASH_BW, g, q, k, v, out, lse, NULL, dropout, causal, c->args[14], seed, offset);
    }
    if (dropout > 0) return em_fused_no_kernel(FLASH_BW);
    int err;
    double scale = flash_scale(c->args[14], D, &err);
    if (err < 0) return NULL;
    EmCudaAttention a = {.dtype = q->dtype, .B = B, .H = H, .Hkv = k->sizes[1], .L = L, .S = S, .D = D,
                         .scale = scale, .causal = causal};
    if (a.Hkv == 0) a.Hkv = 1, a.H = 0;
    Owned o = {{0}, 0};
    EmTensor *dq = NULL, *dk = NULL, *dv = NULL, *x;
    EmDevice dev = em_device(q);
    if (!(x = gpu_operand(&o, q, a.sq))) goto fail;
    a.q = em_data(x);
    if (!(x = gpu_operand(&o, k, a.sk))) goto fail;
    a.k = em_data(x);
    if (!(x = gpu_operand(&o, v, a.sv))) goto fail;
    a.v = em_data(x);
    if (!(x = gpu_operand(&o, out, a.so))) goto fail;
    a.out = em_data(x);
    if (!(x = gpu_operand(&o, g, a.sdo))) goto fail;
    a.dout = em_data(x);
    if (!(x = own(&o, em_to_dtype(lse, EM_FLOAT32, false))) || !(x = own(&o, em_contiguous(x)))) goto fail;
    a.lse = (float *)em_data(x);
    if (!(dq = em_empty(4, q->sizes, (EmDType)q->dtype, dev)) || !(dk = em_empty(4, k->sizes, (EmDType)q->dtype, dev)) ||
        !(dv = em_empty(4, v->sizes, (EmDType)q->dtype, dev)))
        goto fail;
    a.dq = em_data(dq), a.dk = em_data(dk), a.dv = em_data(dv);
    if (em_cuda->attention_backward(dev.index, &a) < 0) {
        em_cuda_error(FLASH_BW);
        goto fail;
    }
    release(&o);
    PyObject *res = PyTuple_Pack(3, dq, dk, dv);
    Py_DECREF(dq);
    Py_DECREF(dk);
    Py_DECREF(dv);
    return res;
fail:
    release(&o);
    Py_XDECREF(dq);
    Py_XDECREF(dk);
    Py_XDECREF(dv);
    return NULL;
}

/* ---- torch's memory-efficient op: what torch runs for float32
 * attention on a GPU and wherever a mask is given. The same kernels as the
 * flash op (Note [CUDA attention]) through attention_forward_ex, any float
 * dtype but float64, an attn_bias (bool: true takes part; float: added to
 * the scaled scores) broadcast over (B, H, L, S), causal, dropout. On CPU
 * tensors (Note [CUDA fallback]'s host twins) the CPU kernel runs (no
 * dropout). Differences from torch: logsumexp is (B, H, L) (torch pads L to
 * a multiple of 32) and is always computed; no gradient for attn_bias. */

static const char *EFF = "_scaled_dot_product_efficient_attention";
static const char *EFF_BW = "_scaled_dot_product_efficient_attention_backward";

static PyObject *eff_forward_results(EmTensor *out, EmTensor *lse, uint64_t seed, uint64_t offset);
static PyObject *eff_backward_results(PyObject *r);

static PyObject *eff_results(int n, PyObject **items) {
    PyObject *res = PyTuple_New(n);
    for (int i = 0; i < n; i++) {
        if (!items[i]) Py_CLEAR(res);
        if (res) PyTuple_SET_ITEM(res, i, items[i]);
        else Py_XDECREF(items[i]);
    }
    return res;
}

/* (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, *, scale)
 * -> (output, log_sumexp, philox_seed, philox_offset) */
PyObject *em_impl_sdpa_efficient(EmCall *c) {
    EmTensor *q = em_arg_tensor(c, 0), *k = em_arg_tensor(c, 1), *v = em_arg_tensor(c, 2), *bias = em_arg_tensor(c, 3);
    double dropout;
    bool want_lse, causal;
    if (em_arg_bool(c, 4, &want_lse) < 0 || em_arg_float(c, 5, &dropout) < 0 || em_arg_bool(c, 6, &causal) < 0)
        return NULL;
    if (flash_checks(EFF, q, k, v, dropout, false, false) < 0) return NULL;
    PyObject *r = cpu_forward(q, k, v, bias, 0.0, causal, c->args[7]);
    if (!r) return NULL;
    EmTensor *out = (EmTensor *)Py_NewRef(PyTuple_GET_ITEM(r, 0));
    EmTensor *lse = em_to_dtype((EmTensor *)PyTuple_GET_ITEM(r, 1), EM_FLOAT32, false);
    Py_DECREF(r);
    /* the GPU kernels' contract: a row that sees no key has lse -inf */
    if (lse && k->sizes[2] == 0 && em_fill_(lse, (EmScalar){'f', {.f = -INFINITY}}) < 0) Py_CLEAR(lse);
    if (!lse) {
        Py_DECREF(out);
        return NULL;
    }
    return eff_forward_results(out, lse, 0, 0);
}

/* The CUDA front-end (Note [device slot]). */
PyObject *em_impl_sdpa_efficient_cuda(EmCall *c) {
    EmTensor *q = em_arg_tensor(c, 0), *k = em_arg_tensor(c, 1), *v = em_arg_tensor(c, 2), *bias = em_arg_tensor(c, 3);
    double dropout;
    bool want_lse, causal;
    if (em_arg_bool(c, 4, &want_lse) < 0 || em_arg_float(c, 5, &dropout) < 0 || em_arg_bool(c, 6, &causal) < 0)
        return NULL;
    if (flash_checks(EFF, q, k, v, dropout, false, true) < 0) return NULL;
    EmTensor *out = NULL, *lse = NULL;
    uint64_t seed = 0, offset = 0;
    if (!em_cuda || !em_cuda->attention_forward_ex || q->dtype == EM_FLOAT64) return em_fused_no_kernel(EFF);
    if (gpu_forward_ex(EFF, q, k, v, bias, dropout, causal, c->args[7], &out, &lse, &seed, &offset) < 0)
        return NULL;
    return eff_forward_results(out, lse, seed, offset);
}

/* (output, log_sumexp, philox_seed, philox_offset); steals out and lse */
static PyObject *eff_forward_results(EmTensor *out, EmTensor *lse, uint64_t seed, uint64_t offset) {
    PyObject *items[4] = {(PyObject *)out, (PyObject *)lse,
                          (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = (int64_t)seed}}, EM_INT64, em_cpu()),
                          (PyObject *)em_scalar_tensor((EmScalar){'i', {.i = (int64_t)offset}}, EM_INT64, em_cpu())};
    return eff_results(4, items);
}

/* grad_input_mask[3]: whether attn_bias's gradient is asked for */
static int bias_grad_wanted(PyObject *m, bool *out) {
    *out = false;
    if (!m || m == Py_None) return 0;
    PyObject *seq = PySequence_Fast(m, "_scaled_dot_product_efficient_attention_backward: grad_input_mask must be a "
                                       "sequence of 4 bools");
    if (!seq) return -1;
    int r = 0;
    if (PySequence_Fast_GET_SIZE(seq) != 4) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_input_mask must have 4 entries, but got %zd", EFF_BW,
                     PySequence_Fast_GET_SIZE(seq));
        r = -1;
    } else {
        int t = PyObject_IsTrue(PySequence_Fast_GET_ITEM(seq, 3));
        if (t < 0) r = -1;
        *out = t > 0;
    }
    Py_DECREF(seq);
    return r;
}

/* (grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed,
 *  philox_offset, dropout_p, grad_input_mask, is_causal, *, scale)
 *  -> (grad_query, grad_key, grad_value, grad_bias = None) */
PyObject *em_impl_sdpa_efficient_backward(EmCall *c) {
    EmTensor *g = em_arg_tensor(c, 0), *q = em_arg_tensor(c, 1), *k = em_arg_tensor(c, 2), *v = em_arg_tensor(c, 3);
    EmTensor *bias = em_arg_tensor(c, 4), *out = em_arg_tensor(c, 5), *lse = em_arg_tensor(c, 6);
    double dropout;
    bool causal, bias_grad;
    if (em_arg_float(c, 9, &dropout) < 0 || em_arg_bool(c, 11, &causal) < 0 ||
        bias_grad_wanted(c->args[10], &bias_grad) < 0)
        return NULL;
    if (bias_grad) {
        PyErr_Format(PyExc_RuntimeError, "%s: ember's kernel computes no gradient for attn_bias", EFF_BW);
        return NULL;
    }
    if (flash_checks(EFF_BW, q, k, v, dropout, false, false) < 0) return NULL;
    return eff_backward_results(cpu_backward(EFF_BW, g, q, k, v, out, lse, bias, 0.0, causal, c->args[12]));
}

/* The CUDA front-end (Note [device slot]). */
PyObject *em_impl_sdpa_efficient_backward_cuda(EmCall *c) {
    EmTensor *g = em_arg_tensor(c, 0), *q = em_arg_tensor(c, 1), *k = em_arg_tensor(c, 2), *v = em_arg_tensor(c, 3);
    EmTensor *bias = em_arg_tensor(c, 4), *out = em_arg_tensor(c, 5), *lse = em_arg_tensor(c, 6);
    double dropout;
    bool causal, bias_grad;
    if (em_arg_float(c, 9, &dropout) < 0 || em_arg_bool(c, 11, &causal) < 0 ||
        bias_grad_wanted(c->args[10], &bias_grad) < 0)
        return NULL;
    if (bias_grad) {
        PyErr_Format(PyExc_RuntimeError, "%s: ember's kernel computes no gradient for attn_bias", EFF_BW);
        return NULL;
    }
    if (flash_checks(EFF_BW, q, k, v, dropout, false, true) < 0) return NULL;
    const int64_t os[4] = {q->sizes[0], q->sizes[1], q->sizes[2], q->sizes[3]};
    if (expect_shape(EFF_BW, g, "grad_out", 4, os) < 0 || expect_shape(EFF_BW, out, "out", 4, os) < 0 ||
        expect_shape(EFF_BW, lse, "logsumexp", 3, os) < 0)
        return NULL;
    if (g->dtype != q->dtype || out->dtype != q->dtype) {
        PyErr_Format(PyExc_RuntimeError, "%s: grad_out (%s) and out (%s) must have query's dtype %s", EFF_BW,
                     em_dtype_ctype((EmDType)g->dtype), em_dtype_ctype((EmDType)out->dtype),
                     em_dtype_ctype((EmDType)q->dtype));
        return NULL;
    }
    if (!em_cuda || !em_cuda->attention_backward_ex || q->dtype == EM_FLOAT64) return em_fused_no_kernel(EFF_BW);
    uint64_t seed, offset;
    if (philox_arg(EFF_BW, em_arg_tensor(c, 7), "philox_seed", dropout, &seed) < 0 ||
        philox_arg(EFF_BW, em_arg_tensor(c, 8), "philox_offset", dropout, &offset) < 0)
        return NULL;
    return eff_backward_results(
        gpu_backward_ex(EFF_BW, g, q, k, v, out, lse, bias, dropout, causal, c->args[12], seed, offset));
}

/* (grad_query, grad_key, grad_value, grad_bias = None) from the three; steals r */
static PyObject *eff_backward_results(PyObject *r) {
    if (!r) return NULL;
    PyObject *items[4] = {Py_NewRef(PyTuple_GET_ITEM(r, 0)), Py_NewRef(PyTuple_GET_ITEM(r, 1)),
                          Py_NewRef(PyTuple_GET_ITEM(r, 2)), Py_NewRef(Py_None)};
    Py_DECREF(r);
    return eff_results(4, items);
}
