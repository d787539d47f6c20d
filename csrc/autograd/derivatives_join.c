/* derivatives_join.c — backward formulas of joins, splits and rearrangements
 * (ops/join.c): cat and the stacks hand each input its slice of the
 * gradient, tensor_split adds each piece's gradient into zeros, repeat /
 * tile / repeat_interleave sum over the copies, flip / roll / rot90 /
 * movedim undo themselves, the broadcasting views leave the summing to the
 * engine (fit_gradient), diff applies the adjoint of a difference n times.
 *
 * Ops that take a list of tensors have one input per tensor, and a formula
 * may be asked for hundreds of gradients: each is computed in a scratch of
 * its own (the kit's scratch holds a few dozen temporaries). */
#include "formula.h"

/* A scratch's result as a new reference, the scratch dropped. */
static PyObject *take(Scratch *s, PyObject *r) {
    if (s->failed) r = NULL;
    Py_XINCREF(r);
    drop(s);
    return r;
}

static PyObject *ints_tuple(Scratch *s, int n, const int64_t *v) { return keep(s, em_size_new(n, v)); }

/* ------------------------------------------------------ cat and the stacks */

/* How each input is shaped before the concatenation: as it is (cat), by
 * atleast_1d / 2d / 3d (hstack / vstack / dstack), as a column (column_stack). */
enum { AS_IS, AT1, AT2, AT3, COLUMN };

static int joined_shape(const EmMeta *m, int how, int64_t *out) {
    const int64_t *s = em_meta_sizes(m);
    int nd = m->ndim;
    if (how == COLUMN && nd <= 1) {
        out[0] = nd ? s[0] : 1;
        out[1] = 1;
        return 2;
    }
    int want = how == AT1 ? 1 : how == AT2 ? 2 : how == AT3 ? 3 : 0;
    if (nd >= want) {
        memcpy(out, s, nd * sizeof(int64_t));
        return nd;
    }
    out[0] = out[1] = out[2] = 1; /* 0-d: all ones; 1-d (n): (1, n[, 1]); 2-d (m, n): (m, n, 1) */
    if (nd == 1) out[1 % want] = s[0];
    if (nd == 2) out[0] = s[0], out[1] = s[1];
    return want;
}

static bool legacy_empty(int nd, const int64_t *s) { return nd == 1 && s[0] == 0; }

/* the slice [off, off + len) of g along dim, in input k's shape */
static PyObject *cat_piece(EmNode *n, PyObject *g, int k, int dim, int64_t off, int64_t len, bool reshape) {
    BEGIN;
    PyObject *r = OP4(narrow, g, INT(dim), INT(off), INT(len));
    if (reshape) r = OP2(reshape, r, IN_SIZE(k));
    return take(S, r);
}

static int cat_grads(EmNode *n, EmTensor **go, EmTensor **gi, int how, int64_t dim64) {
    int64_t sh[EM_MAX_DIMS];
    int ref = -1, dim = 0;
    for (int k = 0; k < n->num_next && ref < 0; k++)
        if (!legacy_empty(joined_shape(&n->in_meta[k], how, sh), sh)) ref = k;
    if (ref >= 0 && em_wrap_dim(dim64, joined_shape(&n->in_meta[ref], how, sh), &dim) < 0) return -1;
    int64_t off = 0;
    for (int k = 0; k < n->num_next; k++) {
        int nd = joined_shape(&n->in_meta[k], how, sh);
        bool skipped = legacy_empty(nd, sh); /* cat leaves these out: a zero-size gradient */
        if (need(n, k)) {
            Scratch z = {{0}, 0, false};
            PyObject *r = skipped ? take(&z, zeros_for(&z, n, k, G(0)))
                                  : cat_piece(n, G(0), k, dim, off, sh[dim], how != AS_IS);
            if (!r) return -1;
            gi[k] = (EmTensor *)r;
        }
        if (!skipped) off += sh[dim];
    }
    return 0;
}

