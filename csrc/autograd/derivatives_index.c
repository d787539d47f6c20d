/* derivatives_index.c — backward formulas of the index ops and advanced
 * indexing (ops/index*.c, ops/scatter_gather.c): gather/scatter and their
 * reductions, index_* / masked_* / take, x[key] (_index) and x[key] = v
 * (_index_put_). Formulas follow torch's derivatives.yaml: the gradient of
 * a read is a scatter-add of the incoming gradient (duplicates accumulate),
 * the gradient of a write gathers it back; everything is written with ember
 * ops so create_graph works. Tensor inputs are numbered in signature order:
 * gather(input, dim, index) has input 0 and index 1.
 */
#include "formula.h"

/* an op called with keyword arguments (kw-only ones such as include_self) */
static PyObject *call_kw(Scratch *s, EmOpId id, PyObject *const *args, int npos, PyObject *kwnames) {
    int nkw = kwnames ? (int)PyTuple_GET_SIZE(kwnames) : 0;
    for (int i = 0; i < npos + nkw; i++)
        if (!args[i]) {
            s->failed = true;
            return NULL;
        }
    EmCall c;
    c.def = &em_op_defs[id];
    if (em_bind_args(&c.def->sig, NULL, args, npos, kwnames, &c) < 0) {
        s->failed = true;
        return NULL;
    }
    c.inplace = false;
    c.reflected = false;
    c.out = NULL;
    PyObject *r = em_call_run(&c);
    Py_XDECREF(c.owned);
    Py_XDECREF(c.owned_tensor);
    return keep(s, r);
}

static bool is_t(PyObject *o) { return o && em_is_tensor(o); }

static int64_t numel_of(const EmMeta *m) {
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++) n *= em_meta_sizes(m)[d];
    return n;
}

static PyObject *size_of(Scratch *s, const EmMeta *m) { return keep(s, em_size_new(m->ndim, em_meta_sizes(m))); }

/* a 0-d zero like g: the values index_put writes where a write overwrote self */
static PyObject *zero0(Scratch *s, PyObject *g) {
    return call(s, EM_OP_new_zeros, 2, g, keep(s, PyTuple_New(0)), NULL, NULL);
}

/* t's shape as a Size */
static PyObject *tsize(Scratch *s, PyObject *t) {
    return t ? keep(s, em_size_new(((EmTensor *)t)->ndim, ((EmTensor *)t)->sizes)) : NULL;
}
/* ones / zeros of t's shape with like's dtype */
static PyObject *ones_of(Scratch *s, PyObject *like, PyObject *t) {
    return call(s, EM_OP_new_ones, 2, like, tsize(s, t), NULL, NULL);
}
static PyObject *zeros_of(Scratch *s, PyObject *like, PyObject *t) {
    return call(s, EM_OP_new_zeros, 2, like, tsize(s, t), NULL, NULL);
}
/* a mask as 0 / 1 in like's dtype */
static PyObject *as_num(Scratch *s, PyObject *mask, PyObject *like) {
    return call(s, EM_OP_where, 3, mask, keep(s, PyFloat_FromDouble(1.0)), zeros_of(s, like, mask), NULL);
}

static PyObject *flat(Scratch *s, PyObject *t) {
    return call(s, EM_OP_reshape, 2, t, keep(s, Py_BuildValue("(i)", -1)), NULL, NULL);
}

/* dim argument i, wrapped against input k's rank (0 when failed, error set) */
static int dim_arg(EmNode *n, int i, int k, int *dim) {
    int64_t d = PyLong_AsLongLong(ARG(i));
    if (d == -1 && PyErr_Occurred()) return -1;
    return em_wrap_dim(d, n->in_meta[k].ndim, dim);
}

/* g (shaped like `index`) as the gradient of a src of shape in_meta[k]:
 * scatter's src may be larger than its index, the rest of it unread */
static PyObject *pad_to(Scratch *s, EmNode *n, int k, PyObject *g) {
    if (!g) return NULL;
    const EmMeta *m = &n->in_meta[k];
    EmTensor *gt = (EmTensor *)g;
    bool same = gt->ndim == m->ndim;
    for (int d = 0; same && d < m->ndim; d++) same = gt->sizes[d] == em_meta_sizes(m)[d];
    if (same || gt->ndim != m->ndim) return g; /* (a rank mismatch is fit_gradient's to report) */
    PyObject *z = zeros_for(s, n, k, g), *v = z;
    for (int d = 0; d < m->ndim; d++)
        v = call(s, EM_OP_narrow, 4, v, keep(s, PyLong_FromLong(d)), keep(s, PyLong_FromLong(0)),
                 keep(s, PyLong_FromLongLong(gt->sizes[d])));
    return call(s, EM_OP_copy_, 2, v, g, NULL, NULL) ? z : NULL;
}

