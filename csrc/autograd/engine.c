/* engine.c — running the graph backward (Note [autograd graph]).
 *
 * From the roots, find every node that can reach what was asked for (all
 * leaves for backward(), the `inputs` for autograd.grad), count each node's
 * incoming edges, then run nodes whose inputs are complete, latest-created
 * first (as torch's CPU engine does). Each node gets the summed gradients of
 * its outputs, runs hooks and its backward, and passes gradients along its
 * edges — summed to the input's shape and cast to its dtype. Saved tensors
 * are freed after use unless retain_graph. Grad mode is on during the run
 * only with create_graph, so formulas (written with ember ops) record.
 */
#include "../ember.h"

/* ------------------------------------------------------- task table */

typedef struct {
    EmNode *node;     /* borrowed: the graph keeps nodes alive during the run */
    EmTensor **buf;   /* [num_outputs] summed incoming gradients */
    int deps;         /* edges from needed nodes not yet delivered */
    int visit_next;   /* DFS cursor */
    bool needed;
    bool target;      /* some (node, slot) is captured for autograd.grad */
} Task;

typedef struct {
    Task *tasks;
    int n, cap;
    int *slots; /* open addressing: node pointer -> task index + 1 */
    int nslots;
} Graph;

static size_t hash_ptr(const void *p, int nslots) {
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)(x & (uintptr_t)(nslots - 1));
}

static int graph_find(Graph *g, EmNode *node) {
    for (size_t h = hash_ptr(node, g->nslots);; h = (h + 1) & (size_t)(g->nslots - 1)) {
        int s = g->slots[h];
        if (!s) return -1;
        if (g->tasks[s - 1].node == node) return s - 1;
    }
}

static int graph_grow(Graph *g) {
    int ncap = g->cap ? 2 * g->cap : 64;
    Task *t = PyMem_Realloc(g->tasks, ncap * sizeof(Task));
    int *slots = PyMem_Calloc(2 * ncap, sizeof(int));
    if (!t || !slots) {
        if (t) g->tasks = t;
        PyMem_Free(slots);
        PyErr_NoMemory();
        return -1;
    }
    g->tasks = t;
    g->cap = ncap;
    PyMem_Free(g->slots);
    g->slots = slots;
    g->nslots = 2 * ncap;
    for (int i = 0; i < g->n; i++) {
        size_t h = hash_ptr(g->tasks[i].node, g->nslots);
        while (g->slots[h]) h = (h + 1) & (size_t)(g->nslots - 1);
        g->slots[h] = i + 1;
    }
    return 0;
}

/* index of node's task, adding it when new (-1 on error) */
static int graph_add(Graph *g, EmNode *node, bool *added) {
    int i = g->cap ? graph_find(g, node) : -1;
    *added = false;
    if (i >= 0) return i;
    if (g->n == g->cap && graph_grow(g) < 0) return -1;
    EmTensor **buf = PyMem_Calloc(node->num_outputs > 0 ? node->num_outputs : 1, sizeof(EmTensor *));
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    i = g->n++;
    g->tasks[i] = (Task){node, buf, 0, 0, false, false};
    size_t h = hash_ptr(node, g->nslots);
    while (g->slots[h]) h = (h + 1) & (size_t)(g->nslots - 1);
    g->slots[h] = i + 1;
    *added = true;
    return i;
}

static void graph_free(Graph *g) {
    for (int i = 0; i < g->n; i++) {
        for (int j = 0; j < g->tasks[i].node->num_outputs; j++) Py_XDECREF(g->tasks[i].buf[j]);
        PyMem_Free(g->tasks[i].buf);
    }
    PyMem_Free(g->tasks);
    PyMem_Free(g->slots);
}

/* --------------------------------------------------------- helpers */

/* buf += grad (steals grad) */
static int accumulate_into(EmTensor **buf, EmTensor *grad) {
    if (!*buf) {
        *buf = grad;
        return 0;
    }
    PyObject *args[2] = {(PyObject *)*buf, (PyObject *)grad};
    EmTensor *sum = em_op_t(EM_OP_add, 2, args);
    Py_DECREF(grad);
    if (!sum) return -1;
    Py_SETREF(*buf, sum);
    return 0;
}

