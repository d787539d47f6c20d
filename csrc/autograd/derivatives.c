/* derivatives.c — backward formulas of the elementwise, view and copy ops,
 * and the node namers of the ops whose torch node name depends on the call
 * (ops.def's backward column names both: BW / BW_NAMED).
 *
 * Formulas are written with ember ops called through em_op, so when the
 * engine runs with create_graph=True they record a graph of their own and
 * second derivatives come out right. A formula receives the gradients of
 * the op's outputs (go[j], NULL when none flowed) and writes the gradient of
 * each tensor input k it is asked for (need(n, k)) into gi[k] as a new
 * reference. Gradients may keep the broadcast shape or a wider dtype: the
 * engine sums them to the input's shape and casts (engine.c fit_gradient).
 *
 * Expressions build on a scratch list that owns every temporary; any failed
 * step yields NULL, which propagates, so a formula checks once at the end.
 */
#include "formula.h"
#include <ctype.h>

/* ------------------------------------------------------ arithmetic */

static bool is_one(PyObject *o) {
    EmScalar s;
    if (em_scalar_from_py(o, &s) < 0) {
        PyErr_Clear();
        return false;
    }
    return s.kind == 'f' ? s.v.f == 1.0 : s.v.i == 1;
}

/* weight of a max/min argument: 1 where it wins, 1/2 on a tie (torch) */
static PyObject *tie_weight(Scratch *s, PyObject *wins, PyObject *tie) {
    PyObject *half = keep(s, PyFloat_FromDouble(0.5)), *zero = keep(s, PyFloat_FromDouble(0.0));
    PyObject *one = keep(s, PyFloat_FromDouble(1.0));
    PyObject *inner = call(s, EM_OP_where, 3, tie, half, zero, NULL);
    return call(s, EM_OP_where, 3, wins, one, inner, NULL);
}

int bw_add(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *alpha = ARG(2);
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, is_one(alpha) ? G(0) : MUL(G(0), alpha));
    END;
}

int bw_sub(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *alpha = ARG(2);
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, is_one(alpha) ? NEG(G(0)) : MUL(NEG(G(0)), alpha));
    END;
}

int bw_rsub(EmNode *n, EmTensor **go, EmTensor **gi) { /* other - alpha * input */
    BEGIN;
    PyObject *alpha = ARG(2);
    if (need(n, 0)) SET(0, is_one(alpha) ? NEG(G(0)) : MUL(NEG(G(0)), alpha));
    if (need(n, 1)) SET(1, G(0));
    END;
}

int bw_mul(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, MUL(G(0), CJ(IN(1))));
    if (need(n, 1)) SET(1, MUL(G(0), CJ(IN(0))));
    END;
}

int bw_div(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    bool rounded = em_op_defs[n->op].sig.nparams > 2 && n->op == EM_OP_div && ARG(2) != Py_None;
    if (rounded) { /* floor/trunc division: piecewise constant */
        if (need(n, 0)) SET(0, ZEROS(0));
        if (need(n, 1)) SET(1, ZEROS(1));
        END;
    }
    PyObject *b = CJ(IN(1));
    if (need(n, 0)) SET(0, DIV(G(0), b));
    if (need(n, 1)) SET(1, NEG(DIV(MUL(G(0), CJ(IN(0))), MUL(b, b))));
    END;
}

int bw_remainder(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, NEG(MUL(G(0), OP1(floor, DIV(IN(0), IN(1))))));
    END;
}

int bw_fmod(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, NEG(MUL(G(0), OP1(trunc, DIV(IN(0), IN(1))))));
    END;
}

/* pow: d/da a^b = b a^(b-1); d/db a^b = a^b log a (0 where a == 0 and b >= 0) */
int bw_pow(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1);
    if (!a || !b) END; /* released graph: the error is set */
    if (need(n, 0)) {
        EmScalar e;
        bool zero_exp = !em_is_tensor(b) && em_scalar_from_py(b, &e) == 0 && em_scalar_to_double(e) == 0;
        /* a Python exponent stays a Python number: SUB would make it a 0-d float32 tensor, which rounds 1/3 */
        PyObject *bm1 = em_is_tensor(b) ? SUB(b, NUM(1.0)) : keep(S, PyNumber_Subtract(b, NUM(1.0)));
        PyObject *ga = zero_exp ? NULL : MUL(G(0), CJ(MUL(OP2(pow, a, bm1), b)));
        if (zero_exp)
            SET(0, ZEROS(0));
        else if (em_is_tensor(b)) /* b == 0: no dependence on a, even at a == 0 */
            SET(0, OP3(where, OP2(eq, b, NUM(0.0)), NUM(0.0), ga));
        else
            SET(0, ga);
    }
    if (need(n, 1)) {
        PyObject *r = OUT(0), *term;
        if (em_is_tensor(a)) { /* a^b log a, with 0 where a == 0 and b >= 0 */
            PyObject *mask = OP2(logical_and, OP2(eq, a, NUM(0.0)), OP2(ge, b, NUM(0.0)));
            term = OP3(where, mask, NUM(0.0), MUL(r, OP1(log, a)));
        } else {
            double av = PyFloat_AsDouble(a);
            term = av == 0 ? ZEROS(1) : MUL(r, NUM(log(av)));
        }
        SET(1, MUL(G(0), CJ(term)));
    }
    END;
}

