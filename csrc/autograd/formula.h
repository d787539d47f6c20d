/* formula.h — the small expression kit backward formulas are written in
 * (see derivatives.c): a scratch list owning temporaries, ember ops called
 * through em_op (recorded under create_graph), access to saved inputs and
 * outputs, and the prototypes of the formulas the op table's rows name.
 * Included only by the csrc/autograd/derivatives*.c files and
 * derivative_table.c. */
#ifndef EMBER_AUTOGRAD_FORMULA_H
#define EMBER_AUTOGRAD_FORMULA_H

#include "../ember.h"
#include <math.h>

#define SCRATCH_MAX 48
typedef struct {
    PyObject *o[SCRATCH_MAX];
    int n;
    bool failed;
} Scratch;

static inline PyObject *keep(Scratch *s, PyObject *o) {
    if (!o) {
        s->failed = true;
        return NULL;
    }
    if (s->n == SCRATCH_MAX) {
        Py_DECREF(o);
        PyErr_SetString(PyExc_SystemError, "ember: backward formula scratch overflow");
        s->failed = true;
        return NULL;
    }
    return s->o[s->n++] = o;
}

static inline void drop(Scratch *s) {
    for (int i = 0; i < s->n; i++) Py_DECREF(s->o[i]);
    s->n = 0;
}

/* drop what was kept after entry `mark` (the temporaries of one loop turn), so a
 * formula that loops over many pieces stays within SCRATCH_MAX */
static inline void drop_to(Scratch *s, int mark) {
    while (s->n > mark) Py_DECREF(s->o[--s->n]);
}

/* op `id` on nargs arguments (a failed argument fails the call), kept by the scratch */
static inline PyObject *call_n(Scratch *s, EmOpId id, int nargs, PyObject **args) {
    for (int i = 0; i < nargs; i++)
        if (!args[i]) {
            s->failed = true;
            return NULL;
        }
    return keep(s, em_op(id, nargs, args));
}

static inline PyObject *call(Scratch *s, EmOpId id, int n, PyObject *a, PyObject *b, PyObject *c, PyObject *d) {
    PyObject *args[4] = {a, b, c, d};
    return call_n(s, id, n, args);
}

#define S (&sc)
#define OP1(id, a) call(S, EM_OP_##id, 1, (a), NULL, NULL, NULL)
#define OP2(id, a, b) call(S, EM_OP_##id, 2, (a), (b), NULL, NULL)
#define OP3(id, a, b, c) call(S, EM_OP_##id, 3, (a), (b), (c), NULL)
#define OP4(id, a, b, c, d) call(S, EM_OP_##id, 4, (a), (b), (c), (d))
#define ADD(a, b) OP2(add, a, b)
#define SUB(a, b) OP2(sub, a, b)
#define MUL(a, b) OP2(mul, a, b)
#define DIV(a, b) OP2(div, a, b)
#define NEG(a) OP1(neg, a)
#define NUM(v) keep(S, PyFloat_FromDouble(v))
#define INT(v) keep(S, PyLong_FromLongLong(v))

/* The gradient for input k: a new reference, or NULL (error set when failed). */
#define SET(k, expr)                                                           \
    do {                                                                       \
        PyObject *_v = (expr);                                                 \
        if (_v) gi[k] = (EmTensor *)Py_NewRef(_v);                             \
    } while (0)
#define BEGIN Scratch sc = {{0}, 0, false}
#define END                                                                    \
    do {                                                                       \
        drop(S);                                                               \
        return sc.failed ? -1 : 0;                                             \
    } while (0)

static inline bool need(EmNode *n, int k) { return k < n->num_next && n->next[k].fn != NULL; }

/* Parameter index of the k-th tensor parameter of the node's op. */
static inline int param_of(EmNode *n, int k) {
    const EmSignature *sig = &em_op_defs[n->op].sig;
    for (int i = 0; i < sig->nparams; i++) {
        EmArgType ty = sig->params[i].type;
        if (i == sig->out_index || (ty != EM_ARG_TENSOR && ty != EM_ARG_TENSOR_OR_NUMBER)) continue;
        if (k-- == 0) return i;
    }
    return -1;
}

/* A forward argument (borrowed): tensors appear as None. */
static inline PyObject *arg(EmNode *n, int i) { return PyTuple_GET_ITEM(n->args, i); }

/* Saved input k (new reference kept by the scratch) or, when the forward
 * got a number there, that number. */