/* src narrowed to index's shape: the part of it a scatter reads */
static PyObject *used_part(Scratch *s, PyObject *src, PyObject *index) {
    if (!src || !index) return NULL;
    EmTensor *st = (EmTensor *)src, *it = (EmTensor *)index;
    PyObject *v = src;
    if (st->ndim != it->ndim) return src;
    for (int d = 0; d < st->ndim; d++)
        if (st->sizes[d] != it->sizes[d])
            v = call(s, EM_OP_narrow, 4, v, keep(s, PyLong_FromLong(d)), keep(s, PyLong_FromLong(0)),
                     keep(s, PyLong_FromLongLong(it->sizes[d])));
    return v;
}

/* ------------------------------------------------ gather / index_select */

int bw_index_select(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP4(index_add, ZEROS(0), ARG(1), IN(1), G(0)));
    END;
}

int bw_gather(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP4(scatter_add, ZEROS(0), ARG(1), IN(1), G(0)));
    END;
}

/* take_along_dim: a gather of the inputs broadcast against each other
 * (negative indices wrap); dim None reads the flattened input */
int bw_take_along_dim(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!need(n, 0)) END;
    PyObject *g = G(0), *idx = IN(1);
    const EmMeta *m = &n->in_meta[0];
    if (ARG(2) == Py_None) {
        int64_t count = numel_of(m);
        PyObject *z = OP2(new_zeros, g, keep(S, Py_BuildValue("(L)", (long long)count)));
        if (count > 0) {
            PyObject *ix = OP2(remainder, flat(S, idx), INT(count));
            z = OP4(scatter_add, z, INT(0), ix, flat(S, g));
        }
        SET(0, OP2(reshape, z, IN_SIZE(0)));
        END;
    }
    int dim;
    if (dim_arg(n, 2, 0, &dim) < 0 || !g) {
        sc.failed = true;
        END;
    }
    EmTensor *gt = (EmTensor *)g;
    int64_t sizes[EM_MAX_DIMS];
    for (int d = 0; d < gt->ndim; d++) sizes[d] = gt->sizes[d];
    if (dim < gt->ndim && dim < m->ndim) sizes[dim] = em_meta_sizes(m)[dim];
    PyObject *z = OP2(new_zeros, g, keep(S, em_size_new(gt->ndim, sizes)));
    PyObject *ix = OP2(expand, idx, keep(S, em_size_new(gt->ndim, gt->sizes)));
    if (dim < m->ndim && em_meta_sizes(m)[dim] > 0) ix = OP2(remainder, ix, INT(em_meta_sizes(m)[dim]));
    SET(0, OP4(scatter_add, z, INT(dim), ix, g)); /* the engine sums the broadcast dims */
    END;
}

/* take: the flattened input read at (wrapped) positions */
int bw_take(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (!need(n, 0)) END;
    PyObject *g = G(0);
    int64_t count = numel_of(&n->in_meta[0]);
    PyObject *z = OP2(new_zeros, g, keep(S, Py_BuildValue("(L)", (long long)count)));
    if (count > 0) z = OP4(index_add, z, INT(0), OP2(remainder, flat(S, IN(1)), INT(count)), flat(S, g));
    SET(0, OP2(reshape, z, IN_SIZE(0)));
    END;
}

/* ------------------------------------------------------------ scatter */

int bw_scatter(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (ARG(5) != Py_None) { /* torch has no derivative for the reduce= forms */
        PyErr_SetString(PyExc_RuntimeError, "derivative for aten::scatter is not implemented");
        sc.failed = true;
        END;
    }
    PyObject *index = IN(1);
    if (need(n, 0)) SET(0, OP4(scatter, G(0), ARG(1), index, NUM(0.0)));
    if (need(n, 2)) SET(2, pad_to(S, n, 2, OP3(gather, G(0), ARG(1), index)));
    END;
}

const char *name_scatter(EmCall *c, PyObject *result) {
    (void)result;
    if (c->args[5] != Py_None) return "NotImplemented";
    return is_t(c->args[3]) ? "ScatterBackward0" : "ScatterBackward1";
}

int bw_scatter_add(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 2)) SET(2, pad_to(S, n, 2, OP3(gather, G(0), ARG(1), IN(1))));
    END;
}