int bw_atan2(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1);
    PyObject *den = ADD(MUL(a, a), MUL(b, b)), *zero = OP2(eq, den, NUM(0.0)); /* 0 at the origin */
    if (need(n, 0)) SET(0, OP3(where, zero, NUM(0.0), DIV(MUL(G(0), b), den)));
    if (need(n, 1)) SET(1, OP3(where, zero, NUM(0.0), DIV(MUL(NEG(G(0)), a), den)));
    END;
}

int bw_hypot(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *r = OUT(0);
    if (need(n, 0)) SET(0, MUL(G(0), DIV(IN(0), r)));
    if (need(n, 1)) SET(1, MUL(G(0), DIV(IN(1), r)));
    END;
}

int bw_copysign(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) {
        PyObject *a = IN(0);
        SET(0, MUL(G(0), OP3(where, OP2(eq, a, NUM(0.0)), NUM(0.0), DIV(OUT(0), a))));
    }
    if (need(n, 1)) SET(1, ZEROS(1));
    END;
}

int bw_logaddexp(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1);
    if (need(n, 0)) SET(0, DIV(G(0), ADD(OP1(exp, SUB(b, a)), NUM(1.0))));
    if (need(n, 1)) SET(1, DIV(G(0), ADD(OP1(exp, SUB(a, b)), NUM(1.0))));
    END;
}

/* maximum/minimum: the gradient goes to the chosen input, split on ties */
static int max_min(EmNode *n, EmTensor **go, EmTensor **gi, EmOpId better) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1), *g = G(0);
    PyObject *half = DIV(g, NUM(2.0)), *tie = OP2(eq, a, b);
    PyObject *args[2] = {a, b};
    PyObject *a_wins = call_n(S, better, 2, args);
    if (need(n, 0)) SET(0, OP3(where, tie, half, OP3(where, a_wins, g, NUM(0.0))));
    if (need(n, 1)) SET(1, OP3(where, tie, half, OP3(where, a_wins, NUM(0.0), g)));
    END;
}
int bw_maximum(EmNode *n, EmTensor **go, EmTensor **gi) { return max_min(n, go, gi, EM_OP_gt); }
int bw_minimum(EmNode *n, EmTensor **go, EmTensor **gi) { return max_min(n, go, gi, EM_OP_lt); }

/* fmax/fmin: NaN loses; ties split the gradient */
static int fmax_fmin(EmNode *n, EmTensor **go, EmTensor **gi, EmOpId a_better) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1), *g = G(0);
    PyObject *ab[2] = {a, b}, *ba[2] = {b, a};
    PyObject *tie = OP2(eq, a, b);
    PyObject *a_wins = OP2(logical_or, call_n(S, a_better, 2, ab), OP1(isnan, b));
    PyObject *b_wins = OP2(logical_or, call_n(S, a_better, 2, ba), OP1(isnan, a));
    if (need(n, 0)) SET(0, MUL(g, tie_weight(S, a_wins, tie)));
    if (need(n, 1)) SET(1, MUL(g, tie_weight(S, b_wins, tie)));
    END;
}
int bw_fmax(EmNode *n, EmTensor **go, EmTensor **gi) { return fmax_fmin(n, go, gi, EM_OP_gt); }
int bw_fmin(EmNode *n, EmTensor **go, EmTensor **gi) { return fmax_fmin(n, go, gi, EM_OP_lt); }

/* a clamp bound: the saved tensor, the number given, or NULL when absent */
static PyObject *bound(Scratch *s, EmNode *n, int k) {
    if (k < 0) return NULL;
    if (em_saved_holds(&n->saved[k])) return input(s, n, k);
    PyObject *a = arg(n, param_of(n, k));
    return a == Py_None ? NULL : a;
}

/* clamp(x, lo, hi) = min(max(x, lo), hi). Number bounds: the gradient passes
 * where x is strictly inside. Tensor bounds: like maximum/minimum, ties
 * split the gradient between x and the bound. */
static int clamp_grads(EmNode *n, EmTensor **go, EmTensor **gi, int lo_k, int hi_k) {
    BEGIN;
    PyObject *x = IN(0), *g = G(0);
    PyObject *lo = bound(S, n, lo_k), *hi = bound(S, n, hi_k);
    bool tensors = (lo && em_is_tensor(lo)) || (hi && em_is_tensor(hi));
    if (!tensors) {
        PyObject *inside = NULL;
        if (lo) inside = OP2(gt, x, lo);
        if (hi) {
            PyObject *below = OP2(lt, x, hi);
            inside = inside ? OP2(logical_and, inside, below) : below;
        }
        if (need(n, 0)) SET(0, inside ? OP3(where, inside, g, NUM(0.0)) : g);
        END;
    }
    PyObject *m = x, *wx = NULL, *wm = NULL;
    if (lo) {
        PyObject *tie = OP2(eq, x, lo);
        wx = tie_weight(S, OP2(gt, x, lo), tie);
        if (need(n, lo_k)) SET(lo_k, MUL(g, MUL(tie_weight(S, OP2(lt, x, lo), tie),
                                              hi ? tie_weight(S, OP2(lt, OP2(maximum, x, lo), hi),
                                                              OP2(eq, OP2(maximum, x, lo), hi))
                                                 : NUM(1.0))));
        m = OP2(maximum, x, lo);
    }
    if (hi) {
        PyObject *tie = OP2(eq, m, hi);
        wm = tie_weight(S, OP2(lt, m, hi), tie);
        if (need(n, hi_k)) SET(hi_k, MUL(g, tie_weight(S, OP2(gt, m, hi), tie)));
    }
    if (need(n, 0)) {
        PyObject *w = wx && wm ? MUL(wx, wm) : wx ? wx : wm;
        SET(0, MUL(g, w));
    }
    END;
}
int bw_clamp(EmNode *n, EmTensor **go, EmTensor **gi) { return clamp_grads(n, go, gi, 1, 2); }
int bw_clamp_min(EmNode *n, EmTensor **go, EmTensor **gi) { return clamp_grads(n, go, gi, 1, -1); }
int bw_clamp_max(EmNode *n, EmTensor **go, EmTensor **gi) { return clamp_grads(n, go, gi, -1, 1); }

