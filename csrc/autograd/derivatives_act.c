/* derivatives_act.c — backward formulas of the nn activations (ops.def's
 * "nn activations" block), under torch's node names. They are written with
 * ember ops (formula.h), so double backward works; GELU and SiLU call their
 * fused backward ops (GELU's has its own formula, GeluBackwardBackward0;
 * SiLU's, like torch's, is replaced by ember ops under create_graph).
 *
 * At kinks each formula picks the side torch picks (checked against torch in
 * tests/test_nn_activation.py): relu6/hardtanh pass the gradient only
 * strictly inside (min, max) (and at NaN), hardswish is 0 at x <= -3 and 1 at
 * x >= 3, hardsigmoid is 1/6 strictly inside (-3, 3), ELU takes its
 * exponential side at 0, leaky_relu its slope at 0, threshold is 0 at
 * x == threshold (NaN passes), softplus is linear only where beta·x > threshold. */
#include "formula.h"

#define X IN(0)

/* the number args[i] as a double (forward arguments were type-checked) */
static double num(EmNode *n, int i) { return PyFloat_AsDouble(ARG(i)); }

int bw_gelu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP3(_gelu_backward, G(0), X, ARG(1)));
    END;
}

/* gelu_backward(g, x) = g·f'(x): d/dg = f'(x), d/dx = g·f''(x) with
 *   exact: f'' = φ(x)·(2 - x²)
 *   tanh:  f'' = (1 - t²)·(u' - x·t·u'² + 3·k·κ·x²), t = tanh(u),
 *          u = k(x + κx³), u' = k(1 + 3κx²) */
int bw_gelu_backward(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *gg = G(0), *x = IN(1), *mode = ARG(2);
    if (need(n, 0)) SET(0, OP3(_gelu_backward, gg, x, mode));
    if (need(n, 1)) {
        bool tanh_form = mode != Py_None && !PyUnicode_CompareWithASCIIString(mode, "tanh");
        PyObject *x2 = OP1(square, x), *f2;
        if (!tanh_form) {
            PyObject *pdf = MUL(OP1(exp, MUL(x2, NUM(-0.5))), NUM(0.3989422804014327));
            f2 = MUL(pdf, OP2(rsub, x2, NUM(2.0)));
        } else {
            const double k = 0.7978845608028654, kappa = 0.044715;
            PyObject *u = MUL(ADD(x, MUL(MUL(x2, x), NUM(kappa))), NUM(k));
            PyObject *du = MUL(ADD(MUL(x2, NUM(3 * kappa)), NUM(1.0)), NUM(k));
            PyObject *t = OP1(tanh, u);
            PyObject *inner = ADD(SUB(du, MUL(MUL(x, t), OP1(square, du))), MUL(x2, NUM(3 * k * kappa)));
            f2 = MUL(OP2(rsub, OP1(square, t), NUM(1.0)), inner);
        }
        SET(1, MUL(MUL(gg, IN(0)), f2));
    }
    END;
}

/* silu: g·σ(1 + x(1 - σ)). The fused kernel when the gradient is not itself
 * differentiated; under create_graph the same formula in ember ops, as torch
 * does (its silu_backward has no derivative) */
int bw_silu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X, *g = G(0);
    if (!em_grad_enabled()) {
        SET(0, OP2(_silu_backward, g, x));
    } else {
        PyObject *s = OP1(sigmoid, x);
        SET(0, MUL(g, MUL(s, ADD(MUL(x, OP2(rsub, s, NUM(1.0))), NUM(1.0)))));
    }
    END;
}

/* mish = x·tanh(softplus(x)): t + x·σ(x)·(1 - t²) */
int bw_mish(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X;
    PyObject *t = OP1(tanh, OP3(_softplus, x, NUM(1.0), NUM(20.0)));
    PyObject *d = ADD(t, MUL(MUL(x, OP1(sigmoid, x)), OP2(rsub, OP1(square, t), NUM(1.0))));
    SET(0, MUL(G(0), d));
    END;
}

/* softplus: σ(beta·x), 1 where beta·x > threshold */
int bw_softplus(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = MUL(X, ARG(1)), *g = G(0);
    SET(0, OP3(where, OP2(gt, z, ARG(2)), g, MUL(g, OP1(sigmoid, z))));
    END;
}

/* ELU family: x <= 0: g·a·c·exp(c·x), else g·b (a = alpha·scale, b = scale,
 * c = input scale, as in the forward) */
