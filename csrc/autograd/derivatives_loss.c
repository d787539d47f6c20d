/* derivatives_loss.c — backward formulas of softmax, log_softmax and the
 * losses with their own nodes (ops/softmax.c, ops/loss.c,
 * ops/cross_entropy.c).
 *
 * softmax:      gi = y * (g - sum(g * y, dim, keepdim))
 * log_softmax:  gi = g - exp(y) * sum(g, dim, keepdim)
 * Under create_graph they are written with ember ops (so they differentiate
 * again); otherwise one fused kernel pass (_softmax_backward_data) does it. */
#include "formula.h"
#include "../ops/loss.h"

static int softmax_grad(EmNode *n, EmTensor **go, EmTensor **gi, bool lg) {
    BEGIN;
    PyObject *y = OUT(0), *dim = ARG(1);
    if (!em_grad_enabled()) {
        SET(0, OP4(_softmax_backward_data, G(0), y, dim, lg ? Py_True : Py_False));
    } else if (lg) {
        PyObject *s = OP3(sum, G(0), dim, Py_True);
        SET(0, SUB(G(0), MUL(OP1(exp, y), s)));
    } else {
        PyObject *s = OP3(sum, MUL(G(0), y), dim, Py_True);
        SET(0, MUL(y, SUB(G(0), s)));
    }
    END;
}
int bw_softmax(EmNode *n, EmTensor **go, EmTensor **gi) { return softmax_grad(n, go, gi, false); }
int bw_log_softmax(EmNode *n, EmTensor **go, EmTensor **gi) { return softmax_grad(n, go, gi, true); }

#define OPT_IN(k) optional_in(S, n, (k))


/* nll_loss(input, target, weight, reduction, ignore_index) */
int bw_nll_loss(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) {
        PyObject *args[6] = {G(0), IN(0), IN(1), OPT_IN(2), ARG(3), ARG(4)};
        SET(0, call_n(S, EM_OP__nll_loss_backward, 6, args));
    }
    END;
}

/* nll_loss_backward(grad_output, input, target, weight, reduction,
 * ignore_index) is linear in grad_output and does not depend on input's
 * values: grad_output's gradient is nll_loss of the incoming gradient,
 * input's is zero (torch's formula), so nll_loss differentiates twice. */
int bw_nll_loss_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) {
        PyObject *args[5] = {G(0), IN(2), OPT_IN(3), ARG(4), ARG(5)};
        SET(0, call_n(S, EM_OP__nll_loss, 5, args));
    }
    if (need(n, 1)) SET(1, ZEROS(1));
    END;
}

/* _cross_entropy(input, target, weight, reduction, ignore_index,
 * label_smoothing) -> (loss, lse), Note [fused cross-entropy]. Without
 * create_graph one fused pass (_cross_entropy_backward) reads the saved lse.
 * Under create_graph the gradient of torch's composition is written with
 * ember ops, so it differentiates again:
 *   gl = (1 - e) nll_loss_backward(g) - e / C * s * w     (w's view, or ones)
 *   gx = gl - softmax(x) * sum(gl, class dim)
 * with s the scale of each kept position (g, / total weight for 'mean'). */
int bw_cross_entropy(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!need(n, 0)) END;
    const EmMeta *xm = &n->in_meta[0];
    int cdim = xm->ndim == 1 ? 0 : 1;
    int64_t C = em_meta_sizes(xm)[cdim];
    double e = PyFloat_AsDouble(ARG(5));
    long red = PyLong_AsLong(ARG(3));
    PyObject *x = IN(0), *t = IN(1), *w = OPT_IN(2), *dim = INT(cdim), *gx = NULL;
    if (G(0) && !em_grad_enabled()) {
        PyObject *args[8] = {G(0), x, t, w, OUT(1), ARG(3), ARG(4), ARG(5)};
        gx = call_n(S, EM_OP__cross_entropy_backward, 8, args);
    } else if (G(0)) {
        PyObject *args[6] = {G(0), x, t, w, ARG(3), ARG(4)};
        PyObject *gl = call_n(S, EM_OP__nll_loss_backward, 6, args);
        if (e > 0) {
            double scale = 1.0;
            if (red == RED_MEAN) {
                double tw = 0;
                if (!t || em_nll_total_weight((EmTensor *)t, w == Py_None ? NULL : (EmTensor *)w,
                                              PyLong_AsLongLong(ARG(4)), &tw) < 0)
                    sc.failed = true;
                scale = tw > 0 ? 1.0 / tw : 0.0; /* every target ignored: no gradient */
            }
            PyObject *s = MUL(MUL(G(0), OP2(ne, t, ARG(4))), NUM(scale));
            s = OP2(unsqueeze, s, dim);
            PyObject *sw;
            if (w != Py_None) {
                PyObject *shape = keep(S, PyTuple_New(xm->ndim));
                for (int d = 0; shape && d < xm->ndim; d++)
                    PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(d == cdim ? C : 1));
                sw = MUL(s, OP2(reshape, w, shape));
            } else {
                sw = OP2(expand_as, s, x);
            }
            gl = SUB(MUL(gl, NUM(1 - e)), MUL(sw, NUM(e / (double)C)));
        }
        gx = SUB(gl, MUL(OP2(softmax, x, dim), OP3(sum, gl, dim, Py_True)));
    }
    if (G(1)) { /* the lse output, when a caller used it: d lse / dx = softmax(x) */
        PyObject *t1 = MUL(OP2(unsqueeze, G(1), dim), OP2(softmax, x, dim));
        gx = gx ? ADD(gx, t1) : t1;
    }
    if (gx) SET(0, gx);
    END;
}