int bw_where(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *cond = IN(0);
    if (need(n, 1)) SET(1, OP3(where, cond, G(0), NUM(0.0)));
    if (need(n, 2)) SET(2, OP3(where, cond, NUM(0.0), G(0)));
    END;
}

int bw_lerp(EmNode *n, EmTensor **go, EmTensor **gi) { /* a + w (b - a) */
    BEGIN;
    PyObject *w = IN(2);
    if (need(n, 0)) SET(0, MUL(G(0), SUB(NUM(1.0), w)));
    if (need(n, 1)) SET(1, MUL(G(0), w));
    if (need(n, 2)) SET(2, MUL(G(0), SUB(IN(1), IN(0))));
    END;
}

int bw_addcmul(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *value = ARG(3), *gv = is_one(value) ? G(0) : MUL(G(0), value);
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, MUL(gv, IN(2)));
    if (need(n, 2)) SET(2, MUL(gv, IN(1)));
    END;
}

int bw_addcdiv(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *value = ARG(3), *gv = is_one(value) ? G(0) : MUL(G(0), value), *t2 = IN(2);
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 1)) SET(1, DIV(gv, t2));
    if (need(n, 2)) SET(2, NEG(DIV(MUL(gv, IN(1)), MUL(t2, t2))));
    END;
}

/* ---------------------------------------------------------- unary */

int bw_identity(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, G(0));
    END;
}

/* piecewise-constant ops (floor, sign, round, ...) and overwritten inputs */
int bw_zero(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    for (int k = 0; k < n->num_next; k++)
        if (need(n, k)) SET(k, ZEROS(k));
    END;
}

/* sgn: piecewise constant on reals; on complex z, s = z/|z| has
 * ds/dz = 1/(2|z|) and ds/dz* = -s^2/(2|z|), so the input's gradient is
 * (g - s^2 conj(g)) / (2|z|), taken as 0 at z = 0 as torch does */
int bw_sgn(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!em_is_complex(n->in_meta[0].dtype)) {
        SET(0, ZEROS(0));
    } else {
        PyObject *g = G(0), *sg = OUT(0), *r = OP1(abs, IN(0)), *zero = NUM(0.0);
        PyObject *num = SUB(g, MUL(MUL(sg, sg), CJ(g)));
        SET(0, OP3(where, OP2(eq, r, zero), zero, DIV(num, MUL(r, NUM(2.0)))));
    }
    END;
}

int bw_neg(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, NEG(G(0)));
    END;
}

/* abs: sign(x) for reals; z / |z| (0 at 0) for complex z, torch's sgn */
static PyObject *abs_direction(Scratch *s, PyObject *x) {
    if (!x || !em_is_tensor(x) || !em_is_complex(((EmTensor *)x)->dtype))
        return call(s, EM_OP_sign, 1, x, NULL, NULL, NULL);
    PyObject *r = call(s, EM_OP_abs, 1, x, NULL, NULL, NULL);
    PyObject *zero = keep(s, PyFloat_FromDouble(0.0));
    PyObject *at0 = call(s, EM_OP_eq, 2, r, zero, NULL, NULL);
    return call(s, EM_OP_where, 3, at0, zero, call(s, EM_OP_div, 2, x, r, NULL, NULL), NULL);
}

/* acosh'(x) = 1 / sqrt(x^2 - 1) on reals; on complex z, where clog's branch
 * cut makes acosh(z) = log(z + sqrt(z - 1) sqrt(z + 1)), the derivative is
 * 1 / (sqrt(z - 1) sqrt(z + 1)) (it differs from 1/sqrt(z^2 - 1) by sign off the cut) */
static PyObject *acosh_derivative(Scratch *s, PyObject *x) {
    PyObject *one = keep(s, PyFloat_FromDouble(1.0));
    if (!x || !em_is_tensor(x) || !em_is_complex(((EmTensor *)x)->dtype)) {
        PyObject *sq = call(s, EM_OP_square, 1, x, NULL, NULL, NULL);
        return call(s, EM_OP_rsqrt, 1, call(s, EM_OP_sub, 2, sq, one, NULL, NULL), NULL, NULL, NULL);
    }
    PyObject *lo = call(s, EM_OP_sqrt, 1, call(s, EM_OP_sub, 2, x, one, NULL, NULL), NULL, NULL, NULL);
    PyObject *hi = call(s, EM_OP_sqrt, 1, call(s, EM_OP_add, 2, x, one, NULL, NULL), NULL, NULL, NULL);
    return call(s, EM_OP_reciprocal, 1, call(s, EM_OP_mul, 2, lo, hi, NULL, NULL), NULL, NULL, NULL);
}

#define UNARY(name, expr)                                                      \
    int bw_##name(EmNode *n, EmTensor **go, EmTensor **gi) {            \
        BEGIN;                                                                 \
        PyObject *g = G(0);                                                    \
        SET(0, (expr));                                                        \
        END;                                                                   \
    }
