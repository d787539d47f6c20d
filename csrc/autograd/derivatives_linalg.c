/* derivatives_linalg.c — backward formulas of the matrix products
 * (ops/linalg.c, ops/einsum.c). Broadcast batch dimensions need no care:
 * the engine sums gradients back to each input's shape. */
#include "formula.h"

#define MATMUL(a, b) OP2(matmul, a, b)
#define MT(a) OP3(transpose, a, INT(-2), INT(-1))
#define UNSQ(a, d) OP2(unsqueeze, a, INT(d))
#define SQ(a, d) OP2(squeeze, a, INT(d))

/* x * alpha, skipping the multiply when alpha is 1 */
static PyObject *scaled(Scratch *s, PyObject *x, PyObject *alpha) {
    EmScalar v;
    if (!x) return NULL;
    if (em_scalar_from_py(alpha, &v) == 0 && em_scalar_to_double(v) == 1.0) return x;
    PyErr_Clear();
    return call(s, EM_OP_mul, 2, x, alpha, NULL, NULL);
}
#define SCALED(x, a) scaled(S, (x), (a))

/* A matrix stored column by column, as w.t() of a contiguous w is. */
static bool col_major(PyObject *t) {
    const EmTensor *x = (const EmTensor *)t;
    return x && em_is_tensor(t) && x->ndim == 2 && x->strides[0] == 1 && x->strides[1] == x->sizes[0] && x->sizes[1] > 1;
}

/* The gradients of a @ b: g @ b^T and a^T @ g, each computed in the
 * layout of its input — for a column-major input as the transpose of the
 * product taken the other way round — so that the gradient of a linear
 * layer's weight (seen through w.t()) arrives contiguous for .grad and is
 * not copied there. */
#define CALL1(s, id, a) call(s, EM_OP_##id, 1, (a), NULL, NULL, NULL)
#define CALL2(s, id, a, b) call(s, EM_OP_##id, 2, (a), (b), NULL, NULL)
static PyObject *mm_grad_a(Scratch *s, PyObject *g, PyObject *a, PyObject *b) {
    if (col_major(a)) return CALL1(s, t, CALL2(s, mm, b, CALL1(s, t, g)));
    return CALL2(s, mm, g, CALL1(s, t, b));
}
static PyObject *mm_grad_b(Scratch *s, PyObject *g, PyObject *a, PyObject *b) {
    if (col_major(b)) return CALL1(s, t, CALL2(s, mm, CALL1(s, t, g), a));
    return CALL2(s, mm, CALL1(s, t, a), g);
}

/* Both gradients of a @ b, the two products side by side (Note [GEMM
 * pairs]) when no graph is being built; 1 when that does not apply. */
static int mm_grads_paired(Scratch *s, PyObject *g, PyObject *a, PyObject *b, PyObject **ga, PyObject **gb) {
    if (em_grad_enabled() || !g || !a || !b || !em_is_tensor(g) || !em_is_tensor(a) || !em_is_tensor(b)) return 1;
    bool back_a = col_major(a), back_b = col_major(b);
    PyObject *x[2] = {back_a ? b : g, back_b ? CALL1(s, t, g) : CALL1(s, t, a)};
    PyObject *y[2] = {back_a ? CALL1(s, t, g) : CALL1(s, t, b), back_b ? a : g};
    if (!x[1] || !y[0]) return -1;
    EmTensor *xa[2] = {(EmTensor *)x[0], (EmTensor *)x[1]}, *ya[2] = {(EmTensor *)y[0], (EmTensor *)y[1]}, *c[2];
    int rc = em_mm_pair(xa, ya, c);
    if (rc) {
        if (rc < 0) s->failed = true;
        return rc;
    }
    *ga = keep(s, (PyObject *)c[0]);
    *gb = keep(s, (PyObject *)c[1]);
    if (back_a) *ga = CALL1(s, t, *ga);
    if (back_b) *gb = CALL1(s, t, *gb);
    return *ga && *gb ? 0 : -1;
}

/* products: the conjugated factors of Note [complex gradients] (g @ b^H, a^H @ g) */
int bw_mm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *ga, *gb, *a = CJ(IN(0)), *b = CJ(IN(1));
    int paired = need(n, 0) && need(n, 1) ? mm_grads_paired(S, G(0), a, b, &ga, &gb) : 1;
    if (paired < 0) END;
    if (paired == 0) {
        SET(0, ga);
        SET(1, gb);
        END;
    }
    if (need(n, 0)) SET(0, mm_grad_a(S, G(0), a, b));
    if (need(n, 1)) SET(1, mm_grad_b(S, G(0), a, b));
    END;
}

int bw_bmm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP2(bmm, G(0), MT(CJ(IN(1)))));
    if (need(n, 1)) SET(1, OP2(bmm, MT(CJ(IN(0))), G(0)));
    END;
}

