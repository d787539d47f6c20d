/* derivatives_poolnorm.c — backward formulas of the 2-d pools and of batch /
 * group norm (ops/poolnorm.c), with torch's node names.
 *
 * The pools' backward passes are ops of their own (linear in the gradient),
 * and those have formulas too, so double backward works and its nodes carry
 * torch's names: max pool's backward scatters into the saved indices and its
 * derivative gathers from them; the average pools' backward spreads each
 * gradient over its window and its derivative is the pool again.
 *
 * The norms' backward is one fused pass when no graph is being built and
 * only the output's gradient arrives; under create_graph (or when the
 * statistics' gradients arrive too: double backward) it is written
 * with ember ops, as layer_norm's is in derivatives_nn.c, so it differentiates
 * again. */
#include "formula.h"

#define OPN(id, ...) call_n(S, EM_OP_##id, (int)(sizeof((PyObject *[]){__VA_ARGS__}) / sizeof(PyObject *)), \
                            (PyObject *[]){__VA_ARGS__})

/* a tuple of Python ints (a new reference kept by the scratch) */
static PyObject *int_tuple(Scratch *s, int n, const int64_t *v) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v[i]));
    return keep(s, t);
}

/* item i of a tuple the scratch keeps (borrowed) */
static PyObject *item(PyObject *t, int i) { return t ? PyTuple_GET_ITEM(t, i) : NULL; }

/* ------------------------------------------------------------------ pools */

/* max_pool2d_with_indices: the gradient goes to the chosen element */
int bw_max_pool2d(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0) && need(n, 0)) SET(0, OP3(_max_pool2d_backward, G(0), OUT(1), IN_SIZE(0)));
    END;
}

/* its backward (grad_output, indices, input_size) is linear in grad_output:
 * the derivative reads the incoming gradient at the indices */
int bw_max_pool2d_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !need(n, 0)) END;
    const EmMeta *m = &n->in_meta[0];
    const int64_t *gs = em_meta_sizes(m);
    int64_t planes = 1, flat[2];
    for (int d = 0; d < m->ndim - 2; d++) planes *= gs[d];
    flat[0] = planes;
    flat[1] = -1;
    if (planes == 0) {
        SET(0, ZEROS(0));
        END;
    }
    PyObject *shape = int_tuple(S, 2, flat);
    PyObject *picked = OP3(gather, OP2(reshape, G(0), shape), INT(1), OP2(reshape, IN(1), shape));
    SET(0, OP2(reshape, picked, IN_SIZE(0)));
    END;
}

/* avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override) */
int bw_avg_pool2d(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0) && need(n, 0))
        SET(0, OPN(_avg_pool2d_backward, G(0), IN_SIZE(0), ARG(1), ARG(2), ARG(3), ARG(4), ARG(5), ARG(6)));
    END;
}

/* avg_pool2d_backward(grad_output, input_size, kernel_size, stride, padding, ceil_mode,
 * count_include_pad, divisor_override): its derivative is the pool itself */
int bw_avg_pool2d_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0) && need(n, 0)) SET(0, OPN(_avg_pool2d, G(0), ARG(2), ARG(3), ARG(4), ARG(5), ARG(6), ARG(7)));
    END;
}

int bw_adaptive_avg_pool2d(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (G(0) && need(n, 0)) SET(0, OP2(_adaptive_avg_pool2d_backward, G(0), IN_SIZE(0)));
    END;
}

int bw_adaptive_avg_pool2d_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    if (G(0) && need(n, 0)) SET(0, OP2(_adaptive_avg_pool2d, G(0), int_tuple(S, 2, em_meta_sizes(m) + m->ndim - 2)));
    END;
}

/* ------------------------------------------------------------------ norms */

/* The gradients from a fused backward's (gx, gw, gb). */
static void set_fused(EmNode *n, EmTensor **gi, PyObject *r) {
    if (!r) return;
    for (int k = 0; k < 3; k++)
        if (need(n, k)) {
            PyObject *v = item(r, k);
            if (k > 0) { /* gw / gb in the parameter's own shape */
                PyObject *size = em_size_new(n->in_meta[k].ndim, em_meta_sizes(&n->in_meta[k]));
                PyObject *args[2] = {v, size};
                v = size ? em_op(EM_OP_reshape, 2, args) : NULL;
                Py_XDECREF(size);
                if (v) gi[k] = (EmTensor *)v;
            } else {
                gi[k] = (EmTensor *)Py_NewRef(v);
            }
        }
}

/* elements of input 0 */
static double numel_of(EmNode *n) {
    const EmMeta *m = &n->in_meta[0];
    double c = 1;
    for (int d = 0; d < m->ndim; d++) c *= (double)em_meta_sizes(m)[d];
    return c;
}

/* native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
 * y = xh w + b with xh = (x - mean) invstd per channel (dim 1);
 *   dw = sum(g xh), db = sum(g) over every dim but 1,
 *   dx = invstd (gw - mean(gw) - xh mean(gw xh)), gw = g w  (training),
 *   dx = invstd gw  (evaluation: the statistics are constants).
 * In double backward the statistics (outputs 1, 2) carry gradients when
 * training: d mean/dx = 1/M, d invstd/dx = -invstd^2 xh / M. */