int bw_cat(EmNode *n, EmTensor **go, EmTensor **gi) {
    int64_t dim = PyLong_AsLongLong(ARG(1));
    return dim == -1 && PyErr_Occurred() ? -1 : cat_grads(n, go, gi, AS_IS, dim);
}
/* hstack joins along dim 0 when its first input is 0-d or 1-d */
int bw_hstack(EmNode *n, EmTensor **go, EmTensor **gi) {
    return cat_grads(n, go, gi, AT1, n->in_meta[0].ndim <= 1 ? 0 : 1);
}
int bw_vstack(EmNode *n, EmTensor **go, EmTensor **gi) { return cat_grads(n, go, gi, AT2, 0); }
int bw_dstack(EmNode *n, EmTensor **go, EmTensor **gi) { return cat_grads(n, go, gi, AT3, 2); }
int bw_column_stack(EmNode *n, EmTensor **go, EmTensor **gi) { return cat_grads(n, go, gi, COLUMN, 1); }

static PyObject *stack_piece(PyObject *g, int dim, int k) {
    BEGIN;
    return take(S, OP3(select, g, INT(dim), INT(k)));
}

int bw_stack(EmNode *n, EmTensor **go, EmTensor **gi) {
    int64_t d64 = PyLong_AsLongLong(ARG(1));
    int dim;
    if ((d64 == -1 && PyErr_Occurred()) || em_wrap_dim(d64, n->in_meta[0].ndim + 1, &dim) < 0) return -1;
    for (int k = 0; k < n->num_next; k++) {
        if (!need(n, k)) continue;
        if (!(gi[k] = (EmTensor *)stack_piece(G(0), dim, k))) return -1;
    }
    return 0;
}

/* --------------------------------------------------------- tensor_split */

/* g copied into the slice [start, start + len) of z along dim */
static int put_slice(PyObject *z, PyObject *g, int dim, int64_t start, int64_t len) {
    BEGIN;
    OP2(copy_, OP4(narrow, z, INT(dim), INT(start), INT(len)), g);
    END;
}

/* Where each piece starts: sections and increasing indices tile the dim;
 * indices that go back make pieces overlap (their gradients add up). */
static int split_starts(EmNode *n, int dim, int64_t *start) {
    int64_t size = em_meta_sizes(&n->in_meta[0])[dim], total = 0;
    PyObject *a = ARG(1);
    if (PyList_Check(a) || PyTuple_Check(a)) {
        start[0] = 0;
        for (Py_ssize_t i = 0; i + 1 < n->num_outputs && i < PySequence_Fast_GET_SIZE(a); i++) {
            int64_t e = PyLong_AsLongLong(PySequence_Fast_ITEMS(a)[i]);
            if (e == -1 && PyErr_Occurred()) return -1;
            if (e < 0) e = e < -size ? 0 : e + size;
            start[i + 1] = e > size ? size : e;
        }
        return 0;
    }
    /* sections, or indices given as a tensor (not kept by the node): the
     * pieces' lengths, which tile the dim unless the indices went back */
    for (int j = 0; j < n->num_outputs; j++) {
        start[j] = total;
        total += em_meta_sizes(&n->out_meta[j])[dim];
    }
    if (total != size) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ember: tensor_split backward needs increasing indices when they are given as a tensor");
        return -1;
    }
    return 0;
}

int bw_tensor_split(EmNode *n, EmTensor **go, EmTensor **gi) {
    int64_t d64 = PyLong_AsLongLong(ARG(2));
    int dim;
    if ((d64 == -1 && PyErr_Occurred()) || em_wrap_dim(d64, n->in_meta[0].ndim, &dim) < 0) return -1;
    int64_t *start = PyMem_Malloc((size_t)n->num_outputs * sizeof(int64_t));
    if (!start) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *any = NULL, *z = NULL;
    for (int j = 0; j < n->num_outputs && !any; j++) any = G(j);
    int rc = split_starts(n, dim, start);
    Scratch zs = {{0}, 0, false};
    if (rc == 0) z = take(&zs, zeros_for(&zs, n, 0, any));
    int64_t hi = 0; /* the end of what z holds so far */
    for (int j = 0; z && rc == 0 && j < n->num_outputs; j++) {
        int64_t len = em_meta_sizes(&n->out_meta[j])[dim];
        if (!go[j] || len == 0) continue;
        if (start[j] >= hi) {
            rc = put_slice(z, G(j), dim, start[j], len);
        } else { /* overlaps an earlier piece: add */
            Scratch s2 = {{0}, 0, false};
            PyObject *z2 = take(&s2, zeros_for(&s2, n, 0, any));
            rc = z2 ? put_slice(z2, G(j), dim, start[j], len) : -1;
            PyObject *args[2] = {z, z2};
            PyObject *sum = rc == 0 ? em_op(EM_OP_add, 2, args) : NULL;
            Py_XDECREF(z2);
            Py_DECREF(z);
            z = sum;
            rc = z ? rc : -1;
        }
        if (start[j] + len > hi) hi = start[j] + len;
    }
    PyMem_Free(start);
    if (rc < 0 || !z) {
        Py_XDECREF(z);
        return -1;
    }
    gi[0] = (EmTensor *)z;
    return 0;
}