/* matmul: vectors become 1-row / 1-column matrices, batches broadcast */
int bw_matmul(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int na = n->in_meta[0].ndim, nb = n->in_meta[1].ndim;
    PyObject *g = G(0);
    if (na == 1 && nb == 1) { /* dot */
        if (need(n, 0)) SET(0, MUL(g, CJ(IN(1))));
        if (need(n, 1)) SET(1, MUL(g, CJ(IN(0))));
    } else if (nb == 1) { /* (..., m, k) @ (k) -> (..., m) */
        if (need(n, 0)) SET(0, MATMUL(UNSQ(g, -1), UNSQ(CJ(IN(1)), 0)));
        if (need(n, 1)) SET(1, SQ(MATMUL(MT(CJ(IN(0))), UNSQ(g, -1)), -1));
    } else if (na == 1) { /* (k) @ (..., k, m) -> (..., m) */
        if (need(n, 0)) SET(0, SQ(MATMUL(UNSQ(g, -2), MT(CJ(IN(1)))), -2));
        if (need(n, 1)) SET(1, MATMUL(UNSQ(CJ(IN(0)), -1), UNSQ(g, -2)));
    } else {
        PyObject *ga, *gb, *a = CJ(IN(0)), *b = CJ(IN(1));
        int paired = na == 2 && nb == 2 && need(n, 0) && need(n, 1) ? mm_grads_paired(S, g, a, b, &ga, &gb) : 1;
        if (paired < 0) END;
        if (paired == 0) {
            SET(0, ga);
            SET(1, gb);
            END;
        }
        if (need(n, 0)) SET(0, MATMUL(g, MT(b)));
        if (need(n, 1)) SET(1, MATMUL(MT(a), g));
    }
    END;
}

int bw_mv(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP2(outer, G(0), IN(1)));
    if (need(n, 1)) SET(1, OP2(mv, OP1(t, IN(0)), G(0)));
    END;
}

int bw_dot(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, MUL(G(0), IN(1)));
    if (need(n, 1)) SET(1, MUL(G(0), IN(0)));
    END;
}

/* inner(a, b) contracts the last dims: with A = a as (p, k) and B = b as
 * (q, k), out = A B^T as (p, q). 0-d operands scale the other. */
int bw_inner(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *ma = &n->in_meta[0], *mb = &n->in_meta[1];
    PyObject *a = IN(0), *b = IN(1), *g = G(0);
    if (ma->ndim == 0 || mb->ndim == 0) {
        if (need(n, 0)) SET(0, ma->ndim == 0 ? OP2(sum_to_size, MUL(g, b), IN_SIZE(0)) : MUL(g, b));
        if (need(n, 1)) SET(1, mb->ndim == 0 ? OP2(sum_to_size, MUL(g, a), IN_SIZE(1)) : MUL(g, a));
        END;
    }
    int64_t k = em_meta_sizes(ma)[ma->ndim - 1];
    PyObject *A = OP2(reshape, a, keep(S, Py_BuildValue("(Ln)", (long long)-1, (Py_ssize_t)k)));
    PyObject *B = OP2(reshape, b, keep(S, Py_BuildValue("(Ln)", (long long)-1, (Py_ssize_t)k)));
    int64_t p = 1, q = 1;
    for (int d = 0; d + 1 < ma->ndim; d++) p *= em_meta_sizes(ma)[d];
    for (int d = 0; d + 1 < mb->ndim; d++) q *= em_meta_sizes(mb)[d];
    PyObject *G2 = OP2(reshape, g, keep(S, Py_BuildValue("(LL)", (long long)p, (long long)q)));
    if (need(n, 0)) SET(0, OP2(reshape, OP2(mm, G2, B), IN_SIZE(0)));
    if (need(n, 1)) SET(1, OP2(reshape, OP2(mm, OP1(t, G2), A), IN_SIZE(1)));
    END;
}

int bw_outer(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP2(mv, G(0), IN(1)));
    if (need(n, 1)) SET(1, OP2(mv, OP1(t, G(0)), IN(0)));
    END;
}

/* add*(input, x, y, beta, alpha) = beta * input + alpha * product(x, y) */
#define BETA ARG(3)
#define ALPHA ARG(4)

int bw_addmm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, SCALED(G(0), BETA));
    PyObject *ga, *gb;
    int paired = need(n, 1) && need(n, 2) ? mm_grads_paired(S, G(0), IN(1), IN(2), &ga, &gb) : 1;
    if (paired < 0) END;
    if (paired == 0) {
        SET(1, SCALED(ga, ALPHA));
        SET(2, SCALED(gb, ALPHA));
        END;
    }
    if (need(n, 1)) SET(1, SCALED(mm_grad_a(S, G(0), IN(1), IN(2)), ALPHA));
    if (need(n, 2)) SET(2, SCALED(mm_grad_b(S, G(0), IN(1), IN(2)), ALPHA));
    END;
}

int bw_addmv(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, SCALED(G(0), BETA));
    if (need(n, 1)) SET(1, SCALED(OP2(outer, G(0), IN(2)), ALPHA));
    if (need(n, 2)) SET(2, SCALED(OP2(mv, OP1(t, IN(1)), G(0)), ALPHA));
    END;
}