int bw_native_batch_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    bool train = ARG(5) == Py_True, has_w = n->in_meta[1].defined;
    if (G(0) && !G(1) && !G(2) && !em_grad_enabled()) { /* the statistics' gradients: below */
        PyObject *r = OPN(_native_batch_norm_backward, G(0), IN(0), has_w ? IN(1) : Py_None, OUT(1), OUT(2), ARG(5));
        set_fused(n, gi, r);
        if (!r) sc.failed = true;
        END;
    }
    const EmMeta *m = &n->in_meta[0];
    int nd = m->ndim;
    int64_t shape[EM_MAX_DIMS], dims[EM_MAX_DIMS];
    for (int d = 0; d < nd; d++) shape[d] = d == 1 ? em_meta_sizes(m)[1] : 1;
    for (int d = 0; d < nd - 1; d++) dims[d] = d == 0 ? 0 : d + 1;
    double count = numel_of(n) / (double)(em_meta_sizes(m)[1] ? em_meta_sizes(m)[1] : 1);
    PyObject *shp = int_tuple(S, nd, shape), *red = int_tuple(S, nd - 1, dims);
    PyObject *g = G(0), *x = IN(0), *inv = OP2(reshape, OUT(2), shp);
    PyObject *xh = MUL(SUB(x, OP2(reshape, OUT(1), shp)), inv), *gx = NULL;
    if (g && need(n, 1)) SET(1, OP2(reshape, OP2(sum, MUL(g, xh), red), IN_SIZE(1)));
    if (g && need(n, 2)) SET(2, OP2(reshape, OP2(sum, g, red), IN_SIZE(2)));
    if (!need(n, 0)) END;
    if (g) {
        PyObject *gw = has_w ? MUL(g, OP2(reshape, IN(1), shp)) : g;
        gx = train ? MUL(SUB(SUB(gw, OP3(mean, gw, red, Py_True)), MUL(xh, OP3(mean, MUL(gw, xh), red, Py_True))), inv)
                   : MUL(gw, inv);
    }
    if (train && G(1)) {
        PyObject *t = OP2(expand_as, DIV(OP2(reshape, G(1), shp), NUM(count)), x);
        gx = gx ? ADD(gx, t) : t;
    }
    if (train && G(2)) {
        PyObject *t = MUL(MUL(OP2(reshape, G(2), shp), MUL(inv, inv)), MUL(xh, NUM(-1.0 / count)));
        gx = gx ? ADD(gx, t) : t;
    }
    if (gx) SET(0, gx);
    END;
}

/* native_group_norm(input, weight, bias, group, eps): per (sample, group) of
 * the (N, G, D * S) view, the layer-norm formula (dx through the group's
 * statistics, outputs 1 and 2 of shape (N, G)); dw, db per channel. */
int bw_native_group_norm(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    bool has_w = n->in_meta[1].defined;
    if (G(0) && !G(1) && !G(2) && !em_grad_enabled()) { /* the statistics' gradients: below */
        PyObject *r = OPN(_native_group_norm_backward, G(0), IN(0), OUT(1), OUT(2), has_w ? IN(1) : Py_None, ARG(3));
        set_fused(n, gi, r);
        if (!r) sc.failed = true;
        END;
    }
    const EmMeta *m = &n->in_meta[0];
    const int64_t *xs = em_meta_sizes(m);
    int nd = m->ndim;
    long long groups = PyLong_AsLongLong(ARG(3));
    if (groups <= 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: group_norm backward without groups");
        return -1;
    }
    int64_t shape[EM_MAX_DIMS], dims[EM_MAX_DIMS], grouped[3] = {xs[0], groups, 1}, last[1] = {-1};
    for (int d = 0; d < nd; d++) shape[d] = d == 1 ? xs[1] : 1;
    for (int d = 0; d < nd - 1; d++) dims[d] = d == 0 ? 0 : d + 1;
    for (int d = 1; d < nd; d++) grouped[2] *= xs[d];
    grouped[2] /= groups;
    double count = (double)grouped[2];
    PyObject *shp = int_tuple(S, nd, shape), *red = int_tuple(S, nd - 1, dims), *g3 = int_tuple(S, 3, grouped);
    PyObject *lastdim = int_tuple(S, 1, last), *minus1 = INT(-1);
    PyObject *g = G(0), *x3 = OP2(reshape, IN(0), g3), *rstd = OP2(unsqueeze, OUT(2), minus1);
    PyObject *xh3 = MUL(SUB(x3, OP2(unsqueeze, OUT(1), minus1)), rstd), *gx3 = NULL;
    if (g && (need(n, 1) || need(n, 2))) {
        if (need(n, 1)) SET(1, OP2(reshape, OP2(sum, MUL(g, OP2(reshape, xh3, IN_SIZE(0))), red), IN_SIZE(1)));
        if (need(n, 2)) SET(2, OP2(reshape, OP2(sum, g, red), IN_SIZE(2)));
    }
    if (!need(n, 0)) END;
    if (g) {
        PyObject *gw3 = OP2(reshape, has_w ? MUL(g, OP2(reshape, IN(1), shp)) : g, g3);
        gx3 = MUL(SUB(SUB(gw3, OP3(mean, gw3, lastdim, Py_True)), MUL(xh3, OP3(mean, MUL(gw3, xh3), lastdim, Py_True))),
                  rstd);
    }
    if (G(1)) {
        PyObject *t = OP2(expand_as, DIV(OP2(unsqueeze, G(1), minus1), NUM(count)), x3);
        gx3 = gx3 ? ADD(gx3, t) : t;
    }
    if (G(2)) {
        PyObject *t = MUL(MUL(OP2(unsqueeze, G(2), minus1), MUL(rstd, rstd)), MUL(xh3, NUM(-1.0 / count)));
        gx3 = gx3 ? ADD(gx3, t) : t;
    }
    if (gx3) SET(0, OP2(reshape, gx3, IN_SIZE(0)));
    END;
}