/* ------------------------------------------------ repeat / tile / interleave */

/* input (s_0, ..., s_{d-1}) repeated reps (nr >= d dims): view the gradient
 * as (r_0, s'_0, r_1, s'_1, ...) (s' = 1 for the new leading dims) and sum
 * over the r's. sum_to_size, not sum: it is differentiable here. */
static int repeat_grad(EmNode *n, EmTensor **go, EmTensor **gi, int nr, const int64_t *reps) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    int lead = nr - m->ndim, k = 0;
    int64_t split[EM_MAX_DIMS], summed[EM_MAX_DIMS];
    if (lead < 0) { /* the forward would have refused */
        PyErr_SetString(PyExc_RuntimeError, "ember: repeat backward: fewer repeats than dims");
        return -1;
    }
    for (int d = 0; d < nr; d++) {
        int64_t s = d < lead ? 1 : em_meta_sizes(m)[d - lead];
        if (reps[d] != 1) {
            if (k + 2 > EM_MAX_DIMS) { /* more than 32 repeated dims: sum one dim at a time */
                PyErr_SetString(PyExc_RuntimeError, "ember: repeat backward: too many repeated dims");
                return -1;
            }
            split[k] = reps[d];
            summed[k++] = 1;
        }
        split[k] = summed[k] = s;
        k++;
    }
    PyObject *g = OP2(reshape, G(0), ints_tuple(S, k, split));
    SET(0, OP2(reshape, OP2(sum_to_size, g, ints_tuple(S, k, summed)), IN_SIZE(0)));
    END;
}

int bw_repeat(EmNode *n, EmTensor **go, EmTensor **gi) {
    int nr;
    int64_t reps[EM_MAX_DIMS];
    if (em_parse_intlist(ARG(1), "repeat", &nr, reps) < 0) return -1;
    return repeat_grad(n, go, gi, nr, reps);
}

int bw_tile(EmNode *n, EmTensor **go, EmTensor **gi) {
    int nr, nd = n->in_meta[0].ndim;
    int64_t dims[EM_MAX_DIMS], reps[EM_MAX_DIMS];
    if (em_parse_intlist(ARG(1), "tile", &nr, dims) < 0) return -1;
    int lead = nd > nr ? nd - nr : 0; /* fewer reps than dims: leading ones */
    for (int i = 0; i < lead; i++) reps[i] = 1;
    memcpy(reps + lead, dims, nr * sizeof(int64_t));
    return repeat_grad(n, go, gi, nr + lead, reps);
}

/* out[.., cum_i + j, ..] = in[.., i, ..], j < repeats_i, along dim (the
 * flattened input when dim is None). One count for all: the gradient viewed
 * with dim split as (n, r) summed over r; counts per index: index_add of the
 * gradient at the indices repeat_interleave(repeats) gives. */
