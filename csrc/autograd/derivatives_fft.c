/* derivatives_fft.c — backward formulas of the FFT primitives (ops/fft.c).
 * Each transform is linear, so its gradient is the adjoint transform of the
 * gradient (Note [complex gradients]): the inverse direction with the same
 * normalization for c2c; for r2c the real part of the inverse c2c of the
 * gradient zero-extended to the full length; for c2r the one-sided r2c of
 * the gradient with the entries whose mirror image c2r adds doubled. */
#include "formula.h"

int bw_fft_c2c(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *forward = PyObject_IsTrue(ARG(3)) ? Py_False : Py_True;
    SET(0, OP4(_fft_c2c, G(0), ARG(1), ARG(2), forward));
    END;
}

/* the last dim _fft_r2c / _fft_c2r transformed: the last of `dim`, as a
 * non-negative index */
static int last_dim(EmNode *n, PyObject *dims) {
    Py_ssize_t k = PySequence_Size(dims);
    if (k <= 0) return -1;
    PyObject *o = PySequence_GetItem(dims, k - 1);
    if (!o) return -1;
    long d = PyLong_AsLong(o);
    Py_DECREF(o);
    int nd = n->in_meta[0].ndim;
    return (int)(d < 0 ? d + nd : d);
}

int bw_fft_r2c(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int last = last_dim(n, ARG(1));
    if (last < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: _fft_r2c backward without dims");
        sc.failed = true;
        END;
    }
    const EmMeta *m = &n->in_meta[0];
    int64_t full = em_meta_sizes(m)[last], have = go[0]->sizes[last];
    PyObject *g = G(0);
    if (have < full) { /* the one-sided half: the other outputs' gradients are zero */
        int64_t rest[EM_MAX_DIMS];
        for (int d = 0; d < go[0]->ndim; d++) rest[d] = go[0]->sizes[d];
        rest[last] = full - have;
        PyObject *zeros = OP2(new_zeros, g, keep(S, em_size_new(go[0]->ndim, rest)));
        PyObject *pair = zeros ? keep(S, PyList_New(0)) : NULL;
        if (pair && (PyList_Append(pair, g) < 0 || PyList_Append(pair, zeros) < 0)) sc.failed = true;
        g = OP2(cat, pair, INT(last));
    }
    SET(0, OP1(real, OP4(_fft_c2c, g, ARG(1), ARG(2), Py_False)));
    END;
}

int bw_fft_c2r(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int last = last_dim(n, ARG(1));
    if (last < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "ember: _fft_c2r backward without dims");
        sc.failed = true;
        END;
    }
    PyObject *half = OP4(_fft_r2c, G(0), ARG(1), ARG(2), Py_True);
    if (!half) END;
    const int64_t h = ((EmTensor *)half)->sizes[last], doubled = go[0]->sizes[last] - h;
    if (doubled <= 0) {
        SET(0, half);
        END;
    }
    /* weights along the last dim: 1, then 2 for the `doubled` entries c2r mirrors, then 1 */
    int nd = go[0]->ndim;
    int64_t wshape[EM_MAX_DIMS];
    for (int d = 0; d < nd; d++) wshape[d] = d == last ? h : 1;
    PyObject *one = INT(1);
    PyObject *parts = keep(S, PyList_New(0));
    int64_t sizes[3] = {1, doubled, h - 1 - doubled};
    for (int i = 0; i < 3 && !sc.failed; i++) {
        PyObject *piece = OP3(new_full, G(0), keep(S, em_size_new(1, &sizes[i])), i == 1 ? INT(2) : one);
        if (!piece || !parts || PyList_Append(parts, piece) < 0) sc.failed = true;
    }
    if (sc.failed) END;
    PyObject *w = OP2(reshape, OP2(cat, parts, INT(0)), keep(S, em_size_new(nd, wshape)));
    SET(0, MUL(half, w));
    END;
}