static bool expandable(const EmMeta *m, const EmTensor *g) {
    if (m->ndim > g->ndim) return false;
    const int64_t *ms = em_meta_sizes(m);
    for (int i = 1; i <= m->ndim; i++) {
        int64_t a = ms[m->ndim - i], b = g->sizes[g->ndim - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

/* Make grad fit the input it flows to: sum away broadcast dims, cast the
 * dtype (torch's validate_outputs). Steals *grad; 0 / -1. */
static int fit_gradient(EmNode *n, int k, EmTensor **grad) {
    const EmMeta *m = &n->in_meta[k];
    EmTensor *g = *grad;
    if (!m->defined) return 0;
    bool same = g->ndim == m->ndim && !memcmp(g->sizes, em_meta_sizes(m), m->ndim * sizeof(int64_t));
    if (!same) {
        char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
        if (!expandable(m, g)) {
            PyErr_Format(PyExc_RuntimeError,
                         "Function %s returned an invalid gradient at index %d - got %s but "
                         "expected shape compatible with %s", em_node_name(n), k,
                         em_shape_str(g->ndim, g->sizes, a, sizeof a),
                         em_shape_str(m->ndim, em_meta_sizes(m), b, sizeof b));
            return -1;
        }
        PyObject *size = em_size_new(m->ndim, em_meta_sizes(m));
        if (!size) return -1;
        PyObject *args[2] = {(PyObject *)g, size};
        EmTensor *r = em_op_t(EM_OP_sum_to_size, 2, args);
        Py_DECREF(size);
        if (!r) return -1;
        Py_SETREF(*grad, r);
        g = r;
    }
    if (g->dtype != m->dtype) {
        EmTensor *r = em_to_dtype(g, (EmDType)m->dtype, false);
        if (!r) return -1;
        Py_SETREF(*grad, r);
        g = r;
    }
    if (!em_device_eq(em_device(g), m->device)) { /* torch's validate_outputs moves it too */
        EmTensor *r = em_to_device(g, m->device, false);
        if (!r) return -1;
        Py_SETREF(*grad, r);
    }
    return 0;
}

/* Call hooks(grad) for each hook in a dict; a hook returning a tensor replaces grad. */
static int run_tensor_hooks(PyObject *hooks, EmTensor **grad) {
    if (!hooks || !*grad || !PyDict_GET_SIZE(hooks)) return 0;
    PyObject *values = PyDict_Values(hooks); /* a snapshot: hooks may remove themselves */
    if (!values) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
        PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(values, i), (PyObject *)*grad);
        if (!r) {
            Py_DECREF(values);
            return -1;
        }
        if (r != Py_None) {
            EmTensor *g = (EmTensor *)r;
            if (!em_is_tensor(r) || g->ndim != (*grad)->ndim ||
                memcmp(g->sizes, (*grad)->sizes, g->ndim * sizeof(int64_t))) {
                PyObject *name = PyObject_GetAttrString(PyList_GET_ITEM(values, i), "__name__");
                PyErr_Clear();
                if (!em_is_tensor(r))
                    PyErr_Format(PyExc_TypeError, "hook '%S' must return a Tensor or None, got %.100s",
                                 name ? name : Py_None, Py_TYPE(r)->tp_name);
                else
                    PyErr_Format(PyExc_RuntimeError, "hook '%S' has changed the size of value",
                                 name ? name : Py_None);
                Py_XDECREF(name);
                Py_DECREF(r);
                Py_DECREF(values);
                return -1;
            }
            Py_SETREF(*grad, g);
        } else {
            Py_DECREF(r);
        }
    }
    Py_DECREF(values);
    return 0;
}

static PyObject *grads_tuple(EmTensor **g, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) PyTuple_SET_ITEM(t, i, Py_NewRef(g[i] ? (PyObject *)g[i] : Py_None));
    return t;
}

/* replace g[0..n) by a hook's returned tuple (None entries allowed) */
static int take_grads(PyObject *r, EmTensor **g, int n, const char *what) {
    if (r == Py_None) return 0;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != n) {
        PyErr_Format(PyExc_RuntimeError, "%s hook must return a tuple of %d gradients or None", what, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(r, i);
        if (x != Py_None && !em_is_tensor(x)) {
            PyErr_Format(PyExc_TypeError, "%s hook returned a %.100s where a Tensor or None was expected",
                         what, Py_TYPE(x)->tp_name);
            return -1;
        }
        Py_XSETREF(g[i], x == Py_None ? NULL : (EmTensor *)Py_NewRef(x));
    }
    return 0;
}

static int run_dict_hooks(PyObject *hooks, PyObject *arg1, PyObject *arg2, EmTensor **g, int n,
                          const char *what) {
    if (!hooks || !PyDict_GET_SIZE(hooks)) return 0;
    PyObject *values = PyDict_Values(hooks);
    if (!values) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values) && rc == 0; i++) {
        PyObject *r = arg2 ? PyObject_CallFunctionObjArgs(PyList_GET_ITEM(values, i), arg1, arg2, NULL)
                           : PyObject_CallOneArg(PyList_GET_ITEM(values, i), arg1);
        if (!r) {
            rc = -1;
            break;
        }
        rc = take_grads(r, g, n, what);
        Py_DECREF(r);
    }
    Py_DECREF(values);
    return rc;
}

/* ------------------------------------------------------ node kinds */

/* AccumulateGrad: leaf hooks, then into .grad (Note [accumulator]). */
/* A view nobody else can reach: its root is held only by the view, the
 * storage only by the two of them, and the view covers the whole storage
 * contiguously (the transpose of a transpose that mm's backward makes for
 * Linear weights). Keeping it as .grad copies nothing and frees the root's
 * extra header only. */
static bool sole_owner_view(const EmTensor *g) {
    const EmTensor *root = (const EmTensor *)g->view_base;
    return g->is_view && root && Py_REFCNT(root) == 1 && Py_REFCNT(g->storage) == 2 && !g->storage->base &&
           g->offset == 0 && em_is_contiguous(g) &&
           g->numel * em_dtype_info[g->dtype].itemsize == g->storage->nbytes;
}

/* torch's layout contract for .grad: a dense leaf's gradient has the leaf's
 * strides (a channels-last weight gets a channels-last gradient), any other
 * leaf's a contiguous one. */