int bw_repeat_interleave(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    bool flat = ARG(2) == Py_None;
    int dim = 0;
    int64_t nd = flat ? 1 : m->ndim, sh[EM_MAX_DIMS], numel = 1;
    for (int d = 0; d < m->ndim; d++) numel *= em_meta_sizes(m)[d];
    if (flat) {
        sh[0] = numel;
    } else {
        int64_t d64 = PyLong_AsLongLong(ARG(2));
        if ((d64 == -1 && PyErr_Occurred()) || em_wrap_dim(d64, m->ndim, &dim) < 0) return -1;
        memcpy(sh, em_meta_sizes(m), m->ndim * sizeof(int64_t));
    }
    int64_t len = sh[dim], total = em_meta_sizes(&n->out_meta[0])[dim];
    PyObject *rep = IN(1);
    if (!rep) END;
    bool per_index = em_is_tensor(rep) && ((EmTensor *)rep)->numel != 1;
    if (len == 0 || total == 0) {
        SET(0, ZEROS(0));
    } else if (!per_index) {
        int64_t split[EM_MAX_DIMS + 1], summed[EM_MAX_DIMS + 1];
        for (int d = 0, k = 0; d < nd; d++, k++) {
            split[k] = summed[k] = sh[d];
            if (d == dim) {
                k++;
                split[k] = total / len;
                summed[k] = 1;
            }
        }
        PyObject *g = OP2(reshape, G(0), ints_tuple(S, (int)nd + 1, split));
        SET(0, OP2(reshape, OP2(sum_to_size, g, ints_tuple(S, (int)nd + 1, summed)), IN_SIZE(0)));
    } else {
        PyObject *z = OP2(new_zeros, G(0), ints_tuple(S, (int)nd, sh));
        PyObject *idx = OP2(_to_copy, OP1(repeat_interleave, rep), em_dtype_object(EM_INT64));
        SET(0, OP2(reshape, OP4(index_add, z, INT(dim), idx, G(0)), IN_SIZE(0)));
    }
    END;
}

/* ------------------------------------------------ flip / roll / rot90 / moves */

int bw_flip(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP2(flip, G(0), ARG(1)));
    END;
}

int bw_fliplr(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP1(fliplr, G(0)));
    END;
}

int bw_flipud(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP1(flipud, G(0)));
    END;
}

/* roll back: shift each dim (or the flattened input) by size - shift mod size */
int bw_roll(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    const EmMeta *m = &n->in_meta[0];
    int ns, nd = 0, w;
    int64_t sh[EM_MAX_DIMS], dims[EM_MAX_DIMS], numel = 1;
    if (em_parse_intlist(ARG(1), "roll", &ns, sh) < 0) return -1;
    if (ARG(2) != Py_None && em_parse_intlist(ARG(2), "roll", &nd, dims) < 0) return -1;
    for (int d = 0; d < m->ndim; d++) numel *= em_meta_sizes(m)[d];
    for (int i = 0; i < ns; i++) {
        int64_t size = numel;
        if (ARG(2) != Py_None) {
            if (i >= nd || em_wrap_dim(dims[i], m->ndim, &w) < 0) return -1;
            size = em_meta_sizes(m)[w];
        }
        int64_t r = size ? sh[i] % size : 0;
        sh[i] = r > 0 ? size - r : -r; /* -(shift mod size), as a shift in [0, size) */
    }
    SET(0, OP3(roll, G(0), ints_tuple(S, ns, sh), ARG(2)));
    END;
}

int bw_rot90(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    int64_t k = PyLong_AsLongLong(ARG(1));
    if (k == -1 && PyErr_Occurred()) return -1;
    k = ((k % 4) + 4) % 4;
    SET(0, OP3(rot90, G(0), INT(k ? 4 - k : 0), ARG(2)));
    END;
}

int bw_movedim(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, OP3(movedim, G(0), ARG(2), ARG(1)));
    END;
}

/* ------------------------------------------------------- broadcasting views */

/* broadcast_to: the engine sums the gradient back to the input's shape */
int bw_broadcast_to(EmNode *n, EmTensor **go, EmTensor **gi) {
    BEGIN;
    SET(0, G(0));
    END;
}

/* broadcast_tensors: output k is input k expanded */
int bw_broadcast_tensors(EmNode *n, EmTensor **go, EmTensor **gi) {
    for (int k = 0; k < n->num_next && k < n->num_outputs; k++)
        if (need(n, k) && go[k]) gi[k] = (EmTensor *)Py_NewRef(go[k]);
    return 0;
}

/* meshgrid: grid k holds input k's values along dim k ('xy' swaps the
 * first two dims); the others are copies to sum over */
