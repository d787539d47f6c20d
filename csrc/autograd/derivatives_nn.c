/* derivatives_nn.c — backward formulas of the nn functional ops in C
 * (ops/norm.c, ops/nn.c). Written with ember ops, so double backward works. */
#include "formula.h"
#include "../ops/fused_gpu.h"

/* (-k, ..., -1): the normalized dims, counted from the end */
static PyObject *last_dims(Scratch *s, int k) {
    PyObject *t = PyTuple_New(k);
    for (int i = 0; t && i < k; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLong(i - k));
    return keep(s, t);
}
#define MEAN_LAST(x, dims) OP3(mean, (x), (dims), Py_True)

/* elements in the normalized (last k) dims of input k */
static double normalized_count(EmNode *n, int k) {
    const EmMeta *m = &n->in_meta[0];
    double count = 1;
    for (int d = m->ndim - k; d < m->ndim; d++) count *= (double)em_meta_sizes(m)[d];
    return count;
}

/* y = (x - mean) * rstd * w + b with xh = (x - mean) * rstd:
 *   dw = sum(g * xh), db = sum(g),
 *   dx = rstd * (gw - mean(gw) - xh * mean(gw * xh)),  gw = g * w
 * (means over the normalized dims). mean and rstd are outputs 1 and 2: they
 * carry gradients only in double backward (the first backward read them),
 * through d mean/dx = 1/N and d rstd/dx = -rstd^2 xh / N. */
int bw_native_layer_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int k = (int)PySequence_Size(ARG(1));
    double count = normalized_count(n, k);
    if (G(0) && !G(1) && !G(2) && !em_grad_enabled()) { /* the fused kernel, when not differentiated again */
        PyObject *args[6] = {G(0), IN(0), ARG(1), OUT(1), OUT(2), optional_in(S, n, 1)};
        PyObject *r = call_n(S, EM_OP__native_layer_norm_backward, 6, args);
        for (int j = 0; r && j < 3; j++)
            if (need(n, j) && (j == 0 || n->in_meta[j].defined)) SET(j, PyTuple_GET_ITEM(r, j));
        END;
    }
    PyObject *g = G(0), *x = IN(0), *rstd = OUT(2), *xh = MUL(SUB(x, OUT(1)), rstd), *gx = NULL;
    if (g && need(n, 1)) SET(1, OP2(sum_to_size, MUL(g, xh), IN_SIZE(1)));
    if (g && need(n, 2)) SET(2, OP2(sum_to_size, g, IN_SIZE(2)));
    if (!need(n, 0)) END;
    if (g) {
        PyObject *dims = last_dims(S, k), *gw = n->in_meta[1].defined ? MUL(g, IN(1)) : g;
        gx = MUL(SUB(SUB(gw, MEAN_LAST(gw, dims)), MUL(xh, MEAN_LAST(MUL(gw, xh), dims))), rstd);
    }
    if (G(1)) {
        PyObject *t = OP2(expand_as, DIV(G(1), NUM(count)), x);
        gx = gx ? ADD(gx, t) : t;
    }
    if (G(2)) {
        PyObject *t = MUL(MUL(G(2), MUL(rstd, rstd)), MUL(xh, NUM(-1.0 / count)));
        gx = gx ? ADD(gx, t) : t;
    }
    if (gx) SET(0, gx);
    END;
}

/* y = x * rstd * w, rstd = (mean(x^2) + eps)^-1/2:
 *   dw = sum(g * x * rstd), dx = rstd * (gw - x * rstd^2 * mean(gw * x));
 * rstd (output 1) in double backward: d rstd/dx = -rstd^3 x / N.
 * torch's CPU rms_norm is a composition ending in a multiply: its row names
 * the node MulBackward0. */