#define X IN(0)
#define R OUT(0)
UNARY(abs, MUL(g, abs_direction(S, X)))
UNARY(square, MUL(g, CJ(MUL(X, NUM(2.0)))))
UNARY(relu, OP3(where, OP2(le, R, NUM(0.0)), NUM(0.0), g)) /* NaN passes g, as torch's */
UNARY(exp, MUL(g, CJ(R)))
UNARY(exp2, MUL(g, CJ(MUL(R, NUM(M_LN2)))))
UNARY(expm1, MUL(g, CJ(ADD(R, NUM(1.0)))))
UNARY(log, DIV(g, CJ(X)))
UNARY(log2, DIV(g, CJ(MUL(X, NUM(M_LN2)))))
UNARY(log10, DIV(g, CJ(MUL(X, NUM(M_LN10)))))
UNARY(log1p, DIV(g, CJ(ADD(X, NUM(1.0)))))
UNARY(sqrt, DIV(g, CJ(MUL(R, NUM(2.0)))))
UNARY(rsqrt, MUL(g, MUL(OP2(pow, R, NUM(3.0)), NUM(-0.5))))
UNARY(sin, MUL(g, CJ(OP1(cos, X))))
UNARY(cos, MUL(g, CJ(NEG(OP1(sin, X)))))
UNARY(tan, MUL(g, CJ(ADD(OP1(square, R), NUM(1.0)))))
UNARY(asin, MUL(g, CJ(OP1(rsqrt, OP2(rsub, OP1(square, X), NUM(1.0))))))
UNARY(acos, NEG(MUL(g, CJ(OP1(rsqrt, OP2(rsub, OP1(square, X), NUM(1.0)))))))
UNARY(atan, DIV(g, CJ(ADD(OP1(square, X), NUM(1.0)))))
UNARY(sinh, MUL(g, CJ(OP1(cosh, X))))
UNARY(cosh, MUL(g, CJ(OP1(sinh, X))))
UNARY(tanh, MUL(g, CJ(OP2(rsub, OP1(square, R), NUM(1.0)))))
UNARY(asinh, MUL(g, CJ(OP1(rsqrt, ADD(OP1(square, X), NUM(1.0))))))
UNARY(acosh, MUL(g, CJ(acosh_derivative(S, X))))
UNARY(atanh, DIV(g, CJ(OP2(rsub, OP1(square, X), NUM(1.0)))))
UNARY(sigmoid, MUL(g, CJ(MUL(R, OP2(rsub, R, NUM(1.0))))))
UNARY(erf, MUL(g, MUL(OP1(exp, NEG(OP1(square, X))), NUM(M_2_SQRTPI))))
UNARY(erfc, MUL(g, MUL(OP1(exp, NEG(OP1(square, X))), NUM(-M_2_SQRTPI))))
UNARY(erfinv, MUL(g, MUL(OP1(exp, OP1(square, R)), NUM(0.88622692545275801365))))
UNARY(reciprocal, MUL(g, CJ(NEG(OP1(square, R)))))
UNARY(nan_to_num, MUL(g, OP1(isfinite, X)))
#undef X
#undef R

/* copy_(self, src) / fill_(self, value): self's old value is overwritten */
int bw_copy_(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, ZEROS(0));
    if (need(n, 1)) SET(1, G(0));
    END;
}

/* ---------------------------------------------------- views, shapes */

/* the gradient reshaped to input 0's shape (view, reshape, squeeze, ...) */
int bw_reshape_back(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP2(reshape, G(0), IN_SIZE(0)));
    END;
}

int bw_view(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (Py_TYPE(ARG(1)) == &EmDTypeType || ARG(2) != Py_None) /* view(dtype): back to the input's dtype */
        SET(0, OP2(view, G(0), em_dtype_object((EmDType)n->in_meta[0].dtype)));
    else
        SET(0, OP2(reshape, G(0), IN_SIZE(0)));
    END;
}

int bw_transpose(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP3(transpose, G(0), ARG(1), ARG(2)));
    END;
}

int bw_t(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP1(t, G(0)));
    END;
}

int bw_permute(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int nd, w;
    int64_t dims[EM_MAX_DIMS];
    PyObject *inv = NULL;
    if (em_parse_intlist(ARG(1), "permute", &nd, dims) == 0) {
        inv = keep(S, PyTuple_New(nd));
        for (int i = 0; inv && i < nd; i++) {
            if (em_wrap_dim(dims[i], nd, &w) < 0) {
                sc.failed = true;
                break;
            }
            PyTuple_SET_ITEM(inv, w, PyLong_FromLong(i));
        }
    } else {
        sc.failed = true;
    }
    if (!sc.failed) SET(0, OP2(permute, G(0), inv));
    END;
}

/* expand: the engine sums the gradient back to the input's shape */
int bw_expand(EmNode *n, EmTensor **go, EmTensor **gi) { return bw_identity(n, go, gi); }

int bw_sum_to_size(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP2(expand, G(0), IN_SIZE(0)));
    END;
}

/* views of part of the input: scatter the gradient into zeros through the
 * same view (a copy_ into a view of a fresh tensor, see Note [in-place on views]) */
static PyObject *scatter_through(Scratch *s, EmNode *n, PyObject *view_of_zeros, PyObject *zeros, PyObject *g) {
    if (!view_of_zeros) return NULL;
    PyObject *r = call(s, EM_OP_copy_, 2, view_of_zeros, g, NULL, NULL);
    return r ? zeros : NULL;
}

