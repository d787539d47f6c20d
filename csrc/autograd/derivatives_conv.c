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
 * because gx is linear in (g, w) and gw in (x, g). */
#include "formula.h"


/* item k of a tuple result (kept by the scratch) */
static PyObject *item(Scratch *s, PyObject *t, int k) {
    if (!t) return NULL;
    return keep(s, Py_NewRef(PyTuple_GET_ITEM(t, k)));
}

/* _im2col(input, kernel_size, dilation, padding, stride) */
static int bw_im2col(EmNode *n, EmTensor **go, EmTensor **gi) {
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
static int bw_col2im(EmNode *n, EmTensor **go, EmTensor **gi) {
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
static int bw_convolution(EmNode *n, EmTensor **go, EmTensor **gi) {
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

static int bw_convolution_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
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

static const EmFormula formulas[] = {
    FORMULA(_im2col, 0, bw_im2col, "Im2ColBackward0")
    FORMULA(_col2im, 0, bw_col2im, "Col2ImBackward0")
    FORMULA(_convolution, IN0 | IN1, bw_convolution, "ConvolutionBackward0")
    FORMULA(_convolution_backward, ALLIN, bw_convolution_backward, "ConvolutionBackwardBackward0")
};

void em_formulas_conv(void) { em_formulas_add(formulas, (int)(sizeof formulas / sizeof formulas[0])); }