/* torch's top node of nll_loss: NllLoss for 1-d and 2-d input, NllLoss2D
 * beyond — under a View that restores the shape of an unreduced loss when
 * the input is not 4-d (torch reshapes other ranks to 4-d). */
static const char *nll_name_for(int ndim, long reduction) {
    if (ndim <= 2) return "NllLossBackward0";
    return ndim == 4 || reduction != RED_NONE ? "NllLoss2DBackward0" : "ViewBackward0";
}
const char *nll_loss_name(EmCall *c, PyObject *result) {
    (void)result;
    return nll_name_for(((EmTensor *)c->args[0])->ndim, PyLong_AsLong(c->args[3]));
}
const char *nll_loss_backward_name(EmCall *c, PyObject *result) {
    (void)result;
    return ((EmTensor *)c->args[1])->ndim <= 2 ? "NllLossBackwardBackward0" : "NllLoss2DBackwardBackward0";
}
/* cross_entropy's: nll_loss's, or the Add that mixes in the smoothing term */
const char *cross_entropy_name(EmCall *c, PyObject *result) {
    (void)result;
    if (PyFloat_AsDouble(c->args[5]) > 0) return "AddBackward0";
    return nll_name_for(((EmTensor *)c->args[0])->ndim, PyLong_AsLong(c->args[3]));
}

/* Elements of the unreduced loss: the broadcast of the tensor inputs. */
static int64_t loss_numel(EmNode *n) {
    int nd = 0;
    int64_t shape[EM_MAX_DIMS];
    for (int k = 0; k < n->num_next; k++) {
        const EmMeta *m = &n->in_meta[k];
        if (!m->defined) continue;
        int64_t out[EM_MAX_DIMS];
        int no;
        if (em_broadcast_shapes(nd, shape, m->ndim, em_meta_sizes(m), &no, out) < 0) return -1;
        nd = no;
        memcpy(shape, out, sizeof(int64_t) * (size_t)no);
    }
    int64_t c = 1;
    for (int d = 0; d < nd; d++) c *= shape[d];
    return c;
}

/* _pointwise_loss(input, target, weight, pos_weight, kind, reduction, param) */
int bw_pointwise_loss(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    long kind = PyLong_AsLong(ARG(4)), red = PyLong_AsLong(ARG(5));
    double p = PyFloat_AsDouble(ARG(6));
    PyObject *x = IN(0), *y = IN(1), *w = OPT_IN(2), *pw = OPT_IN(3), *one = NUM(1.0);
    PyObject *gs = G(0);
    if (red == 1) {
        int64_t cnt = loss_numel(n);
        if (cnt < 0) sc.failed = true;
        gs = DIV(gs, NUM((double)cnt));
    }
    if (w != Py_None) gs = MUL(gs, w);
    PyObject *gx = NULL, *gy = NULL;
    switch (kind) {
    case EM_LOSS_MSE:
        gx = MUL(MUL(SUB(x, y), NUM(2.0)), gs);
        break;
    case EM_LOSS_SMOOTH_L1: {
        PyObject *d = SUB(x, y);
        PyObject *t = OP1(sign, d);
        if (p != 0) t = OP3(where, OP2(lt, OP1(abs, d), NUM(p)), DIV(d, NUM(p)), t);
        gx = MUL(t, gs);
        break;
    }
    case EM_LOSS_HUBER:
        gx = MUL(OP3(clamp, SUB(x, y), NUM(-p), NUM(p)), gs);
        break;
    case EM_LOSS_BCE: {
        PyObject *one_x = SUB(one, x);
        gx = MUL(DIV(SUB(x, y), OP2(clamp_min, MUL(one_x, x), NUM(1e-12))), gs);
        if (need(n, 1)) {
            PyObject *l1x = OP2(clamp_min, OP1(log, one_x), NUM(-100)), *lx = OP2(clamp_min, OP1(log, x), NUM(-100));
            gy = MUL(SUB(l1x, lx), gs);
        }
        break;
    }
    case EM_LOSS_BCE_LOGITS: {
        PyObject *s = OP1(sigmoid, x);
        if (pw == Py_None) {
            gx = MUL(SUB(s, y), gs);
            if (need(n, 1)) gy = MUL(NEG(x), gs);
        } else { /* d/dx = (1 - y) - lw (1 - sigmoid(x)), lw = 1 + (pw - 1) y */
            PyObject *pw1 = SUB(pw, one), *lw = ADD(one, MUL(pw1, y));
            gx = MUL(ADD(SUB(one, y), MUL(lw, SUB(s, one))), gs);
            if (need(n, 1)) gy = MUL(ADD(NEG(x), MUL(pw1, keep(S, em_softplus_neg(x)))), gs);
        }
        break;
    }
    default:
        PyErr_Format(PyExc_SystemError, "ember: pointwise_loss backward of unknown kind %ld", kind);
        sc.failed = true;
    }
    if (need(n, 0)) SET(0, gx);
    if (need(n, 1) && kind <= EM_LOSS_HUBER) SET(1, NEG(gx));
    else if (need(n, 1) && gy) SET(1, gy);
    END;
}

const char *pointwise_name(EmCall *c, PyObject *result) {
    (void)result;
    switch (PyLong_AsLong(c->args[4])) {
    case EM_LOSS_MSE: return "MseLossBackward0";
    case EM_LOSS_SMOOTH_L1: return "SmoothL1LossBackward0";
    case EM_LOSS_HUBER: return "HuberLossBackward0";
    case EM_LOSS_BCE: return "BinaryCrossEntropyBackward0";
    default: return "BinaryCrossEntropyWithLogitsBackward0";
    }
}