static bool obeys_layout(const EmTensor *g, const EmTensor *v) {
    if (!em_is_non_overlapping_and_dense(v)) return em_is_contiguous(g);
    for (int d = 0; d < g->ndim; d++)
        if (g->sizes[d] != 1 ? g->strides[d] != v->strides[d] : g->strides[d] == 0) return false;
    return em_is_non_overlapping_and_dense(g);
}

/* A copy of grad the user may modify, laid out as obeys_layout wants. */
static EmTensor *grad_copy(EmTensor *grad, const EmTensor *v) {
    if (!em_is_non_overlapping_and_dense(v)) {
        EmTensor *g = em_contiguous(grad);
        if (g == grad) Py_SETREF(g, em_clone(grad));
        return g;
    }
    EmTensor *g = em_empty_strided(v->ndim, v->sizes, v->strides, (EmDType)grad->dtype, em_device(grad));
    if (g && em_copy_(g, (PyObject *)grad) < 0) Py_CLEAR(g);
    return g;
}

static int run_accumulate(EmNode *n, EmTensor *grad, bool create_graph) {
    EmTensor *v = n->variable;
    Py_INCREF(grad);
    if (run_tensor_hooks(v->backward_hooks, &grad) < 0) goto fail;
    if (!v->grad) {
        /* keep the incoming tensor when nobody else holds it and its layout
         * is plain; otherwise store a copy the user may freely modify */
        if (create_graph ||
            (Py_REFCNT(grad) <= 2 && obeys_layout(grad, v) && (!grad->is_view || sole_owner_view(grad)))) {
            EmTensor *g = create_graph ? (EmTensor *)Py_NewRef(grad) : em_detach(grad);
            if (!g) goto fail;
            v->grad = (PyObject *)g;
        } else {
            EmTensor *g = grad_copy(grad, v);
            if (!g) goto fail;
            v->grad = (PyObject *)g;
        }
    } else if (create_graph) {
        PyObject *args[2] = {v->grad, (PyObject *)grad};
        PyObject *sum = em_op(EM_OP_add, 2, args);
        if (!sum) goto fail;
        Py_SETREF(v->grad, sum);
    } else {
        PyObject *r = em_binary_op(EM_OP_add, v->grad, (PyObject *)grad, (EmTensor *)v->grad);
        if (!r) goto fail;
        Py_DECREF(r);
    }
    Py_DECREF(grad);
    if (v->post_acc_hooks && PyDict_GET_SIZE(v->post_acc_hooks)) {
        PyObject *values = PyDict_Values(v->post_acc_hooks);
        if (!values) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(values); i++) {
            PyObject *r = PyObject_CallOneArg(PyList_GET_ITEM(values, i), (PyObject *)v);
            if (!r) {
                Py_DECREF(values);
                return -1;
            }
            Py_DECREF(r);
        }
        Py_DECREF(values);
    }
    return 0;
fail:
    Py_DECREF(grad);
    return -1;
}

/* Python autograd.Function: ctx._engine_backward(grads) returns one gradient per tensor input. */
static int run_python(EmNode *n, EmTensor **go, EmTensor **gi) {
    PyObject *grads = grads_tuple(go, n->num_outputs);
    if (!grads) return -1;
    PyObject *name = PyUnicode_FromString("_engine_backward");
    /* a Python backward sees the caller's autocast state, as in torch (the
     * engine's own formulas run with autocast suspended): checkpoint's
     * recomputation re-enters the forward's autocast */
    const int suspend = em_autocast_suspend;
    em_autocast_suspend = 0;
    PyObject *r = name ? PyObject_CallMethodOneArg(n->ctx, name, grads) : NULL;
    em_autocast_suspend = suspend;
    Py_XDECREF(name);
    Py_DECREF(grads);
    if (!r) return -1;
    int rc = take_grads(r, gi, n->num_next, "Function backward");
    Py_DECREF(r);
    return rc;
}

/* geometry blocks written by record.c: ndim, sizes, strides, offset */
typedef struct {
    int ndim;
    const int64_t *sizes, *strides;
    int64_t offset;
} Geom;
static const int64_t *geom_get(const int64_t *p, Geom *g) {
    g->ndim = (int)*p++;
    g->sizes = p;
    g->strides = p + g->ndim;
    g->offset = p[2 * g->ndim];
    return p + 2 * g->ndim + 1;
}

/* The op `id` on up to 4 arguments, recorded like a user's call: a new reference or NULL. */
static PyObject *recorded_op(EmOpId id, int nargs, PyObject *a, PyObject *b, PyObject *c, PyObject *d) {
    PyObject *args[4] = {a, b, c, d};
    for (int i = 0; i < nargs; i++)
        if (!args[i]) return NULL;
    return em_op(id, nargs, args);
}

/* For each element of view geometry v (row-major), the row-major index of the
 * element of base geometry b at the same storage position: an int64 tensor
 * [numel(v)] on `device`; and in *keep (when asked) a [numel(b)] tensor of the
 * given dtype, 0 where the view lies and 1 elsewhere. NULL (error set) when the
 * view reaches outside the base. */