int bw_narrow(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = ZEROS(0);
    SET(0, scatter_through(S, n, OP4(narrow, z, ARG(1), ARG(2), ARG(3)), z, G(0)));
    END;
}

int bw_select(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = ZEROS(0);
    SET(0, scatter_through(S, n, OP3(select, z, ARG(1), ARG(2)), z, G(0)));
    END;
}

int bw_diagonal(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = ZEROS(0);
    SET(0, scatter_through(S, n, OP4(diagonal, z, ARG(1), ARG(2), ARG(3)), z, G(0)));
    END;
}

/* Note [gradient pieces in place]: when the gradients of split's pieces
 * already lie side by side in one storage, as slices of the whole
 * (attention's backward writes q, k and v's gradients that way when they are
 * pieces of one projection: Note [attention gradients share a storage]),
 * the input's gradient is the view over them: no buffer, no copies. Only
 * for inputs that are not leaves (a leaf's .grad is the user's to keep,
 * and should own its storage). NULL (no error) when the pieces do not. */
static PyObject *pieces_in_place(Scratch *s, EmNode *n, EmTensor **go, int dim) {
    const EmMeta *m = &n->in_meta[0];
    const EmNode *to = n->next[0].fn;
    if (n->op == EM_OP_unbind || !to || to->kind == EM_NODE_ACCUMULATE || !go[0]) return NULL;
    const EmTensor *g0 = go[0];
    if (!m->defined || g0->ndim != m->ndim || g0->dtype != m->dtype || !em_device_eq(em_device(g0), m->device))
        return NULL;
    int64_t start = 0;
    for (int j = 0; j < n->num_outputs; j++) {
        const EmTensor *g = go[j];
        if (g->storage != g0->storage || g->ndim != g0->ndim || g->dtype != g0->dtype ||
            memcmp(g->strides, g0->strides, sizeof(int64_t) * g->ndim) != 0 ||
            memcmp(g->sizes, em_meta_sizes(&n->out_meta[j]), sizeof(int64_t) * g->ndim) != 0 ||
            g->offset != g0->offset + start * g0->strides[dim])
            return NULL;
        start += g->sizes[dim];
    }
    if (!em_layout_non_overlapping(m->ndim, em_meta_sizes(m), g0->strides)) return NULL;
    return keep(s, (PyObject *)em_view_of((EmTensor *)g0, m->ndim, em_meta_sizes(m), g0->strides, g0->offset));
}

/* unbind / split / chunk: each output's gradient into its slice of zeros */
static int bw_pieces(EmNode *n, EmTensor **go, EmTensor **gi, int dim_param) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    int64_t d64 = 0;
    int dim;
    PyObject *da = ARG(dim_param);
    if (da != Py_None) d64 = PyLong_AsLongLong(da);
    if (PyErr_Occurred() || em_wrap_dim(d64, m->ndim, &dim) < 0) {
        sc.failed = true;
        END;
    }
    PyObject *any = NULL;
    bool every = true; /* the pieces tile the input: with all their gradients nothing stays zero */
    for (int j = 0; j < n->num_outputs; j++) {
        if (!any) any = G(j);
        every = every && go[j];
    }
    if (every) {
        PyObject *whole = pieces_in_place(S, n, go, dim);
        if (whole || PyErr_Occurred()) {
            sc.failed = !whole;
            SET(0, whole);
            END;
        }
    }
    PyObject *z = every ? empty_for(S, n, 0, any) : zeros_for(S, n, 0, any);
    int64_t start = 0;
    const int mark = sc.n; /* z and what came before: kept; each piece's temporaries: dropped */
    for (int j = 0; j < n->num_outputs && !sc.failed; j++) {
        int64_t len = n->op == EM_OP_unbind ? 1 : em_meta_sizes(&n->out_meta[j])[dim];
        if (go[j]) {
            PyObject *view = n->op == EM_OP_unbind ? OP3(select, z, INT(dim), INT(start))
                                                   : OP4(narrow, z, INT(dim), INT(start), INT(len));
            scatter_through(S, n, view, z, G(j));
            drop_to(S, mark);
        }
        start += len;
    }
    SET(0, z);
    END;
}
int bw_unbind(EmNode *n, EmTensor **go, EmTensor **gi) { return bw_pieces(n, go, gi, 1); }
int bw_split(EmNode *n, EmTensor **go, EmTensor **gi) { return bw_pieces(n, go, gi, 2); }
int bw_chunk(EmNode *n, EmTensor **go, EmTensor **gi) { return bw_split(n, go, gi); }

/* as_strided: replay the same strides on a zero buffer laid out like the input */
int bw_as_strided(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    EmTensor *x = (EmTensor *)IN(0);
    EmTensor *buf = NULL, *zin = NULL;
    if (x) {
        int64_t count = x->storage->nbytes / em_itemsize(x->dtype);
        buf = em_zeros(1, &count, (EmDType)go[0]->dtype, em_device(go[0]));
        zin = buf ? em_view_of(buf, x->ndim, x->sizes, x->strides, x->offset) : NULL;
        keep(S, (PyObject *)buf);
        keep(S, (PyObject *)zin);
    }
    if (zin) {
        PyObject *off = ARG(3) == Py_None ? INT(x->offset) : ARG(3);
        PyObject *v = OP4(as_strided, (PyObject *)buf, ARG(1), ARG(2), off);
        if (v) { /* add: overlapping windows each contribute their gradient */
            PyObject *r = keep(S, em_binary_op(EM_OP_add, v, G(0), (EmTensor *)v));
            if (r) SET(0, (PyObject *)zin);
        }
    }
    END;
}