int bw_rms_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int k = (int)PySequence_Size(ARG(1));
    PyObject *g = G(0), *x = IN(0), *rstd = OUT(1), *gx = NULL;
    if (g && need(n, 1)) SET(1, OP2(sum_to_size, MUL(g, MUL(x, rstd)), IN_SIZE(1)));
    if (!need(n, 0)) END;
    if (g) {
        PyObject *gw = n->in_meta[1].defined ? MUL(g, IN(1)) : g;
        PyObject *proj = MUL(MUL(x, MUL(rstd, rstd)), MEAN_LAST(MUL(gw, x), last_dims(S, k)));
        gx = MUL(SUB(gw, proj), rstd);
    }
    if (G(1)) {
        PyObject *t = MUL(MUL(G(1), MUL(rstd, MUL(rstd, rstd))), MUL(x, NUM(-1.0 / normalized_count(n, k))));
        gx = gx ? ADD(gx, t) : t;
    }
    if (gx) SET(0, gx);
    END;
}

/* rows of the weight gather the gradients of the positions that picked them
 * (index_add: repeated indices sum); padding_idx rows get none;
 * scale_grad_by_freq divides by how often each index appears in the batch */
int bw_embedding(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!need(n, 0)) END;
    const int64_t *ws = em_meta_sizes(&n->in_meta[0]);
    long long pad = PyLong_AsLongLong(ARG(2));
    if (pad == -1 && PyErr_Occurred()) return -1;
    if (G(0) && !em_is_cpu(go[0]) && !em_grad_enabled()) { /* the GPU kernel, when not differentiated again */
        PyObject *ix = IN(1);
        if (!ix) END; /* released: the error is set */
        PyObject *r = em_embedding_backward_gpu(go[0], (EmTensor *)ix, ws[0], pad, ARG(3) == Py_True);
        if (r) gi[0] = (EmTensor *)r;
        if (r || PyErr_Occurred()) {
            sc.failed = !r;
            END;
        }
    }
    PyObject *idx = OP2(reshape, IN(1), keep(S, Py_BuildValue("(i)", -1)));
    PyObject *g = OP2(reshape, G(0), keep(S, Py_BuildValue("(iL)", -1, (long long)ws[1])));
    if (pad >= 0) g = MUL(g, OP2(unsqueeze, OP2(ne, idx, INT(pad)), INT(1)));
    if (ARG(3) == Py_True) {
        long long count = 1;
        for (int d = 0; d < n->in_meta[1].ndim; d++) count *= em_meta_sizes(&n->in_meta[1])[d];
        PyObject *ones = OP2(new_ones, g, keep(S, Py_BuildValue("(L)", count)));
        PyObject *counts = OP4(index_add, OP2(new_zeros, g, keep(S, Py_BuildValue("(L)", (long long)ws[0]))),
                               INT(0), idx, ones);
        g = DIV(g, OP2(unsqueeze, OP3(index_select, counts, INT(0), idx), INT(1)));
    }
    PyObject *zeros = OP2(new_zeros, g, IN_SIZE(0));
    if (em_grad_enabled()) {
        SET(0, OP4(index_add, zeros, INT(0), idx, g));
    } else { /* no graph to record: add into the fresh zeros rather than into a copy of them */
        PyObject *args[4] = {zeros, INT(0), idx, g};
        if (!sc.failed) SET(0, keep(S, em_op_inplace(EM_OP_index_add, 4, args)));
    }
    END;
}

/* the kept elements pass the gradient, scaled by 1 / (1 - p). torch's CPU
 * dropout is a composition ending in a multiply: its row names the node
 * MulBackward0. */
int bw_native_dropout(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !need(n, 0)) END;
    if (ARG(2) == Py_False) {
        SET(0, G(0));
        END;
    }
    double p = PyFloat_AsDouble(ARG(1));
    if (p == -1.0 && PyErr_Occurred()) return -1;
    SET(0, MUL(MUL(G(0), OUT(1)), NUM(p < 1 ? 1.0 / (1.0 - p) : 0.0)));
    END;
}