static EmTensor *view_positions(const Geom *b, const Geom *v, EmDType dtype, EmDevice device, EmTensor **keep) {
    int64_t nb = 1, nv = 1, lo = b->offset, hi = b->offset;
    for (int k = 0; k < b->ndim; k++) {
        nb *= b->sizes[k];
        if (b->sizes[k] == 0) continue;
        int64_t reach = (b->sizes[k] - 1) * b->strides[k];
        if (reach < 0) lo += reach; else hi += reach;
    }
    for (int k = 0; k < v->ndim; k++) nv *= v->sizes[k];
    int64_t span = nb ? hi - lo + 1 : 1, *inv = PyMem_Malloc(span * sizeof(int64_t));
    int64_t *pos = PyMem_Calloc(b->ndim > v->ndim ? b->ndim + 1 : v->ndim + 1, sizeof(int64_t));
    EmTensor *idx = NULL, *mask = NULL, *moved = NULL;
    if (!inv || !pos) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t i = 0; i < span; i++) inv[i] = -1;
    for (int64_t i = 0; i < nb; i++) { /* pos[]: the multi-index of element i */
        int64_t at = b->offset;
        for (int k = 0; k < b->ndim; k++) at += pos[k] * b->strides[k];
        inv[at - lo] = i;
        for (int k = b->ndim - 1; k >= 0 && ++pos[k] == b->sizes[k]; k--) pos[k] = 0;
    }
    idx = em_empty(1, &nv, EM_INT64, em_cpu());
    if (!idx) goto done;
    int64_t *out = (int64_t *)em_data(idx);
    memset(pos, 0, (v->ndim + 1) * sizeof(int64_t));
    for (int64_t j = 0; j < nv; j++) {
        int64_t at = v->offset;
        for (int k = 0; k < v->ndim; k++) at += pos[k] * v->strides[k];
        if (at < lo || at - lo >= span || inv[at - lo] < 0) {
            PyErr_SetString(PyExc_RuntimeError, "ember: differentiating an in-place change of a view that reaches "
                            "outside its base is not supported under create_graph=True");
            Py_CLEAR(idx);
            goto done;
        }
        out[j] = inv[at - lo];
        for (int k = v->ndim - 1; k >= 0 && ++pos[k] == v->sizes[k]; k--) pos[k] = 0;
    }
    if (keep) {
        EmTensor *m64 = em_empty(1, &nb, EM_FLOAT64, em_cpu());
        if (!m64) goto fail;
        double *md = (double *)em_data(m64);
        for (int64_t i = 0; i < nb; i++) md[i] = 1.0;
        for (int64_t j = 0; j < nv; j++) md[out[j]] = 0.0;
        mask = em_to_dtype(m64, dtype, false);
        Py_DECREF(m64);
        if (!mask) goto fail;
        if (!em_device_eq(device, em_cpu())) {
            moved = em_to_device(mask, device, false);
            Py_SETREF(mask, moved);
            if (!mask) goto fail;
        }
        *keep = mask;
    }
    if (!em_device_eq(device, em_cpu())) {
        moved = em_to_device(idx, device, false);
        Py_SETREF(idx, moved);
        if (!idx) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(idx);
    if (keep && *keep) Py_CLEAR(*keep);
done:
    PyMem_Free(inv);
    PyMem_Free(pos);
    return idx;
}

/* An op node's formula, run only when what it saved is intact (Note
 * [released node], Note [saved tensor check]): formulas then never see a
 * NULL saved tensor or one written since it was saved. */
static int run_formula(EmNode *n, EmTensor **go, EmTensor **gi) {
    if (n->released) return em_node_released_error();
    if (em_node_check_saved(n) < 0) return -1;
    return n->backward(n, go, gi);
}

/* run_copy_slices under create_graph: the same gradients built from recorded,
 * differentiable ops (take / index_add over the view's positions in its base,
 * mul by a mask), so they are differentiable in the incoming gradient and in
 * what the inner formula saved -- double backward through slicing and in-place
 * ops on views, and autograd.functional.jvp's double-backward trick, need it.
 * The result is laid out contiguously rather than in the base's strides. */