int bw_tril(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP2(tril, G(0), ARG(1)));
    END;
}

int bw_triu(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP2(triu, G(0), ARG(1)));
    END;
}

/* ------------------------------------------ complex numbers (ops/complex.c) */

/* zeros of g's shape and dtype */
static PyObject *zeros_as(Scratch *s, PyObject *g) {
    if (!g) return NULL;
    EmTensor *t = (EmTensor *)g;
    PyObject *size = keep(s, em_size_new(t->ndim, t->sizes));
    return call(s, EM_OP_new_zeros, 2, g, size, NULL, NULL);
}

/* a complex gradient from its real and imaginary parts (NULL: zeros) */
static PyObject *as_complex(Scratch *s, PyObject *re, PyObject *im) {
    if (!re && !im) return NULL;
    if (!re) re = zeros_as(s, im);
    if (!im) im = zeros_as(s, re);
    return call(s, EM_OP_complex, 2, re, im, NULL, NULL);
}

int bw_view_as_real(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP1(view_as_complex, OP1(contiguous, G(0))));
    END;
}

int bw_view_as_complex(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP1(view_as_real, G(0)));
    END;
}

/* real(z) = x: the gradient g + 0j; imag(z) = y: 0 + gj (Note [complex gradients]) */
int bw_real(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (em_is_complex((EmDType)n->in_meta[0].dtype)) SET(0, as_complex(S, G(0), NULL));
    else SET(0, G(0));
    END;
}

int bw_imag(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, as_complex(S, NULL, G(0)));
    END;
}

int bw_conj(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, CJ(G(0)));
    END;
}

/* angle(z) = atan2(y, x): g * i z / |z|^2 (0 at 0); real inputs: 0 */
int bw_angle(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = IN(0);
    if (z && !em_is_complex(((EmTensor *)z)->dtype)) {
        SET(0, ZEROS(0));
        END;
    }
    PyObject *r2 = OP1(square, OP1(abs, z));
    PyObject *at0 = OP2(eq, r2, NUM(0.0));
    PyObject *iz = MUL(z, keep(S, PyComplex_FromDoubles(0.0, 1.0)));
    SET(0, OP3(where, at0, NUM(0.0), DIV(MUL(G(0), iz), r2)));
    END;
}

/* complex(re, im): the real and imaginary parts of the gradient */
int bw_complex(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP1(real, G(0)));
    if (need(n, 1)) SET(1, OP1(imag, G(0)));
    END;
}

/* polar(r, t) = r e^{it}: dL/dr = Re(conj(g) e^{it}), dL/dt = Re(conj(g) i z) */
int bw_polar(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *z = OUT(0), *cg = CJ(G(0));
    if (need(n, 0)) {
        PyObject *unit = OP1(exp, MUL(keep(S, PyComplex_FromDoubles(0.0, 1.0)), IN(1)));
        SET(0, OP1(real, MUL(cg, unit)));
    }
    if (need(n, 1)) SET(1, OP1(real, MUL(cg, MUL(z, keep(S, PyComplex_FromDoubles(0.0, 1.0))))));
    END;
}

/* ------------------------------------------------ special functions */

int bw_lgamma(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), OP1(digamma, IN(0))));
    END;
}

int bw_digamma(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), OP2(polygamma, INT(1), IN(0))));
    END;
}

/* polygamma(n, x)' = polygamma(n + 1, x); ARG(0) is n */
int bw_polygamma(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), OP2(polygamma, INT(PyLong_AsLongLong(ARG(0)) + 1), IN(0))));
    END;
}

/* mvlgamma(x, p)' = sum_j<p digamma(x - j / 2) */
int bw_mvlgamma(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = IN(0), *sum = OP1(digamma, x);
    long long p = PyLong_AsLongLong(ARG(1));
    const int mark = sc.n; /* the running sum sits at mark - 1; each turn's temporaries are dropped */
    for (long long j = 1; j < p && sum; j++) {
        PyObject *term = OP1(digamma, SUB(x, NUM(j / 2.0)));
        PyObject *next = term ? em_op(EM_OP_add, 2, (PyObject *[]){sum, term}) : NULL;
        drop_to(S, mark);
        if (!next) {
            sc.failed = true;
            sum = NULL;
            break;
        }
        Py_SETREF(sc.o[mark - 1], next);
        sum = next;
    }
    SET(0, MUL(G(0), sum));
    END;
}

int bw_i0(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), OP1(_special_i1, IN(0))));
    END;
}

/* I1'(x) = I0(x) - I1(x) / x, 1/2 at 0 (its limit) */
int bw_special_i1(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = IN(0);
    PyObject *d = SUB(OP1(i0, x), DIV(OUT(0), x));
    SET(0, MUL(G(0), OP3(where, OP2(eq, x, NUM(0.0)), NUM(0.5), d)));
    END;
}

int bw_rad2deg(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), NUM(180.0 / M_PI)));
    END;
}

int bw_deg2rad(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, MUL(G(0), NUM(M_PI / 180.0)));
    END;
}

/* frexp: mantissa = x / 2^exponent, the exponent piecewise constant */
int bw_frexp(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, DIV(G(0), OP1(exp2, OUT(1))));
    END;
}