static inline PyObject *input(Scratch *s, EmNode *n, int k) {
    PyObject *a = arg(n, param_of(n, k));
    /* a released node raises torch's "backward through the graph a second time";
     * a number argument was never saved and outlives the release */
    if (em_saved_holds(&n->saved[k]) || (n->released && a == Py_None))
        return keep(s, (PyObject *)em_saved_get(n, &n->saved[k]));
    if (a == Py_None) {
        PyErr_SetString(PyExc_SystemError, "ember: backward formula needs an input that was not saved");
        s->failed = true;
        return NULL;
    }
    return a;
}
#define IN(k) input(S, n, (k))
/* An optional saved input: Py_None when the forward got None. */
static inline PyObject *optional_in(Scratch *s, EmNode *n, int k) {
    return em_saved_holds(&n->saved[k]) || n->released ? input(s, n, k) : Py_None;
}
/* Saved output j (new reference kept by the scratch); a formula whose row does
 * not save outputs gets SystemError, never another slot. */
static inline PyObject *output(Scratch *s, EmNode *n, int j) {
    /* a released node's slots are empty too: em_saved_get raises torch's
     * "backward through the graph a second time" for them */
    if (!n->saved_out || (!n->released && !em_saved_holds(&n->saved_out[j]))) {
        PyErr_SetString(PyExc_SystemError, "ember: backward formula read an output it did not save");
        s->failed = true;
        return NULL;
    }
    return keep(s, (PyObject *)em_saved_get(n, &n->saved_out[j]));
}
#define OUT(j) output(S, n, (j))
#define ARG(i) arg(n, (i))
#define G(j) ((PyObject *)go[j])

/* zeros with the shape and dtype of input k (as the gradient of an op whose
 * derivative is zero: floor, sign, the overwritten self of copy_) */
static inline PyObject *zeros_for(Scratch *s, EmNode *n, int k, PyObject *like) {
    const EmMeta *m = &n->in_meta[k];
    PyObject *size = keep(s, em_size_new(m->ndim, em_meta_sizes(m)));
    if (!size || !like) return NULL;
    return call(s, EM_OP_new_zeros, 2, like, size, NULL, NULL);
}
/* the same, uninitialised: for a gradient its pieces will cover whole */
static inline PyObject *empty_for(Scratch *s, EmNode *n, int k, PyObject *like) {
    const EmMeta *m = &n->in_meta[k];
    PyObject *size = keep(s, em_size_new(m->ndim, em_meta_sizes(m)));
    if (!size || !like) return NULL;
    return call(s, EM_OP_new_empty, 2, like, size, NULL, NULL);
}
#define ZEROS(k) zeros_for(S, n, (k), G(0))

/* Note [complex gradients]: ember follows torch's convention, the gradient
 * of a real loss L with respect to z = x + iy is dL/dx + i dL/dy (the
 * conjugate Wirtinger derivative, times 2). For a holomorphic f the input's
 * gradient is then g * conj(f'(z)), so formulas conjugate the derivative
 * factors they multiply by; on real values CJ is the value itself (no op
 * runs). The engine casts a complex gradient of a real input to the input's
 * dtype, which keeps the real part, as torch does. */
static inline PyObject *conj_if_complex(Scratch *s, PyObject *x) {
    if (!x) return NULL;
    if (em_is_tensor(x)) {
        if (!em_is_complex(((EmTensor *)x)->dtype)) return x;
        return call(s, EM_OP_conj, 1, x, NULL, NULL, NULL);
    }
    if (PyComplex_Check(x))
        return keep(s, PyComplex_FromDoubles(PyComplex_RealAsDouble(x), -PyComplex_ImagAsDouble(x)));
    return x;
}
#define CJ(x) conj_if_complex(S, (x))
#define IN_SIZE(k) keep(S, em_size_new(n->in_meta[k].ndim, em_meta_sizes(&n->in_meta[k])))


/* The formulas and node namers ops.def's rows name in their backward column
 * (BW(fn, saves, "Node"), BW_NAMED(fn, saves, namer)): declared here from the
 * rows themselves, so a definition that disagrees fails to compile and a row
 * naming a formula nobody wrote fails to link: declared hidden, an undefined
 * one is a link error (a shared object otherwise leaves it to load time). */
#define EM_HIDDEN __attribute__((visibility("hidden")))
#define EM_BW_FN(fn) EM_HIDDEN int fn(EmNode *n, EmTensor **go, EmTensor **gi);
#define BW(fn, saves, name) EM_BW_FN(fn)
#define BW_NAMED(fn, saves, namer) EM_BW_FN(fn) EM_HIDDEN const char *namer(EmCall *c, PyObject *result);
#define RAISES(fn, name) EM_BW_FN(fn)
#define NOGRAD
#define NOGRAD_IN_PLACE(namer) EM_HIDDEN const char *namer(EmCall *c, PyObject *result);
#define NO_FORMULA
#define OP(name, sig, impl, kernels, variants, devices, tags, autocast, backward) backward
#include "../ops/ops.def"
#undef OP
#undef BW
#undef BW_NAMED
#undef RAISES
#undef NOGRAD
#undef NOGRAD_IN_PLACE
#undef NO_FORMULA
#undef EM_BW_FN
#undef EM_HIDDEN

#endif