static int run_copy_slices_recorded(EmNode *n, EmTensor **go, EmTensor **gi, const Geom *b, const Geom *v) {
    EmNode *inner = (EmNode *)n->ctx;
    int nres = inner ? inner->num_next : 0;
    EmTensor **res = PyMem_Calloc(nres > 0 ? nres : 1, sizeof(EmTensor *));
    EmTensor *keep = NULL, *idx = NULL, *zeros = NULL, *slice = NULL;
    PyObject *flat_shape = NULL, *bsize = NULL, *vsize = NULL, *zero = NULL, *gflat = NULL, *taken = NULL,
             *part = NULL, *sum = NULL, *tmp = NULL, *result = NULL;
    int rc = -1;
    if (!res) return PyErr_NoMemory(), -1;
    EmDType dt = (EmDType)go[0]->dtype;
    EmDevice dev = em_device(go[0]);
    int64_t nb = 1, minus_one = -1;
    for (int k = 0; k < b->ndim; k++) nb *= b->sizes[k];
    idx = view_positions(b, v, dt, dev, inner ? &keep : NULL);
    zeros = idx ? em_zeros(1, &nb, dt, dev) : NULL;
    flat_shape = zeros ? em_size_new(1, &minus_one) : NULL;
    bsize = flat_shape ? em_size_new(b->ndim, b->sizes) : NULL;
    vsize = bsize ? em_size_new(v->ndim, v->sizes) : NULL;
    zero = vsize ? PyLong_FromLong(0) : NULL;
    if (!zero) goto done;
    if (!(gflat = recorded_op(EM_OP_reshape, 2, (PyObject *)go[0], flat_shape, NULL, NULL))) goto done;
    if (!inner) { /* the view's gradient, scattered into zeros shaped like its base */
        sum = recorded_op(EM_OP_index_add, 4, (PyObject *)zeros, zero, (PyObject *)idx, gflat);
    } else {
        if (!(taken = recorded_op(EM_OP_take, 2, gflat, (PyObject *)idx, NULL, NULL))) goto done;
        if (!(slice = (EmTensor *)recorded_op(EM_OP_reshape, 2, taken, vsize, NULL, NULL))) goto done;
        if (run_formula(inner, &slice, res) < 0) goto done;
        /* the base's gradient outside the view, and the view's old value's inside it */
        if (!(part = recorded_op(EM_OP_mul, 2, gflat, (PyObject *)keep, NULL, NULL))) goto done;
        if (res[0]) {
            if (!(tmp = recorded_op(EM_OP_reshape, 2, (PyObject *)res[0], flat_shape, NULL, NULL))) goto done;
            sum = recorded_op(EM_OP_index_add, 4, part, zero, (PyObject *)idx, tmp);
        } else {
            sum = Py_NewRef(part);
        }
        for (int i = 1; i < n->num_next; i++) {
            gi[i] = res[i];
            res[i] = NULL;
        }
    }
    if (!sum || !(result = recorded_op(EM_OP_reshape, 2, sum, bsize, NULL, NULL))) goto done;
    gi[0] = (EmTensor *)result;
    result = NULL;
    rc = 0;
done:
    for (int i = 0; i < nres; i++) Py_XDECREF(res[i]);
    PyMem_Free(res);
    Py_XDECREF(keep);
    Py_XDECREF(idx);
    Py_XDECREF(zeros);
    Py_XDECREF(slice);
    Py_XDECREF(flat_shape);
    Py_XDECREF(bsize);
    Py_XDECREF(vsize);
    Py_XDECREF(zero);
    Py_XDECREF(gflat);
    Py_XDECREF(taken);
    Py_XDECREF(part);
    Py_XDECREF(sum);
    Py_XDECREF(tmp);
    Py_XDECREF(result);
    return rc;
}

/* Note [in-place on views]: CopySlices (ctx = the in-place op's node) and
 * the as_strided view node (no ctx) share the base/view geometry. */
static int run_copy_slices(EmNode *n, EmTensor **go, EmTensor **gi) {
    if (!n->view_geom) { /* Note [set_ under autograd] */
        PyErr_SetString(PyExc_RuntimeError, "derivative for set_ is not implemented");
        return -1;
    }
    Geom b, v;
    geom_get(geom_get(n->view_geom, &b), &v);
    if (em_grad_enabled()) return run_copy_slices_recorded(n, go, gi, &b, &v);
    EmNode *inner = (EmNode *)n->ctx;
    int nres = inner ? inner->num_next : 0;
    EmTensor **res = PyMem_Calloc(nres > 0 ? nres : 1, sizeof(EmTensor *));
    EmTensor *result =
        res ? em_empty_strided(b.ndim, b.sizes, b.strides, (EmDType)go[0]->dtype, em_device(go[0])) : NULL;
    EmTensor *region = NULL, *slice = NULL;
    int rc = -1;
    if (!result) {
        PyMem_Free(res);
        return res ? -1 : (PyErr_NoMemory(), -1);
    }
    region = em_view_of(result, v.ndim, v.sizes, v.strides, v.offset - b.offset);
    if (!region) goto done;
    if (!n->ctx) { /* gradient of the view -> gradient of its base */
        EmScalar zero = {'i', {0}};
        if (em_fill_(result, zero) < 0 || em_copy_(region, (PyObject *)go[0]) < 0) goto done;
    } else {
        EmNode *fn = (EmNode *)n->ctx;
        if (em_copy_(result, (PyObject *)go[0]) < 0 || !(slice = em_clone(region))) goto done;
        if (run_formula(fn, &slice, res) < 0) goto done;
        if (res[0]) {
            if (em_copy_(region, (PyObject *)res[0]) < 0) goto done;
        } else {
            EmScalar zero = {'i', {0}};
            if (em_fill_(region, zero) < 0) goto done;
        }
        for (int i = 1; i < n->num_next; i++) {
            gi[i] = res[i];
            res[i] = NULL;
        }
    }
    gi[0] = (EmTensor *)Py_NewRef(result);
    rc = 0;
done:
    for (int i = 0; i < nres; i++) Py_XDECREF(res[i]);
    PyMem_Free(res);
    Py_XDECREF(slice);
    Py_XDECREF(region);
    Py_DECREF(result);
    return rc;
}

/* ----------------------------------------------------------- the run */

typedef struct {
    EmNode *node;
    int slot;
    int index; /* position in the result tuple */
} Capture;