static int elu_grad(EmNode *n, EmTensor **go, EmTensor **gi, double a, double b, double c) {
    BEGIN;
    PyObject *x = X, *g = G(0);
    PyObject *neg = MUL(g, MUL(OP1(exp, MUL(x, NUM(c))), NUM(a * c)));
    PyObject *pos = b == 1 ? g : MUL(g, NUM(b));
    SET(0, OP3(where, OP2(le, x, NUM(0.0)), neg, pos));
    END;
}
int bw_elu(EmNode *n, EmTensor **go, EmTensor **gi) { return elu_grad(n, go, gi, num(n, 1), 1, 1); }
int bw_selu(EmNode *n, EmTensor **go, EmTensor **gi) {
    const double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
    return elu_grad(n, go, gi, alpha * scale, scale, 1);
}
int bw_celu(EmNode *n, EmTensor **go, EmTensor **gi) {
    double alpha = num(n, 1);
    return elu_grad(n, go, gi, alpha, 1, 1 / alpha);
}

int bw_leaky_relu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *g = G(0);
    SET(0, OP3(where, OP2(gt, X, NUM(0.0)), g, MUL(g, ARG(1))));
    END;
}

int bw_hardtanh(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X;
    PyObject *outside = OP2(logical_or, OP2(le, x, ARG(1)), OP2(ge, x, ARG(2)));
    SET(0, OP3(where, outside, NUM(0.0), G(0)));
    END;
}

int bw_hardswish(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X, *g = G(0);
    PyObject *mid = MUL(g, ADD(DIV(x, NUM(3.0)), NUM(0.5)));
    SET(0, OP3(where, OP2(le, x, NUM(-3.0)), NUM(0.0), OP3(where, OP2(lt, x, NUM(3.0)), mid, g)));
    END;
}

/* torch scales by 1/6 rounded to float32, in every dtype */
int bw_hardsigmoid(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X;
    PyObject *inside = OP2(logical_and, OP2(gt, x, NUM(-3.0)), OP2(lt, x, NUM(3.0)));
    SET(0, OP3(where, inside, MUL(G(0), NUM((double)(1.0f / 6.0f))), NUM(0.0)));
    END;
}

int bw_log_sigmoid(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), OP1(sigmoid, NEG(X))));
    END;
}

int bw_threshold(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP3(where, OP2(le, X, ARG(1)), NUM(0.0), G(0))); /* NaN passes g, as torch's */
    END;
}

/* glu = a·σ(b): da = g·σ(b), db = g·a·σ(b)(1 - σ(b)), joined along dim */
int bw_glu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = X, *g = G(0), *dim = ARG(1);
    const EmMeta *m = &n->in_meta[0];
    int d = 0;
    if (em_wrap_dim(PyLong_AsLongLong(dim), m->ndim, &d) < 0) sc.failed = true;
    int64_t h = m->ndim > 0 ? em_meta_sizes(m)[d] / 2 : 0;
    PyObject *dd = INT(d);
    PyObject *a = OP4(narrow, x, dd, INT(0), INT(h)), *b = OP4(narrow, x, dd, INT(h), INT(h));
    PyObject *s = OP1(sigmoid, b);
    PyObject *ga = MUL(g, s);
    PyObject *gb = MUL(MUL(ga, a), OP2(rsub, s, NUM(1.0)));
    /* the two halves written into zeros through views (copy_ into a view is
     * differentiable: CopySlices), so that double backward works */
    PyObject *z = ZEROS(0);
    OP2(copy_, OP4(narrow, z, dd, INT(0), INT(h)), ga);
    OP2(copy_, OP4(narrow, z, dd, INT(h), INT(h)), gb);
    SET(0, z);
    END;
}

/* in-place forms save their result in torch and get another node name */
const char *name_elu(EmCall *c, PyObject *r) { return c->inplace ? "EluBackward1" : "EluBackward0"; }
const char *name_celu(EmCall *c, PyObject *r) { return c->inplace ? "CeluBackward1" : "CeluBackward0"; }
const char *name_leaky(EmCall *c, PyObject *r) {
    return c->inplace ? "LeakyReluBackward1" : "LeakyReluBackward0";
}
const char *name_threshold(EmCall *c, PyObject *r) {
    return c->inplace ? "ThresholdBackward1" : "ThresholdBackward0";
}


