/* derivatives_conv.c — backward formulas of the convolution ops
 * (ops/conv.c), written with those ops so that they differentiate again.
 *
 * im2col and col2im are linear and each other's adjoint: each one's
 * gradient is the other applied to the incoming gradient.
 * convolution y = conv(x, w) + b: one fused _convolution_backward call
 * computes the gradients its node needs (output_mask). Its own gradient
 * (double backward), for incoming ggx, ggw, ggb on (gx, gw, gb):
 *   d/dg = conv(ggx, w) + conv(x, ggw) + ggb   (each term when present)
 *   d/dx = the input gradient of conv(., ggw) at g   (gx of x for weight ggw)
 *   d/dw = the weight gradient of conv(ggx, .) at g  (gw of input ggx)
 * because gx is linear in (g, w) and gw in (x, g).
 * transposed convolution y = conv_transpose(x, w) + b, the input gradient
 * of conv(., w) (Note [transposed geometry] in ops/conv.c):
 *   gx = conv(gy, w)                         (narrowed to x's size)
 *   gw = the weight gradient of conv(gy, .) for grad_output x
 *   gb = gy summed over the batch and the positions
 * With output_padding >= stride (allowed below the dilation) conv(gy, .)
 * has more windows than x has positions: gx keeps the first ones, and x
 * gets zeros for the others before it stands in as grad_output. */
#include "formula.h"


/* item k of a tuple result (kept by the scratch) */
static PyObject *item(Scratch *s, PyObject *t, int k) {
    if (!t) return NULL;
    return keep(s, Py_NewRef(PyTuple_GET_ITEM(t, k)));
}

/* _im2col(input, kernel_size, dilation, padding, stride) */
int bw_im2col(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !need(n, 0)) END;
    const EmMeta *m = &n->in_meta[0];
    const int64_t *sz = em_meta_sizes(m);
    PyObject *osize = keep(S, Py_BuildValue("(LL)", (long long)sz[m->ndim - 2], (long long)sz[m->ndim - 1]));
    PyObject *args[6] = {G(0), osize, ARG(1), ARG(2), ARG(3), ARG(4)};
    SET(0, call_n(S, EM_OP__col2im, 6, args));
    END;
}

/* _col2im(input, output_size, kernel_size, dilation, padding, stride) */
int bw_col2im(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!G(0) || !need(n, 0)) END;
    PyObject *args[5] = {G(0), ARG(2), ARG(3), ARG(4), ARG(5)};
    SET(0, call_n(S, EM_OP__im2col, 5, args));
    END;
}

static PyObject *mask3(Scratch *s, bool a, bool b, bool c) { return keep(s, Py_BuildValue("(iii)", a, b, c)); }

/* _convolution_backward(g, x, w, stride, padding, dilation, groups, mask) */
static PyObject *conv_backward(Scratch *s, EmNode *n, int first, PyObject *g, PyObject *x, PyObject *w,
                               PyObject *mask) {
    PyObject *args[8] = {g, x, w, ARG(first), ARG(first + 1), ARG(first + 2), ARG(first + 3), mask};
    return call_n(s, EM_OP__convolution_backward, 8, args);
}

/* _convolution(x, w, b, stride, padding, dilation, groups) */
static PyObject *conv(Scratch *s, EmNode *n, int first, PyObject *x, PyObject *w, PyObject *b) {
    PyObject *args[7] = {x, w, b, ARG(first), ARG(first + 1), ARG(first + 2), ARG(first + 3)};
    return call_n(s, EM_OP__convolution, 7, args);
}

/* _convolution(input, weight, bias, stride, padding, dilation, groups) */
int bw_convolution(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    bool nx = need(n, 0), nw = need(n, 1), nb = need(n, 2);
    if (!G(0) || !(nx || nw || nb)) END;
    PyObject *r = conv_backward(S, n, 3, G(0), IN(0), IN(1), mask3(S, nx, nw, nb));
    if (nx) SET(0, item(S, r, 0));
    if (nw) SET(1, item(S, r, 1));
    if (nb) SET(2, item(S, r, 2));
    END;
}

/* whether _convolution_backward computed output k (its output_mask) */
static bool computed(EmNode *n, int k) {
    PyObject *m = ARG(7), *v = PySequence_GetItem(m, k);
    bool on = v && PyObject_IsTrue(v) == 1;
    Py_XDECREF(v);
    PyErr_Clear();
    return on;
}