/* scatter_reduce "prod": self's gradient (returned) is the product of
 * everything else, recomputed with self's zeros as 1; src's (*gsrc) is
 * result / src, or for a lone zero in its group the product of the others.
 * A scratch of its own: the expression is long. */
static PyObject *prod_grads(Scratch *outer, EmNode *n, PyObject *g, PyObject *self, PyObject *index,
                            PyObject *src, PyObject *result, int inc, PyObject **gsrc) {
    Scratch sc = {{0}, 0, false};
    PyObject *dim = ARG(1), *inc_o = inc ? Py_True : Py_False, *gs = NULL, *gr = NULL;
    PyObject *kw = keep(S, Py_BuildValue("(s)", "include_self"));
    PyObject *mself = OP3(masked_fill, self, OP2(eq, self, NUM(0.0)), NUM(1.0));
    PyObject *a1[6] = {mself, dim, index, src, ARG(4), inc_o};
    gs = DIV(MUL(g, call_kw(S, EM_OP_scatter_reduce, a1, 5, kw)), mself);
    PyObject *zero = OP2(eq, src, NUM(0.0));
    PyObject *nzero = OP3(gather, OP4(scatter_add, zeros_of(S, g, g), dim, index, as_num(S, zero, g)), dim, index);
    PyObject *lone = OP2(logical_and, zero, OP2(eq, nzero, NUM(1.0)));
    PyObject *a2[6] = {self, dim, index, OP3(masked_fill, src, lone, NUM(1.0)), ARG(4), inc_o};
    PyObject *excl = OP3(gather, MUL(g, call_kw(S, EM_OP_scatter_reduce, a2, 5, kw)), dim, index);
    PyObject *ratio = DIV(OP3(gather, MUL(g, result), dim, index), OP3(masked_fill, src, zero, NUM(1.0)));
    gr = OP3(where, lone, excl, ratio);
    *gsrc = gr && !sc.failed ? keep(outer, Py_NewRef(gr)) : NULL;
    gs = gs && !sc.failed ? keep(outer, Py_NewRef(gs)) : NULL;
    if (sc.failed) outer->failed = true;
    drop(S);
    return gs;
}

/* scatter_reduce (torch's scatter_reduce_backward): sum and mean spread the
 * gradient (mean divides by the count), amax/amin split it evenly among
 * every value equal to the result (self's included), prod divides the
 * result by each factor, with the exclusive product where a factor is 0. */
int bw_scatter_reduce(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *g = G(0), *dim = ARG(1), *self = IN(0), *index = IN(1);
    PyObject *src = used_part(S, IN(2), index), *result = OUT(0);
    const char *red = PyUnicode_AsUTF8(ARG(4));
    int inc = PyObject_IsTrue(ARG(5));
    if (!red || inc < 0) {
        sc.failed = true;
        END;
    }
    PyObject *gself = NULL, *gsrc = NULL;
    if (!strcmp(red, "sum")) {
        gself = g;
        gsrc = OP3(gather, g, dim, index);
    } else if (!strcmp(red, "mean")) {
        PyObject *cnt = inc ? ones_of(S, g, g) : zeros_of(S, g, g);
        cnt = OP4(scatter_add, cnt, dim, index, ones_of(S, g, src));
        cnt = OP3(masked_fill, cnt, OP2(eq, cnt, NUM(0.0)), NUM(1.0));
        gself = DIV(g, cnt);
        gsrc = DIV(OP3(gather, g, dim, index), OP3(gather, cnt, dim, index));
    } else if (!strcmp(red, "amax") || !strcmp(red, "amin")) {
        PyObject *value = OP3(gather, result, dim, index);
        PyObject *self_is = OP2(eq, self, result), *src_is = OP2(eq, src, value);
        PyObject *ties = OP4(scatter_add, as_num(S, self_is, g), dim, index, as_num(S, src_is, g));
        PyObject *share = DIV(g, ties);
        gself = OP3(where, self_is, share, NUM(0.0));
        gsrc = OP3(where, src_is, OP3(gather, share, dim, index), NUM(0.0));
    } else if (!strcmp(red, "prod")) {
        gself = prod_grads(S, n, g, self, index, src, result, inc, &gsrc);
    } else {
        PyErr_Format(PyExc_RuntimeError, "scatter_reduce: no derivative for reduce '%s'", red);
        sc.failed = true;
        END;
    }
    if (!inc) gself = OP4(scatter, gself, dim, index, NUM(0.0)); /* self's value was not used there */
    if (need(n, 0)) SET(0, gself);
    if (need(n, 2)) SET(2, pad_to(S, n, 2, gsrc));
    END;
}