/* ldexp(a, b) = a 2^b */
int bw_ldexp(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1), *scale = OP1(exp2, b);
    if (need(n, 0)) SET(0, MUL(G(0), scale));
    if (need(n, 1)) SET(1, MUL(MUL(G(0), MUL(a, scale)), NUM(M_LN2)));
    END;
}

int bw_logaddexp2(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *a = IN(0), *b = IN(1);
    if (need(n, 0)) SET(0, DIV(G(0), ADD(OP1(exp2, SUB(b, a)), NUM(1.0))));
    if (need(n, 1)) SET(1, DIV(G(0), ADD(OP1(exp2, SUB(a, b)), NUM(1.0))));
    END;
}

/* xlogy(x, y): d/dx = log y (0 where x == 0 and y <= 0, as torch), d/dy = x / y */
int bw_xlogy(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *x = IN(0), *y = IN(1);
    if (need(n, 0)) {
        PyObject *gx = OP2(xlogy, G(0), y), *mask;
        if (em_is_tensor(y)) {
            mask = OP2(logical_and, OP2(eq, x, NUM(0.0)), OP2(le, y, NUM(0.0)));
        } else {
            double yv = y ? PyFloat_AsDouble(y) : 1.0;
            mask = yv <= 0 ? OP2(eq, x, NUM(0.0)) : NULL;
        }
        SET(0, mask ? OP3(where, mask, NUM(0.0), gx) : gx);
    }
    if (need(n, 1)) SET(1, DIV(MUL(G(0), x), y));
    END;
}

const char *name_xlogy(EmCall *c, PyObject *result) {
    (void)result;
    return !em_is_tensor(c->args[0]) ? "XlogyBackward1" : !em_is_tensor(c->args[1]) ? "XlogyBackward2"
                                                                                 : "XlogyBackward0";
}

/* torch names a node after the overload that ran: pow(Tensor, Number) is
 * PowBackward0, pow(Tensor, Tensor) PowBackward1, ... */
static bool is_t(PyObject *o) { return o && em_is_tensor(o); }
static bool inplace_call(EmCall *c) { return c->inplace || c->def->writes_self; }
#define NAMER(op) const char *name_##op(EmCall *c, PyObject *result)
#define A (c->args)