static PyObject *grid_grad(EmNode *n, PyObject *g, int k, int along) {
    BEGIN;
    int nd = ((EmTensor *)g)->ndim;
    int64_t keep_sh[EM_MAX_DIMS];
    for (int d = 0; d < nd; d++) keep_sh[d] = d == along ? ((EmTensor *)g)->sizes[d] : 1;
    return take(S, OP2(reshape, OP2(sum_to_size, g, ints_tuple(S, nd, keep_sh)), IN_SIZE(k)));
}

int bw_meshgrid(EmNode *n, EmTensor **go, EmTensor **gi) {
    const char *ix = ARG(1) == Py_None ? "ij" : PyUnicode_AsUTF8(ARG(1));
    if (!ix) return -1;
    bool xy = !strcmp(ix, "xy") && n->num_next >= 2;
    for (int k = 0; k < n->num_next && k < n->num_outputs; k++) {
        if (!need(n, k) || !go[k]) continue;
        int along = xy && k < 2 ? 1 - k : k;
        if (!(gi[k] = (EmTensor *)grid_grad(n, G(k), k, along))) return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------- diff */

/* adjoint of one difference step along dim: (0, g) - (g, 0) */
static PyObject *diff_adjoint(PyObject *g, int dim) {
    BEGIN;
    EmTensor *t = (EmTensor *)g;
    int64_t sh[EM_MAX_DIMS];
    memcpy(sh, t->sizes, t->ndim * sizeof(int64_t));
    sh[dim] = 1;
    PyObject *z = OP2(new_zeros, g, ints_tuple(S, t->ndim, sh));
    PyObject *a = keep(S, PyTuple_Pack(2, z ? z : Py_None, g)), *b = keep(S, PyTuple_Pack(2, g, z ? z : Py_None));
    if (!z) return take(S, NULL);
    return take(S, SUB(OP2(cat, a, INT(dim)), OP2(cat, b, INT(dim))));
}

/* diff(input, n, dim, prepend, append): n differences of
 * cat(prepend, input, append), stopping when nothing is left */
int bw_diff(EmNode *n, EmTensor **go, EmTensor **gi) {
    int64_t order = PyLong_AsLongLong(ARG(1)), d64 = PyLong_AsLongLong(ARG(2));
    int dim;
    if (PyErr_Occurred()) return -1;
    if (order == 0) { /* a copy of the input; prepend and append unused */
        if (need(n, 0)) gi[0] = (EmTensor *)Py_NewRef(go[0]);
        return 0;
    }
    if (em_wrap_dim(d64, n->in_meta[0].ndim, &dim) < 0) return -1;
    int64_t len[3] = {0, 0, 0}, total = 0; /* input, prepend, append along dim */
    for (int k = 0; k < 3 && k < n->num_next; k++) {
        if (n->in_meta[k].defined) len[k] = em_meta_sizes(&n->in_meta[k])[dim];
        total += len[k];
    }
    int64_t steps = order < total ? order : total;
    PyObject *g = Py_NewRef(go[0]);
    for (int64_t i = 0; g && i < steps; i++) Py_SETREF(g, diff_adjoint(g, dim));
    if (!g) return -1;
    int64_t off[3] = {len[1], 0, len[1] + len[0]};
    for (int k = 0; k < 3 && k < n->num_next; k++) {
        if (!need(n, k)) continue;
        if (!(gi[k] = (EmTensor *)cat_piece(n, g, k, dim, off[k], len[k], false))) break;
    }
    Py_DECREF(g);
    return PyErr_Occurred() ? -1 : 0;
}

/* ------------------------------------------------------------- names */

const char *name_repeat_interleave(EmCall *c, PyObject *result) {
    (void)result;
    return em_is_tensor(c->args[1]) ? "IndexSelectBackward0" : "ViewBackward0";
}

const char *name_movedim(EmCall *c, PyObject *result) {
    (void)result;
    return em_is_tensor(c->args[0]) && ((EmTensor *)c->args[0])->ndim == 0 ? "AliasBackward0" : "PermuteBackward0";
}

const char *name_diff(EmCall *c, PyObject *result) {
    (void)result;
    return PyLong_Check(c->args[1]) && PyLong_AsLongLong(c->args[1]) == 0 ? "CopyBackwards" : "SubBackward0";
}