/* -------------------------------------------------------- index_* ops */

int bw_index_add(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, G(0));
    if (need(n, 2)) {
        PyObject *gs = OP3(index_select, G(0), ARG(1), IN(1));
        EmScalar a;
        bool one = em_scalar_from_py(ARG(4), &a) == 0 && em_scalar_to_double(a) == 1.0;
        PyErr_Clear();
        SET(2, one ? gs : MUL(gs, ARG(4)));
    }
    END;
}

int bw_index_copy(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP4(index_fill, G(0), ARG(1), IN(1), NUM(0.0)));
    if (need(n, 2)) SET(2, OP3(index_select, G(0), ARG(1), IN(1)));
    END;
}

int bw_index_fill(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    if (need(n, 0)) SET(0, OP4(index_fill, G(0), ARG(1), IN(1), NUM(0.0)));
    /* the value lands once per filled place, however often the index names it */
    if (need(n, 2)) SET(2, OP1(sum, SUB(G(0), OP4(index_fill, G(0), ARG(1), IN(1), NUM(0.0)))));
    END;
}

const char *name_index_fill(EmCall *c, PyObject *result) {
    (void)result;
    return is_t(c->args[3]) ? "IndexFillBackward1" : "IndexFillBackward0";
}

/* index_put's indices list (None: the whole dim) as a key for x[key] */
static PyObject *indices_key(Scratch *s, PyObject *indices) {
    PyObject *seq = keep(s, PySequence_Tuple(indices));
    if (!seq) return NULL;
    PyObject *key = keep(s, PyTuple_New(PyTuple_GET_SIZE(seq)));
    for (Py_ssize_t i = 0; key && i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *it = PyTuple_GET_ITEM(seq, i);
        PyObject *v = it == Py_None ? PySlice_New(NULL, NULL, NULL) : Py_NewRef(it);
        if (!v) {
            s->failed = true;
            return NULL;
        }
        PyTuple_SET_ITEM(key, i, v);
    }
    return key;
}

/* t with zeros written at indices (t, or NULL when failed) */
static PyObject *clear_at(Scratch *s, PyObject *t, PyObject *indices) {
    PyObject *z = zero0(s, t);
    return call(s, EM_OP__index_put_, 4, t, indices, z, Py_False) ? t : NULL;
}

/* index_put / _index_put_ (x[key] = v): the overwritten places of self get
 * no gradient (unless accumulating), the values gather theirs back (the
 * engine sums them over broadcasting) */
int bw_index_put(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *g = G(0), *indices = ARG(1);
    int acc = PyObject_IsTrue(ARG(3));
    if (acc < 0) {
        sc.failed = true;
        END;
    }
    /* (_index_put_ into a copy: it takes None for a whole dim, as torch's index_put does) */
    if (need(n, 0)) SET(0, acc ? g : clear_at(S, OP1(clone, g), indices));
    if (need(n, 1)) SET(1, OP2(_index, g, indices_key(S, indices)));
    END;
}

/* ------------------------------------------------------ masked_* ops */

int bw_masked_fill(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *mask = IN(1);
    if (need(n, 0)) SET(0, OP3(masked_fill, G(0), mask, NUM(0.0)));
    if (need(n, 2)) SET(2, OP1(sum, OP3(where, mask, G(0), NUM(0.0))));
    END;
}

const char *name_masked_fill(EmCall *c, PyObject *result) {
    (void)result;
    return is_t(c->args[2]) ? "MaskedFillBackward1" : "MaskedFillBackward0";
}

int bw_masked_select(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *mask = IN(1);
    /* zeros of the broadcast shape, the gradient put back where the mask is set */
    PyObject *z = OP3(where, mask, NUM(0.0), ZEROS(0));
    if (need(n, 0)) SET(0, OP3(masked_scatter, z, mask, G(0)));
    END;
}

int bw_masked_scatter(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *mask = IN(1), *g = G(0);
    if (need(n, 0)) SET(0, OP3(masked_fill, g, mask, NUM(0.0)));
    if (need(n, 2)) { /* source's first count(mask) elements were used, the rest get 0 */
        PyObject *sel = OP2(masked_select, g, mask);
        int64_t total = numel_of(&n->in_meta[2]), used = sel ? ((EmTensor *)sel)->sizes[0] : 0;
        if (sel && used < total) {
            PyObject *pad = OP2(new_zeros, g, keep(S, Py_BuildValue("(L)", (long long)(total - used))));
            PyObject *parts = pad ? keep(S, PyTuple_Pack(2, sel, pad)) : NULL;
            sel = parts ? OP1(cat, parts) : NULL;
        }
        SET(2, OP2(reshape, sel, IN_SIZE(2)));
    }
    END;
}