/* the comparisons' in-place forms (NOGRAD_IN_PLACE): Backward0 for a number, 1 for a tensor */
NAMER(compare_in_place) {
    static const char *const names[][2] = {{"EqBackward0", "EqBackward1"}, {"NeBackward0", "NeBackward1"},
                                           {"LtBackward0", "LtBackward1"}, {"LeBackward0", "LeBackward1"},
                                           {"GtBackward0", "GtBackward1"}, {"GeBackward0", "GeBackward1"}};
    const EmOpId ops[] = {EM_OP_eq, EM_OP_ne, EM_OP_lt, EM_OP_le, EM_OP_gt, EM_OP_ge};
    for (int i = 0; i < 6; i++)
        if (c->def == &em_op_defs[ops[i]]) return names[i][is_t(A[1])];
    return "NotImplemented";
}
NAMER(pow) { return !is_t(A[0]) ? "PowBackward2" : is_t(A[1]) ? "PowBackward1" : "PowBackward0"; }
NAMER(clamp) { return is_t(A[1]) || is_t(A[2]) ? "ClampBackward0" : "ClampBackward1"; }
NAMER(clamp_min) { return is_t(A[1]) ? "ClampMinBackward1" : "ClampMinBackward0"; }
NAMER(clamp_max) { return is_t(A[1]) ? "ClampMaxBackward1" : "ClampMaxBackward0"; }
NAMER(div) {
    if (c->reflected) return "MulBackward0"; /* 2 / t is 2 * t.reciprocal() in torch */
    if (A[2] != Py_None) return is_t(A[1]) ? "DivBackward2" : "DivBackward3";
    return "DivBackward0";
}
NAMER(sub) { return c->reflected ? "RsubBackward1" : "SubBackward0"; }
NAMER(rsub) { return is_t(A[1]) ? "RsubBackward0" : "RsubBackward1"; }
NAMER(remainder) { return is_t(A[0]) && is_t(A[1]) ? "RemainderBackward1" : "RemainderBackward0"; }
NAMER(fmod) { return is_t(A[1]) ? "FmodBackward1" : "FmodBackward0"; }
NAMER(copysign) { return is_t(A[1]) ? "CopysignBackward0" : "CopysignBackward1"; }
NAMER(lerp) { return is_t(A[2]) ? "LerpBackward1" : "LerpBackward0"; }
NAMER(round) { return PyLong_Check(A[1]) && PyLong_AsLong(A[1]) != 0 ? "RoundBackward1" : "RoundBackward0"; }
NAMER(squeeze) {
    if (inplace_call(c)) return A[1] == Py_None ? "SqueezeBackward3" : PyLong_Check(A[1]) ? "SqueezeBackward4" : "SqueezeBackward5";
    return A[1] == Py_None ? "SqueezeBackward0" : PyLong_Check(A[1]) ? "SqueezeBackward1" : "SqueezeBackward2";
}
NAMER(fill_) { return is_t(A[1]) ? "FillBackward3" : "FillBackward2"; }
NAMER(bernoulli_) { return is_t(A[1]) ? "BernoulliBackward1" : "BernoulliBackward2"; }
NAMER(split) { return PyLong_Check(A[1]) ? "SplitBackward0" : "SplitWithSizesBackward0"; }
NAMER(t) { return inplace_call(c) ? "TBackward1" : "TBackward0"; }
NAMER(transpose) { return inplace_call(c) ? "TransposeBackward1" : "TransposeBackward0"; }
NAMER(unsqueeze) { return inplace_call(c) ? "UnsqueezeBackward1" : "UnsqueezeBackward0"; }
NAMER(as_strided) { return inplace_call(c) ? "AsStridedBackward1" : "AsStridedBackward0"; }
NAMER(acosh) { return inplace_call(c) ? "AcoshBackward1" : "AcoshBackward0"; }
NAMER(asinh) { return inplace_call(c) ? "AsinhBackward1" : "AsinhBackward0"; }
NAMER(atanh) { return inplace_call(c) ? "AtanhBackward1" : "AtanhBackward0"; }
/* reshape, reshape_as, flatten: a view, or a reshape that had to copy */
static const char *reshape_name(EmCall *c, PyObject *result, bool always_view) {
    if (!is_t(result) || !is_t(A[0])) return "ViewBackward0";
    if (((EmTensor *)result)->storage != ((EmTensor *)A[0])->storage) return "UnsafeViewBackward0";
    return always_view || em_is_contiguous((EmTensor *)A[0]) ? "ViewBackward0" : "ReshapeAliasBackward0";
}
NAMER(reshape) { return reshape_name(c, result, false); }
NAMER(unflatten) { return reshape_name(c, result, true); }
NAMER(sum_to_size) { /* torch sums (keepdim), then views away the leading dims */
    EmTensor *in = (EmTensor *)A[0], *r = (EmTensor *)result;
    return r->ndim == 0 ? "SumBackward0" : r->ndim < in->ndim ? "ViewBackward0" : "SumBackward1";
}
NAMER(matmul) { /* torch runs matmul as dot / mv / mm / bmm and views */
    int na = ((EmTensor *)A[0])->ndim, nb = ((EmTensor *)A[1])->ndim;
    if (na == 1 && nb == 1) return "DotBackward0";
    if (na == 2 && nb == 2) return "MmBackward0";
    if (na == 2 && nb == 1) return "MvBackward0";
    if (na == 1 && nb == 2) return "SqueezeBackward4";
    if (na == 2) return "CloneBackward0";
    return "UnsafeViewBackward0";
}
NAMER(outer) { return "MulBackward0"; }
NAMER(inner) { /* inner with a 0-d operand is a product */
    return ((EmTensor *)A[0])->ndim == 0 || ((EmTensor *)A[1])->ndim == 0 ? "MulBackward0" : "ViewBackward0";
}
NAMER(kron) { return "UnsafeViewBackward0"; }
NAMER(einsum) { /* torch's name comes from the last step of its decomposition */
    const char *eq = PyUnicode_AsUTF8(A[0]), *arrow = eq ? strstr(eq, "->") : NULL;
    PyErr_Clear();
    Py_ssize_t nops = PySequence_Fast_GET_SIZE(A[1]);
    if (nops == 1) { /* a reduction if fewer distinct letters come out than go in */
        const char *end = arrow ? arrow : eq + strlen(eq);
        int count[128] = {0}, nin = 0, nout = 0;
        for (const char *p = eq; p < end; p++)
            if (*p > 0 && (unsigned char)*p < 128 && isalpha((unsigned char)*p) && count[(int)*p]++ == 0) nin++;
        if (arrow) {
            for (const char *p = arrow + 2; *p; p++) nout += isalpha((unsigned char)*p) != 0;
        } else {
            for (int ch = 0; ch < 128; ch++) nout += count[ch] == 1;
        }
        return nout < nin ? "SumBackward1" : "PermuteBackward0";
    }
    bool contracts = false; /* a letter of the inputs missing from the output is summed */
    if (arrow)
        for (const char *p = eq; p < arrow && !contracts; p++)
            contracts = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) && !strchr(arrow + 2, *p);
    return arrow && !contracts ? "MulBackward0" : "ViewBackward0";
}
#undef A
#undef NAMER

/* RAISES rows: torch records a node, so that the history of a tensor
 * written in place does not pass gradient through the write, and reaching it
 * in backward raises torch's error (instead of finding no path). */
int bw_derivative_not_implemented(EmNode *n, EmTensor **go, EmTensor **gi) {
    (void)go, (void)gi;
    PyErr_Format(PyExc_RuntimeError, "derivative for aten::%s is not implemented", em_op_defs[n->op].name);
    return -1;
}

int bw_unique_not_implemented(EmNode *n, EmTensor **go, EmTensor **gi) {
    (void)go, (void)gi;
    PyErr_Format(PyExc_NotImplementedError, "the derivative for '%s' is not implemented.",
                 n->op == EM_OP_unique ? "_unique2" : "unique_consecutive");
    return -1;
}

/* _C._differentiable_ops(): {op name: node name} for every op with a formula */
PyObject *em_differentiable_ops(PyObject *m, PyObject *u) {
    PyObject *d = PyDict_New();
    for (int op = 0; d && op < EM_NUM_OPS; op++) {
        if (!em_derivatives[op].fn || em_derivatives[op].raises) continue;
        const char *node = em_derivatives[op].name ? em_derivatives[op].name : "(depends on the call)";
        PyObject *name = PyUnicode_FromString(node);
        if (!name || PyDict_SetItemString(d, em_op_defs[op].name, name) < 0) Py_CLEAR(d);
        Py_XDECREF(name);
    }
    return d;
}

