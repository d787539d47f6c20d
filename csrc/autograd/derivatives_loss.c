/* derivatives_loss.c — backward formulas of softmax, log_softmax and the
 * losses with their own nodes (ops/softmax.c, ops/loss.c).
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
static int bw_softmax(EmNode *n, EmTensor **go, EmTensor **gi) { return softmax_grad(n, go, gi, false); }
static int bw_log_softmax(EmNode *n, EmTensor **go, EmTensor **gi) { return softmax_grad(n, go, gi, true); }

/* An optional saved input: Py_None when the forward got None. */
static PyObject *optional_in(Scratch *s, EmNode *n, int k) {
    return n->saved[k].data || n->released ? input(s, n, k) : Py_None;
}
#define OPT_IN(k) optional_in(S, n, (k))

static PyObject *call_n(Scratch *s, EmOpId id, int nargs, PyObject **args) {
    for (int i = 0; i < nargs; i++)
        if (!args[i]) {
            s->failed = true;
            return NULL;
        }
    return keep(s, em_op(id, nargs, args));
}

/* nll_loss(input, target, weight, reduction, ignore_index) */
static int bw_nll_loss(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) {
        PyObject *args[6] = {G(0), IN(0), IN(1), OPT_IN(2), ARG(3), ARG(4)};
        SET(0, call_n(S, EM_OP__nll_loss_backward, 6, args));
    }
    END;
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
static int bw_pointwise_loss(EmNode *n, EmTensor **go, EmTensor **gi) {
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

static const char *pointwise_name(EmCall *c, PyObject *result) {
    (void)result;
    switch (PyLong_AsLong(c->args[4])) {
    case EM_LOSS_MSE: return "MseLossBackward0";
    case EM_LOSS_SMOOTH_L1: return "SmoothL1LossBackward0";
    case EM_LOSS_HUBER: return "HuberLossBackward0";
    case EM_LOSS_BCE: return "BinaryCrossEntropyBackward0";
    default: return "BinaryCrossEntropyWithLogitsBackward0";
    }
}

static const EmFormula formulas[] = {
    FORMULA(softmax, SOUT, bw_softmax, "SoftmaxBackward0")
    FORMULA(log_softmax, SOUT, bw_log_softmax, "LogSoftmaxBackward0")
    FORMULA(_nll_loss, IN0 | IN1 | IN2, bw_nll_loss, "NllLossBackward0")
    FORMULA_NAMED(_pointwise_loss, IN0 | IN1 | IN2 | EM_SAVE_IN(3), bw_pointwise_loss, pointwise_name)
};

void em_formulas_loss(void) { em_formulas_add(formulas, (int)(sizeof formulas / sizeof formulas[0])); }