int bw_addr(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, SCALED(G(0), BETA));
    if (need(n, 1)) SET(1, SCALED(OP2(mv, G(0), IN(2)), ALPHA));
    if (need(n, 2)) SET(2, SCALED(OP2(mv, OP1(t, G(0)), IN(1)), ALPHA));
    END;
}

int bw_baddbmm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, SCALED(G(0), BETA));
    if (need(n, 1)) SET(1, SCALED(OP2(bmm, G(0), MT(IN(2))), ALPHA));
    if (need(n, 2)) SET(2, SCALED(OP2(bmm, MT(IN(1)), G(0)), ALPHA));
    END;
}

/* addbmm sums the batch of products: each batch entry sees the same gradient */
int bw_addbmm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, SCALED(G(0), BETA));
    if (need(n, 1)) SET(1, SCALED(MATMUL(G(0), MT(IN(2))), ALPHA));
    if (need(n, 2)) SET(2, SCALED(MATMUL(MT(IN(1)), G(0)), ALPHA));
    END;
}

/* kron(a, b) over d = max(ndims) dims, each of size a_i * b_i: view the
 * gradient as (a_0, b_0, a_1, b_1, ...); a's gradient sums g * b over the b
 * positions, b's sums g * a over the a positions. */
int bw_kron(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *ma = &n->in_meta[0], *mb = &n->in_meta[1];
    int d = ma->ndim > mb->ndim ? ma->ndim : mb->ndim;
    PyObject *inter = keep(S, PyTuple_New(2 * d)), *ash = keep(S, PyTuple_New(2 * d)),
             *bsh = keep(S, PyTuple_New(2 * d));
    for (int i = 0; inter && ash && bsh && i < d; i++) {
        int ia = i - (d - ma->ndim), ib = i - (d - mb->ndim);
        long long av = ia < 0 ? 1 : em_meta_sizes(ma)[ia], bv = ib < 0 ? 1 : em_meta_sizes(mb)[ib];
        PyTuple_SET_ITEM(inter, 2 * i, PyLong_FromLongLong(av));
        PyTuple_SET_ITEM(inter, 2 * i + 1, PyLong_FromLongLong(bv));
        PyTuple_SET_ITEM(ash, 2 * i, PyLong_FromLongLong(av));
        PyTuple_SET_ITEM(ash, 2 * i + 1, PyLong_FromLong(1));
        PyTuple_SET_ITEM(bsh, 2 * i, PyLong_FromLong(1));
        PyTuple_SET_ITEM(bsh, 2 * i + 1, PyLong_FromLongLong(bv));
    }
    PyObject *g4 = OP2(reshape, G(0), inter);
    if (need(n, 0))
        SET(0, OP2(reshape, OP2(sum_to_size, MUL(g4, OP2(reshape, IN(1), bsh)), ash), IN_SIZE(0)));
    if (need(n, 1))
        SET(1, OP2(reshape, OP2(sum_to_size, MUL(g4, OP2(reshape, IN(0), ash)), bsh), IN_SIZE(1)));
    END;
}

/* trace: the gradient on the diagonal, a constant mask times the gradient */
int bw_trace(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    EmTensor *eye = em_zeros(2, em_meta_sizes(m), (EmDType)go[0]->dtype, em_cpu());
    if (eye) {
        int64_t rows = em_meta_sizes(m)[0], cols = em_meta_sizes(m)[1];
        EmScalar one = {'i', {1}};
        for (int64_t i = 0; i < rows && i < cols; i++)
            em_scalar_store(one, (EmDType)eye->dtype, em_data(eye) + (i * cols + i) * em_itemsize(eye->dtype));
        Py_SETREF(eye, em_to_device(eye, em_device(go[0]), false)); /* written on the host */
    }
    SET(0, MUL(G(0), keep(S, (PyObject *)eye)));
    END;
}

/* einsum: ember/functional.py _einsum_backward rewrites the equation per
 * operand (einsum of the gradient with the other operands), with ember ops */
int bw_einsum(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *fn = em_py_helper("einsum_backward");
    PyObject *ops = keep(S, PyTuple_New(n->num_next)), *needs = keep(S, PyTuple_New(n->num_next));
    for (int k = 0; ops && needs && k < n->num_next; k++) {
        PyObject *x = IN(k);
        PyTuple_SET_ITEM(ops, k, Py_NewRef(x ? x : Py_None));
        PyTuple_SET_ITEM(needs, k, PyBool_FromLong(need(n, k)));
    }
    PyObject *r = fn && !sc.failed ? keep(S, PyObject_CallFunctionObjArgs(fn, ARG(0), ops, G(0), needs, NULL)) : NULL;
    for (int k = 0; r && k < n->num_next && k < PyTuple_GET_SIZE(r); k++) {
        PyObject *gk = PyTuple_GET_ITEM(r, k);
        if (gk != Py_None && need(n, k)) gi[k] = (EmTensor *)Py_NewRef(gk);
    }
    if (!fn) sc.failed = true;
    END;
}