int bw_convolution_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *ggx = computed(n, 0) ? G(0) : NULL, *ggw = computed(n, 1) ? G(1) : NULL,
             *ggb = computed(n, 2) ? G(2) : NULL;
    PyObject *g = IN(0), *x = IN(1), *w = IN(2);
    if (need(n, 0) && (ggx || ggw || ggb)) {
        PyObject *dg = NULL;
        if (ggx) dg = conv(S, n, 3, ggx, w, ggw ? Py_None : (ggb ? ggb : Py_None));
        if (ggw) {
            PyObject *t = conv(S, n, 3, x, ggw, ggb ? ggb : Py_None);
            dg = dg ? ADD(dg, t) : t;
        }
        if (!dg) { /* only the bias gradient flows back: ggb broadcast over (N, O, *spatial) */
            int nd = n->in_meta[0].ndim;
            PyObject *shape = keep(S, PyTuple_New(nd));
            for (int i = 0; shape && i < nd; i++) PyTuple_SET_ITEM(shape, i, PyLong_FromLong(i == 1 ? -1 : 1));
            dg = OP2(expand_as, OP2(reshape, ggb, shape), g);
        }
        SET(0, dg);
    }
    if (need(n, 1) && ggw) SET(1, item(S, conv_backward(S, n, 3, g, x, ggw, mask3(S, 1, 0, 0)), 0));
    if (need(n, 2) && ggx) SET(2, item(S, conv_backward(S, n, 3, g, ggx, w, mask3(S, 0, 1, 0)), 1));
    END;
}

/* t (N, C, *spatial) with its spatial dims cut to (narrow) or padded with zeros
 * at the end to (pad) the sizes of the windows of conv(gy, .) (torch convention) */
static PyObject *fit_windows(Scratch *s, PyObject *t, const int64_t *want, int nd, bool pad) {
    for (int d = 2; t && d < nd; d++) {
        const int64_t have = ((EmTensor *)t)->sizes[d];
        if (have == want[d]) continue;
        if (!pad) {
            PyObject *args[4] = {t, keep(s, PyLong_FromLong(d)), keep(s, PyLong_FromLong(0)),
                                 keep(s, PyLong_FromLongLong(want[d]))};
            t = call_n(s, EM_OP_narrow, 4, args);
            continue;
        }
        int64_t zs[EM_MAX_DIMS];
        memcpy(zs, ((EmTensor *)t)->sizes, sizeof(int64_t) * (size_t)nd);
        zs[d] = want[d] - have;
        PyObject *z = call(s, EM_OP_new_zeros, 2, t, keep(s, em_size_new(nd, zs)), NULL, NULL);
        PyObject *list = z ? keep(s, PyList_New(2)) : NULL;
        if (!list) return NULL;
        PyList_SET_ITEM(list, 0, Py_NewRef(t));
        PyList_SET_ITEM(list, 1, Py_NewRef(z));
        t = call(s, EM_OP_cat, 2, list, keep(s, PyLong_FromLong(d)), NULL, NULL);
    }
    return t;
}

/* value j of an IntList argument given as one value for all dims or one per dim (-1: unreadable) */
static int64_t list_at(PyObject *v, int j) {
    PyObject *it = PySequence_Check(v) ? PySequence_GetItem(v, PySequence_Size(v) == 1 ? 0 : j) : Py_NewRef(v);
    int64_t r = it ? PyLong_AsLongLong(it) : -1;
    Py_XDECREF(it);
    if (PyErr_Occurred()) PyErr_Clear(), r = -1;
    return r;
}

/* _convolution_transpose(input, weight, bias, stride, padding, output_padding, dilation, groups) */
int bw_convolution_transpose(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    bool nx = need(n, 0), nw = need(n, 1), nb = need(n, 2);
    if (!G(0) || !(nx || nw || nb)) END;
    PyObject *gy = G(0), *x = IN(0), *w = IN(1);
    const int nd = n->in_meta[0].ndim;
    const int64_t *xs = em_meta_sizes(&n->in_meta[0]);
    if (nx) { /* conv(gy, w), cut to x's positions */
        PyObject *cargs[7] = {gy, w, Py_None, ARG(3), ARG(4), ARG(6), ARG(7)};
        SET(0, fit_windows(S, call_n(S, EM_OP__convolution, 7, cargs), xs, nd, false));
    }
    if (nw) { /* conv(gy, .) has x + floor(output_padding / stride) windows per dim */
        int64_t win[EM_MAX_DIMS];
        memcpy(win, xs, sizeof(int64_t) * (size_t)nd);
        for (int d = 2; d < nd; d++) {
            int64_t st = list_at(ARG(3), d - 2), op = list_at(ARG(5), d - 2);
            if (st > 0 && op > 0) win[d] += op / st;
        }
        PyObject *g = fit_windows(S, x, win, nd, true);
        PyObject *bargs[8] = {g, gy, w, ARG(3), ARG(4), ARG(6), ARG(7), mask3(S, 0, 1, 0)};
        SET(1, item(S, call_n(S, EM_OP__convolution_backward, 8, bargs), 1));
    }
    if (nb) {
        PyObject *dims = keep(S, PyTuple_New(nd - 1));
        for (int i = 0; dims && i < nd - 1; i++) PyTuple_SET_ITEM(dims, i, PyLong_FromLong(i == 0 ? 0 : i + 1));
        SET(2, OP2(sum, gy, dims));
    }
    END;
}