static void heap_push(int *heap, int *n, Task *t, int i) {
    int k = (*n)++;
    heap[k] = i;
    while (k > 0) {
        int p = (k - 1) / 2;
        if (t[heap[p]].node->sequence_nr >= t[heap[k]].node->sequence_nr) break;
        int x = heap[p];
        heap[p] = heap[k];
        heap[k] = x;
        k = p;
    }
}

static int heap_pop(int *heap, int *n, Task *t) {
    int top = heap[0];
    heap[0] = heap[--(*n)];
    for (int k = 0;;) {
        int l = 2 * k + 1, r = l + 1, m = k;
        if (l < *n && t[heap[l]].node->sequence_nr > t[heap[m]].node->sequence_nr) m = l;
        if (r < *n && t[heap[r]].node->sequence_nr > t[heap[m]].node->sequence_nr) m = r;
        if (m == k) break;
        int x = heap[m];
        heap[m] = heap[k];
        heap[k] = x;
        k = m;
    }
    return top;
}

static int grow_to(int **arr, int *cap, int need) {
    if (need <= *cap) return 0;
    int ncap = *cap ? *cap : 64;
    while (ncap < need) ncap *= 2;
    int *p = PyMem_Realloc(*arr, ncap * sizeof(int));
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Discover every node reachable from the roots (iterative DFS) and decide
 * which are needed: all of them, or those that reach a capture target;
 * then count each needed node's incoming edges from needed nodes. */
static int discover(Graph *g, EmEdge *roots, int nroots, Capture *caps, int ncaps, bool all_needed) {
    int *stack = NULL, sp = 0, scap = 0, *order = NULL, norder = 0, ocap = 0, rc = -1;
    for (int r = 0; r < nroots; r++) {
        bool added;
        int i = graph_add(g, roots[r].fn, &added);
        if (i < 0) goto done;
        if (!added) continue;
        if (grow_to(&stack, &scap, sp + 1) < 0) goto done;
        stack[sp++] = i;
        while (sp > 0) {
            Task *t = &g->tasks[stack[sp - 1]];
            if (t->visit_next < t->node->num_next) {
                EmNode *child = t->node->next[t->visit_next++].fn;
                if (!child) continue;
                int ci = graph_add(g, child, &added);
                if (ci < 0) goto done;
                if (added) {
                    if (grow_to(&stack, &scap, sp + 1) < 0) goto done;
                    stack[sp++] = ci;
                }
            } else {
                if (grow_to(&order, &ocap, norder + 1) < 0) goto done;
                order[norder++] = stack[--sp]; /* post-order: children first */
            }
        }
    }
    for (int c = 0; c < ncaps; c++) {
        int i = graph_find(g, caps[c].node);
        if (i >= 0) g->tasks[i].target = true;
    }
    for (int k = 0; k < norder; k++) {
        Task *t = &g->tasks[order[k]];
        bool needed = all_needed || t->target;
        for (int e = 0; e < t->node->num_next && !needed; e++) {
            EmNode *child = t->node->next[e].fn;
            needed = child && g->tasks[graph_find(g, child)].needed;
        }
        t->needed = needed;
    }
    for (int i = 0; i < g->n; i++) {
        Task *t = &g->tasks[i];
        if (!t->needed) continue;
        for (int e = 0; e < t->node->num_next; e++) {
            EmNode *child = t->node->next[e].fn;
            if (child) {
                Task *ct = &g->tasks[graph_find(g, child)];
                if (ct->needed) ct->deps++;
            }
        }
    }
    rc = 0;
done:
    PyMem_Free(stack);
    PyMem_Free(order);
    return rc;
}

static int execute(Task *t, bool keep_graph, bool create_graph, bool accumulate,
                   Capture *caps, int ncaps, EmTensor **captured, EmTensor **gi) {
    EmNode *n = t->node;
    EmTensor **go = t->buf;
    /* hooks registered on this node's outputs (Tensor.register_hook), then node pre-hooks */
    if (n->tensor_hooks) {
        for (int j = 0; j < n->num_outputs; j++) {
            PyObject *key = PyLong_FromLong(j);
            PyObject *hooks = key ? PyDict_GetItemWithError(n->tensor_hooks, key) : NULL;
            Py_XDECREF(key);
            if (PyErr_Occurred() || run_tensor_hooks(hooks, &go[j]) < 0) return -1;
        }
    }
    if (n->pre_hooks && PyDict_GET_SIZE(n->pre_hooks)) {
        PyObject *grads = grads_tuple(go, n->num_outputs);
        int rc = grads ? run_dict_hooks(n->pre_hooks, grads, NULL, go, n->num_outputs, "pre") : -1;
        Py_XDECREF(grads);
        if (rc < 0) return -1;
    }
    for (int c = 0; c < ncaps; c++) {
        if (caps[c].node == n && go[caps[c].slot]) {
            if (accumulate_into(&captured[caps[c].index], (EmTensor *)Py_NewRef(go[caps[c].slot])) < 0)
                return -1;
        }
    }
    bool any = false;
    for (int j = 0; j < n->num_outputs; j++) any |= go[j] != NULL;
    if (!any) return 0;
    int rc = 0;
    int64_t t0 = EM_UNLIKELY(em_profiler_on) ? em_profiler_now() : 0;
    switch (n->kind) {
    case EM_NODE_ACCUMULATE:
        if (accumulate) rc = run_accumulate(n, go[0], create_graph);
        break;
    case EM_NODE_PYTHON: rc = run_python(n, go, gi); break;
    case EM_NODE_COPY_SLICES: rc = run_copy_slices(n, go, gi); break;
    default: rc = run_formula(n, go, gi); break;
    }
    if (EM_UNLIKELY(em_profiler_on)) em_profiler_node(em_node_name(n), t0);
    if (rc < 0) return -1;
    if (n->post_hooks && PyDict_GET_SIZE(n->post_hooks)) {
        PyObject *gin = grads_tuple(gi, n->num_next), *gout = grads_tuple(go, n->num_outputs);
        rc = gin && gout ? run_dict_hooks(n->post_hooks, gin, gout, gi, n->num_next, "post") : -1;
        Py_XDECREF(gin);
        Py_XDECREF(gout);
        if (rc < 0) return -1;
    }
    for (int k = 0; k < n->num_next; k++)
        if (gi[k] && fit_gradient(n, k, &gi[k]) < 0) return -1;
    if (!keep_graph) em_node_release(n);
    return 0;
}

/* _C._run_backward(outputs, grad_outputs, keep_graph, create_graph, inputs,
 *                  allow_unused, accumulate) -> tuple of input grads or None */
PyObject *em_run_backward(PyObject *m, PyObject *args, PyObject *kw) {
    const int autocast_suspend = em_autocast_suspend; /* restored on every exit */
    PyObject *outs, *grads, *inputs;
    int keep_graph, create_graph, allow_unused, accumulate;
    if (!PyArg_ParseTuple(args, "O!O!ppOpp:_run_backward", &PyTuple_Type, &outs, &PyTuple_Type, &grads,
                          &keep_graph, &create_graph, &inputs, &allow_unused, &accumulate))
        return NULL;
    Py_ssize_t nroots = PyTuple_GET_SIZE(outs), ncaps = inputs == Py_None ? 0 : PyTuple_GET_SIZE(inputs);
    if (PyTuple_GET_SIZE(grads) != nroots) {
        PyErr_Format(PyExc_RuntimeError, "got %zd tensors and %zd gradients", nroots, PyTuple_GET_SIZE(grads));
        return NULL;
    }
    Graph g = {0};
    EmEdge *roots = PyMem_Calloc(nroots + 1, sizeof(EmEdge));
    EmTensor **root_grads = PyMem_Calloc(nroots + 1, sizeof(EmTensor *));
    Capture *caps = PyMem_Calloc(ncaps + 1, sizeof(Capture));
    EmTensor **captured = PyMem_Calloc(ncaps + 1, sizeof(EmTensor *));
    EmTensor **gi = NULL;
    int *heap = NULL, nheap = 0;
    PyObject *result = NULL;
    bool prev_grad = em_grad_enabled();
    if (!roots || !root_grads || !caps || !captured) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nroots; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i), *gr = PyTuple_GET_ITEM(grads, i);
        if (!em_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "backward(): outputs must be Tensors, got %.100s", Py_TYPE(o)->tp_name);
            goto done;
        }
        EmTensor *t = (EmTensor *)o;
        if (!em_requires_grad(t)) {
            PyErr_Format(PyExc_RuntimeError,
                         "element %zd of tensors does not require grad and does not have a grad_fn", i);
            goto done;
        }
        if (em_gradient_edge(t, &roots[i]) < 0) goto done;
        if (gr == Py_None) {
            if (t->numel != 1) {
                PyErr_SetString(PyExc_RuntimeError, "grad can be implicitly created only for scalar outputs");
                goto done;
            }
            if (!em_is_float(t->dtype)) {
                PyErr_Format(PyExc_RuntimeError,
                             "grad can be implicitly created only for real scalar outputs but got %s",
                             em_dtype_name((EmDType)t->dtype));
                goto done;
            }
            EmScalar one = {'i', {1}};
            root_grads[i] = em_empty(t->ndim, t->sizes, (EmDType)t->dtype, em_device(t));
            if (!root_grads[i] || em_fill_(root_grads[i], one) < 0) goto done;
        } else {
            if (!em_is_tensor(gr)) {
                PyErr_Format(PyExc_TypeError, "gradient must be a Tensor or None, got %.100s", Py_TYPE(gr)->tp_name);
                goto done;
            }
            EmTensor *gt = (EmTensor *)gr;
            if (gt->ndim != t->ndim || memcmp(gt->sizes, t->sizes, t->ndim * sizeof(int64_t))) {
                char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
                PyErr_Format(PyExc_RuntimeError,
                             "Mismatch in shape: grad_output[%zd] has a shape of ember.Size(%s) and "
                             "output[%zd] has a shape of ember.Size(%s).", i,
                             em_shape_str(gt->ndim, gt->sizes, a, sizeof a), i,
                             em_shape_str(t->ndim, t->sizes, b, sizeof b));
                goto done;
            }
            root_grads[i] = (EmTensor *)Py_NewRef(gt);
        }
    }
    for (Py_ssize_t i = 0; i < ncaps; i++) {
        PyObject *o = PyTuple_GET_ITEM(inputs, i);
        if (!em_is_tensor(o) || !em_requires_grad((EmTensor *)o)) {
            PyErr_SetString(PyExc_RuntimeError, "One of the differentiated Tensors does not require grad");
            goto done;
        }
        EmEdge e;
        if (em_gradient_edge((EmTensor *)o, &e) < 0) goto done;
        caps[i] = (Capture){e.fn, e.input_nr, (int)i};
        Py_DECREF(e.fn); /* the tensor keeps its grad_fn / accumulator alive */
    }

    if (discover(&g, roots, (int)nroots, caps, (int)ncaps, ncaps == 0) < 0) goto done;
    heap = PyMem_Malloc((g.n + 1) * sizeof(int));
    if (!heap) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nroots; i++) {
        int ti = graph_find(&g, roots[i].fn);
        Task *t = &g.tasks[ti];
        if (accumulate_into(&t->buf[roots[i].input_nr], root_grads[i]) < 0) {
            root_grads[i] = NULL;
            goto done;
        }
        root_grads[i] = NULL;
    }
    for (Py_ssize_t i = 0; i < nroots; i++) {
        int ti = graph_find(&g, roots[i].fn);
        Task *t = &g.tasks[ti];
        if (t->needed && t->deps == 0) {
            t->deps = -1; /* queued */
            heap_push(heap, &nheap, g.tasks, ti);
        }
    }
    em_set_grad_enabled(create_graph);
    em_autocast_suspend++; /* Note [autocast]: backward formulas run in their inputs' dtypes */
    while (nheap > 0) {
        int ti = heap_pop(heap, &nheap, g.tasks);
        Task *t = &g.tasks[ti];
        EmNode *n = t->node;
        PyMem_Free(gi);
        gi = PyMem_Calloc(n->num_next > 0 ? n->num_next : 1, sizeof(EmTensor *));
        if (!gi) {
            PyErr_NoMemory();
            goto done;
        }
        if (execute(t, keep_graph, create_graph, accumulate, caps, (int)ncaps, captured, gi) < 0) {
            for (int k = 0; k < n->num_next; k++) Py_XDECREF(gi[k]);
            goto done;
        }
        for (int j = 0; j < n->num_outputs; j++) Py_CLEAR(t->buf[j]);
        for (int k = 0; k < n->num_next; k++) {
            EmNode *child = n->next[k].fn;
            if (!child) {
                Py_XDECREF(gi[k]);
                continue;
            }
            int ci = graph_find(&g, child);
            Task *ct = &g.tasks[ci];
            if (!ct->needed) {
                Py_XDECREF(gi[k]);
                continue;
            }
            if (gi[k] && accumulate_into(&ct->buf[n->next[k].input_nr], gi[k]) < 0) {
                for (int r = k + 1; r < n->num_next; r++) Py_XDECREF(gi[r]);
                goto done;
            }
            if (--ct->deps == 0) {
                ct->deps = -1;
                heap_push(heap, &nheap, g.tasks, ci);
            }
        }
    }
    em_set_grad_enabled(prev_grad);
    em_autocast_suspend = autocast_suspend;

    if (ncaps == 0) {
        result = Py_NewRef(Py_None);
    } else if (accumulate) { /* backward(inputs=[non-leaf ...]): their .grad */
        for (Py_ssize_t i = 0; i < ncaps; i++) {
            EmTensor *t = (EmTensor *)PyTuple_GET_ITEM(inputs, i);
            if (!t->grad_fn || !captured[i]) continue;
            if (!t->grad) {
                t->grad = (PyObject *)captured[i];
                captured[i] = NULL;
            } else {
                PyObject *r = em_binary_op(EM_OP_add, t->grad, (PyObject *)captured[i], (EmTensor *)t->grad);
                if (!r) goto done;
                Py_DECREF(r);
            }
        }
        result = Py_NewRef(Py_None);
    } else {
        result = PyTuple_New(ncaps);
        for (Py_ssize_t i = 0; result && i < ncaps; i++) {
            if (!captured[i] && !allow_unused) {
                Py_CLEAR(result);
                PyErr_SetString(PyExc_RuntimeError,
                                "One of the differentiated Tensors appears to not have been used in "
                                "the graph. Set allow_unused=True if this is the desired behavior.");
                break;
            }
            PyTuple_SET_ITEM(result, i, captured[i] ? (PyObject *)captured[i] : Py_NewRef(Py_None));
            captured[i] = NULL;
        }
    }
done:
    em_set_grad_enabled(prev_grad);
    em_autocast_suspend = autocast_suspend;
    for (Py_ssize_t i = 0; i < nroots; i++) {
        if (roots) Py_XDECREF(roots[i].fn);
        if (root_grads) Py_XDECREF(root_grads[i]);
    }
    for (Py_ssize_t i = 0; captured && i < ncaps; i++) Py_XDECREF(captured[i]);
    PyMem_Free(roots);
    PyMem_Free(root_grads);
    PyMem_Free(caps);
    PyMem_Free(captured);
    PyMem_Free(heap);
    PyMem_Free(gi);
    graph_free(&g);
    return result;
}