/* ---------------------------------------------------------- x[key] */

/* x[key] once more, without the deprecation warnings the forward already
 * gave (a list read as a tuple, uint8 masks) */
static bool warns(PyObject *key) {
    if (PyList_Check(key)) return true;
    if (is_t(key)) return ((EmTensor *)key)->dtype == EM_UINT8;
    if (PyTuple_Check(key))
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); i++)
            if (warns(PyTuple_GET_ITEM(key, i))) return true;
    return false;
}

static PyObject *index_again(Scratch *s, PyObject *t, PyObject *key) {
    if (!t || !warns(key)) return call(s, EM_OP__index, 2, t, key, NULL, NULL);
    PyObject *mod = PyImport_ImportModule("warnings"), *cm = NULL, *r = NULL;
    cm = mod ? PyObject_CallMethod(mod, "catch_warnings", NULL) : NULL;
    PyObject *entered = cm ? PyObject_CallMethod(cm, "__enter__", NULL) : NULL;
    PyObject *f = entered ? PyObject_CallMethod(mod, "simplefilter", "s", "ignore") : NULL;
    if (f) r = call(s, EM_OP__index, 2, t, key, NULL, NULL);
    if (entered) { /* restore the filters, keeping an error of the call */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *ex = PyObject_CallMethod(cm, "__exit__", "OOO", Py_None, Py_None, Py_None);
        Py_XDECREF(ex);
        if (et) PyErr_Restore(et, ev, tb);
        else if (!ex) r = NULL;
    }
    Py_XDECREF(f);
    Py_XDECREF(entered);
    Py_XDECREF(cm);
    Py_XDECREF(mod);
    if (!r) s->failed = true;
    return r;
}

/* A basic key (ints, slices, None, ...) gives a view: its gradient is
 * copied into the same view of zeros. An advanced key copies, and may read
 * an element several times (x[[0, 0]]): the gradient is added at the
 * flat positions the same key picks out of arange(numel). */
int bw_index(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    PyObject *key = ARG(1), *g = G(0), *z = ZEROS(0);
    PyObject *v = index_again(S, z, key);
    if (!v) END;
    if (((EmTensor *)v)->storage == ((EmTensor *)z)->storage) {
        if (OP2(copy_, v, g)) SET(0, z);
        END;
    }
    const EmMeta *m = &n->in_meta[0];
    int64_t count = numel_of(m);
    EmTensor *pos = em_zeros(1, &count, EM_INT64, em_cpu());
    if (keep(S, (PyObject *)pos)) {
        int64_t *p = (int64_t *)em_data(pos);
        for (int64_t i = 0; i < count; i++) p[i] = i;
        pos = (EmTensor *)keep(S, (PyObject *)em_to_device(pos, em_device(go[0]), false)); /* written on the host */
    }
    PyObject *at = index_again(S, OP2(reshape, (PyObject *)pos, IN_SIZE(0)), key);
    PyObject *flatz = OP2(new_zeros, g, keep(S, Py_BuildValue("(L)", (long long)count)));
    SET(0, OP2(reshape, OP4(index_add, flatz, INT(0), flat(S, at), flat(S, g)), IN_SIZE(0)));
    END;
}

/* named after the last step torch takes: an advanced key ends in index(),
 * a basic one in the view of its last item */
const char *name_index(EmCall *c, PyObject *result) {
    PyObject *key = c->args[1], *last = key;
    if (is_t(result) && is_t(c->args[0]) && ((EmTensor *)result)->storage != ((EmTensor *)c->args[0])->storage)
        return "IndexBackward0";
    if (PyTuple_Check(key)) {
        last = NULL;
        for (Py_ssize_t i = PyTuple_GET_SIZE(key) - 1; i >= 0 && !last; i--)
            if (PyTuple_GET_ITEM(key, i) != Py_Ellipsis) last = PyTuple_GET_ITEM(key, i);
    }
    if (!last || last == Py_Ellipsis) return "AliasBackward0";
    if (last == Py_None) return "UnsqueezeBackward0";
    if (PySlice_Check(last)) return "SliceBackward0";
    return "SelectBackward0";
}


