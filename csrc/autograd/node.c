/* node.c — autograd graph nodes (Note [autograd graph] in ember.h): their
 * Python type (one subclass per backward kind, named as torch names them:
 * MulBackward0, AccumulateGrad, ...), lifetime, saved tensors with their
 * version checks, leaves' AccumulateGrad nodes, and the Python-visible
 * attributes (name(), next_functions, hooks, metadata). */
#include "../ember.h"
#include <stddef.h>

static int64_t next_sequence_nr;

/* -------------------------------------------------------------- meta */

int em_meta_set(EmMeta *m, const EmTensor *t) {
    em_meta_clear(m);
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->defined = true;
    m->device = em_device(t);
    if (t->ndim > EM_SMALL_DIMS) {
        m->big = PyMem_Malloc(t->ndim * sizeof(int64_t));
        if (!m->big) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(m->big, t->sizes, t->ndim * sizeof(int64_t));
    } else {
        memcpy(m->sizes, t->sizes, t->ndim * sizeof(int64_t));
    }
    return 0;
}

void em_meta_clear(EmMeta *m) {
    PyMem_Free(m->big);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------- saved */

int em_saved_set(EmSaved *s, EmTensor *t, EmNode *owner, bool is_output) {
    (void)owner;
    em_saved_clear(s);
    if (t->is_inference) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Inference tensors cannot be saved for backward. To work around you can "
                        "make a clone to get a normal tensor and use it in autograd.");
        return -1;
    }
    if (!is_output && em_view_refresh(t) < 0) return -1;
    PyObject *hooks = em_saved_hooks_current();
    if (hooks) { /* saved_tensors_hooks: keep what pack_hook makes of the tensor instead */
        PyObject *unpack = PyTuple_GET_ITEM(hooks, 1);
        Py_INCREF(unpack); /* the hooks may pop themselves */
        s->packed = PyObject_CallOneArg(PyTuple_GET_ITEM(hooks, 0), (PyObject *)t);
        if (!s->packed) {
            Py_DECREF(unpack);
            return -1;
        }
        s->unpack = unpack;
    } else {
        if (PyErr_Occurred()) return -1; /* hooks disabled while some are set */
        s->data = em_detach(t);
        if (!s->data) return -1;
    }
    s->version = em_version(t);
    s->output_nr = t->output_nr;
    if (is_output) {
        s->is_output = true;
    } else if (t->grad_fn) {
        s->grad_fn = (EmNode *)Py_NewRef(t->grad_fn);
        /* kept only to refuse it once detach_()ed; under hooks the packed value is all that is
         * kept, as torch: holding the tensor would keep alive the memory the hooks mean to free */
        if (!s->packed) s->original = (EmTensor *)Py_NewRef(t);
    } else if (t->requires_grad) {
        s->leaf = (EmTensor *)Py_NewRef(t);
    }
    return 0;
}

void em_saved_clear(EmSaved *s) {
    Py_CLEAR(s->data);
    Py_CLEAR(s->packed);
    Py_CLEAR(s->unpack);
    Py_CLEAR(s->leaf);
    Py_CLEAR(s->grad_fn);
    Py_CLEAR(s->original);
    s->is_output = false;
}

int em_node_released_error(void) {
    PyErr_SetString(PyExc_RuntimeError,
                    "Trying to backward through the graph a second time (or directly access "
                    "saved tensors after they have already been freed). Saved intermediate "
                    "values of the graph are freed when you call .backward() or "
                    "autograd.grad(). Specify retain_graph=True if you need to backward "
                    "through the graph a second time or if you need to access saved tensors "
                    "after calling backward.");
    return -1;
}

/* A detached copy of `data` with the graph position the saved tensor had
 * (its producer and output number). New reference. */
static EmTensor *reconnected(EmNode *n, EmSaved *s, EmTensor *data) {
    EmTensor *t = em_detach(data);
    if (!t) return NULL;
    EmNode *fn = s->is_output ? n : s->grad_fn;
    if (fn) {
        t->grad_fn = Py_NewRef((PyObject *)fn);
        t->output_nr = s->output_nr;
    }
    return t;
}

/* A slot saved under saved_tensors_hooks: unpack_hook(packed), reconnected to
 * the graph as the saved tensor was. No version check: what the hooks keep is
 * theirs (torch checks none either). */
static EmTensor *saved_unpack(EmNode *n, EmSaved *s) {
    if (PyErr_Occurred()) return NULL; /* a formula reading several slots: an earlier one failed */
    PyObject *r = PyObject_CallOneArg(s->unpack, s->packed);
    if (!r) return NULL;
    if (!em_is_tensor(r)) {
        PyErr_Format(PyExc_TypeError,
                     "Output of saved tensor unpack_hook expected to be a Tensor but got result of type %.100s",
                     Py_TYPE(r)->tp_name);
        Py_DECREF(r);
        return NULL;
    }
    if (s->leaf && ((EmTensor *)r)->storage == s->leaf->storage) { /* the leaf itself came back */
        Py_DECREF(r);
        return (EmTensor *)Py_NewRef(s->leaf);
    }
    EmTensor *t = reconnected(n, s, (EmTensor *)r);
    Py_DECREF(r);
    return t;
}

/* Note [saved tensor check]: a saved tensor is usable when its node was not
 * released, it was saved at all, its version is the one it had when saved,
 * and a saved non-leaf was not detach_()ed since. The engine runs this on
 * every slot before a formula runs, and each unpack runs it again. */
static int saved_check(EmNode *n, EmSaved *s) {
    if (n->released) return em_node_released_error();
    if (s->packed) return 0; /* saved_tensors_hooks: what the hooks keep is theirs to check */
    if (!s->data) {
        PyErr_SetString(PyExc_SystemError, "ember: backward formula read a tensor it did not save");
        return -1;
    }
    if (em_version(s->data) != s->version) {
        char shape[EM_SHAPE_BUF], producer[96] = "";
        EmNode *src = s->is_output ? n : s->grad_fn;
        if (src)
            snprintf(producer, sizeof producer, ", which is output %d of %s", s->output_nr,
                     em_node_name(src));
        PyErr_Format(PyExc_RuntimeError,
                     "one of the variables needed for gradient computation has been modified by "
                     "an inplace operation: [ember.%sTensor %s]%s, is at version %lld; expected version "
                     "%lld instead. Hint: the tensor was changed in place after this operation "
                     "saved it; clone() it before the in-place change.",
                     em_dtype_name((EmDType)s->data->dtype),
                     em_shape_str(s->data->ndim, s->data->sizes, shape, sizeof shape), producer,
                     (long long)em_version(s->data), (long long)s->version);
        return -1;
    }
    if (s->original && !s->original->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Trying to use a saved tensor that has been detached in-place, i.e. with "
                        ".detach_(). This is not supported, please use out-of-place `.detach()` instead");
        return -1;
    }
    return 0;
}

int em_node_check_saved(EmNode *n) {
    for (int i = 0; n->saved && i < n->num_next; i++)
        if (n->saved[i].data && saved_check(n, &n->saved[i]) < 0) return -1;
    for (int j = 0; n->saved_out && j < n->num_outputs; j++)
        if (n->saved_out[j].data && saved_check(n, &n->saved_out[j]) < 0) return -1;
    return 0;
}

EmTensor *em_saved_get(EmNode *n, EmSaved *s) {
    if (saved_check(n, s) < 0) return NULL;
    if (s->packed) return saved_unpack(n, s);
    if (s->leaf) return (EmTensor *)Py_NewRef(s->leaf);
    return reconnected(n, s, s->data);
}

/* --------------------------------------------------------- node type */

const char *em_node_name(const EmNode *n) {
    const char *full = Py_TYPE(n)->tp_name, *dot = strrchr(full, '.');
    return dot ? dot + 1 : full;
}

static PyObject *node_types; /* dict: name -> subclass of EmNodeType */

static PyTypeObject *node_type_for(const char *name) {
    PyObject *t = PyDict_GetItemString(node_types, name);
    if (t) return (PyTypeObject *)t;
    char qual[128];
    snprintf(qual, sizeof qual, "ember.autograd.graph.%s", name);
    /* the spec's name must outlive the type: keep a copy per type */
    char *keep = PyMem_Malloc(strlen(qual) + 1);
    if (!keep) return (PyTypeObject *)PyErr_NoMemory();
    strcpy(keep, qual);
    PyType_Slot slots[] = {{Py_tp_traverse, (void *)EmNodeType.tp_traverse},
                           {Py_tp_clear, (void *)EmNodeType.tp_clear},
                           {Py_tp_dealloc, (void *)EmNodeType.tp_dealloc},
                           {0, NULL}};
    PyType_Spec spec = {keep, 0, 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, slots};
    PyObject *bases = PyTuple_Pack(1, (PyObject *)&EmNodeType);
    if (!bases) return NULL;
    t = PyType_FromSpecWithBases(&spec, bases);
    Py_DECREF(bases);
    if (!t || PyDict_SetItemString(node_types, name, t) < 0) {
        Py_XDECREF(t);
        return NULL;
    }
    Py_DECREF(t); /* the dict keeps it */
    return (PyTypeObject *)t;
}

/* Type lookups by name happen for every recorded op: cache them by the
 * address of the (static) name string. */
#define TYPE_CACHE 512
static struct {
    const char *name;
    PyTypeObject *type;
} type_cache[TYPE_CACHE];

static PyTypeObject *cached_node_type(const char *name) {
    size_t h = ((uintptr_t)name >> 3) & (TYPE_CACHE - 1);
    for (int probe = 0; probe < 8; probe++, h = (h + 1) & (TYPE_CACHE - 1)) {
        if (type_cache[h].name == name) return type_cache[h].type;
        if (!type_cache[h].name) {
            PyTypeObject *t = node_type_for(name);
            if (t) {
                type_cache[h].name = name;
                type_cache[h].type = t;
            }
            return t;
        }
    }
    return node_type_for(name); /* crowded: fall back to the dict */
}

EmNode *em_node_new(EmNodeKind kind, const char *type_name, int num_next, int num_outputs) {
    PyTypeObject *type = cached_node_type(type_name);
    if (!type) return NULL;
    EmNode *n = (EmNode *)type->tp_alloc(type, 0); /* zero-filled, GC-tracked */
    if (!n) return NULL;
    n->kind = kind;
    n->sequence_nr = next_sequence_nr++;
    n->num_next = num_next;
    n->num_outputs = num_outputs;
    /* one block: edges, input metadata and saved inputs per input, metadata per output */
    size_t nn = num_next > 0 ? num_next : 1, no = num_outputs > 0 ? num_outputs : 1;
    char *block = PyMem_Calloc(1, nn * (sizeof(EmEdge) + sizeof(EmMeta) + sizeof(EmSaved)) + no * sizeof(EmMeta));
    if (!block) {
        Py_DECREF(n);
        return (EmNode *)PyErr_NoMemory();
    }
    n->next = (EmEdge *)block;
    n->in_meta = (EmMeta *)(block + nn * sizeof(EmEdge));
    n->saved = (EmSaved *)(block + nn * (sizeof(EmEdge) + sizeof(EmMeta)));
    n->out_meta = (EmMeta *)(block + nn * (sizeof(EmEdge) + sizeof(EmMeta) + sizeof(EmSaved)));
    return n;
}

/* Note [accumulator]: a leaf's AccumulateGrad node owns the leaf; the leaf
 * points back without owning, and the node clears that pointer when it
 * dies. Graph nodes reach the accumulator through their edges, so it lives
 * exactly as long as some graph can still send the leaf a gradient. */
EmNode *em_grad_accumulator(EmTensor *leaf) {
    if (leaf->grad_accumulator) return (EmNode *)Py_NewRef((PyObject *)leaf->grad_accumulator);
    EmNode *n = em_node_new(EM_NODE_ACCUMULATE, "AccumulateGrad", 0, 1);
    if (!n) return NULL;
    n->variable = (EmTensor *)Py_NewRef(leaf);
    if (em_meta_set(&n->out_meta[0], leaf) < 0) {
        Py_DECREF(n);
        return NULL;
    }
    leaf->grad_accumulator = n;
    return n;
}

int em_gradient_edge(EmTensor *t, EmEdge *e) {
    e->fn = NULL;
    e->input_nr = 0;
    if (em_view_refresh(t) < 0) return -1;
    if (t->grad_fn) {
        e->fn = (EmNode *)Py_NewRef(t->grad_fn);
        e->input_nr = t->output_nr;
    } else if (t->requires_grad) {
        e->fn = em_grad_accumulator(t);
        if (!e->fn) return -1;
    }
    return 0;
}

void em_node_release(EmNode *n) {
    if (n->kind == EM_NODE_COPY_SLICES && n->ctx) em_node_release((EmNode *)n->ctx);
    if (n->kind == EM_NODE_PYTHON && n->ctx) { /* the Function's saved tensors */
        PyObject *r = PyObject_CallMethod(n->ctx, "_release_saved", NULL);
        if (r) Py_DECREF(r); else PyErr_Clear();
    }
    /* Note [released node]: only a node that saved tensors counts as released
     * (torch lets a graph of save-nothing nodes run backward again); the
     * engine refuses to run a released node's formula at all, so formulas
     * never see the NULL of a freed input. */
    bool saved_any = n->kind == EM_NODE_PYTHON;
    for (int i = 0; i < n->num_next; i++) {
        saved_any |= em_saved_holds(&n->saved[i]);
        em_saved_clear(&n->saved[i]);
    }
    for (int i = 0; n->saved_out && i < n->num_outputs; i++) {
        saved_any |= em_saved_holds(&n->saved_out[i]);
        em_saved_clear(&n->saved_out[i]);
    }
    if (saved_any) n->released = true;
}

static int node_clear(EmNode *n) {
    for (int i = 0; n->next && i < n->num_next; i++) Py_CLEAR(n->next[i].fn);
    for (int i = 0; n->saved && i < n->num_next; i++) em_saved_clear(&n->saved[i]);
    for (int i = 0; n->saved_out && i < n->num_outputs; i++) em_saved_clear(&n->saved_out[i]);
    if (n->variable && n->variable->grad_accumulator == n) n->variable->grad_accumulator = NULL;
    Py_CLEAR(n->variable);
    Py_CLEAR(n->args);
    Py_CLEAR(n->ctx);
    Py_CLEAR(n->pre_hooks);
    Py_CLEAR(n->post_hooks);
    Py_CLEAR(n->tensor_hooks);
    Py_CLEAR(n->dict);
    return 0;
}

static void node_dealloc(EmNode *n) {
    PyTypeObject *type = Py_TYPE(n);
    PyObject_GC_UnTrack(n);
    /* a long chain of nodes frees each other recursively: the trashcan
     * defers deep frees so the C stack never overflows */
    Py_TRASHCAN_BEGIN(n, node_dealloc)
    if (n->weakrefs) PyObject_ClearWeakRefs((PyObject *)n);
    node_clear(n);
    for (int i = 0; n->in_meta && i < n->num_next; i++) em_meta_clear(&n->in_meta[i]);
    for (int i = 0; n->out_meta && i < n->num_outputs; i++) em_meta_clear(&n->out_meta[i]);
    PyMem_Free(n->next); /* the block holding in_meta, saved and out_meta too */
    PyMem_Free(n->saved_out);
    PyMem_Free(n->view_geom);
    type->tp_free((PyObject *)n);
    if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_DECREF(type);
    Py_TRASHCAN_END
}

static int visit_saved(EmSaved *s, visitproc visit, void *arg) {
    Py_VISIT(s->data);
    Py_VISIT(s->packed);
    Py_VISIT(s->unpack);
    Py_VISIT(s->leaf);
    Py_VISIT((PyObject *)s->grad_fn);
    Py_VISIT(s->original);
    return 0;
}

static int node_traverse(EmNode *n, visitproc visit, void *arg) {
    for (int i = 0; n->next && i < n->num_next; i++) Py_VISIT((PyObject *)n->next[i].fn);
    for (int i = 0; n->saved && i < n->num_next; i++) {
        int r = visit_saved(&n->saved[i], visit, arg);
        if (r) return r;
    }
    for (int i = 0; n->saved_out && i < n->num_outputs; i++) {
        int r = visit_saved(&n->saved_out[i], visit, arg);
        if (r) return r;
    }
    Py_VISIT(n->variable);
    Py_VISIT(n->args);
    Py_VISIT(n->ctx);
    Py_VISIT(n->pre_hooks);
    Py_VISIT(n->post_hooks);
    Py_VISIT(n->tensor_hooks);
    Py_VISIT(n->dict);
    if (Py_TYPE(n)->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_VISIT(Py_TYPE(n));
    return 0;
}

/* ------------------------------------------------------ Python side */

static PyObject *node_name(EmNode *n, PyObject *u) { return PyUnicode_FromString(em_node_name(n)); }

static PyObject *node_repr(EmNode *n) {
    return PyUnicode_FromFormat("<%s object at %p>", em_node_name(n), (void *)n);
}

static PyObject *node_next_functions(EmNode *n, void *c) {
    PyObject *t = PyTuple_New(n->num_next);
    for (int i = 0; t && i < n->num_next; i++) {
        PyObject *fn = n->next[i].fn ? (PyObject *)n->next[i].fn : Py_None;
        PyObject *pair = Py_BuildValue("(Oi)", fn, n->next[i].input_nr);
        if (!pair) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, pair);
    }
    return t;
}

static PyObject *node_variable(EmNode *n, void *c) {
    if (n->kind != EM_NODE_ACCUMULATE) {
        PyErr_SetString(PyExc_AttributeError, "only AccumulateGrad nodes have a 'variable'");
        return NULL;
    }
    return Py_NewRef(n->variable);
}

static PyObject **dict_slot(EmNode *n, int which) {
    return which == 0 ? &n->pre_hooks : which == 1 ? &n->post_hooks : &n->dict;
}

/* _pre_hooks / _post_hooks / metadata: dicts made on first use */
static PyObject *node_get_dict(EmNode *n, void *which) {
    PyObject **slot = dict_slot(n, (int)(intptr_t)which);
    if (!*slot && !(*slot = PyDict_New())) return NULL;
    return Py_NewRef(*slot);
}

static PyObject *node_seq(EmNode *n, void *c) { return PyLong_FromLongLong(n->sequence_nr); }

/* _tensor_hooks(output_nr): the dict of Tensor.register_hook hooks for one output */
PyObject *em_node_tensor_hooks(EmNode *n, int output_nr) {
    if (!n->tensor_hooks && !(n->tensor_hooks = PyDict_New())) return NULL;
    PyObject *key = PyLong_FromLong(output_nr);
    if (!key) return NULL;
    PyObject *d = PyDict_GetItemWithError(n->tensor_hooks, key);
    if (!d && !PyErr_Occurred()) {
        d = PyDict_New();
        if (d && PyDict_SetItem(n->tensor_hooks, key, d) < 0) Py_CLEAR(d);
        Py_XDECREF(d); /* the outer dict keeps it */
    }
    Py_DECREF(key);
    return Py_XNewRef(d);
}

static PyMethodDef node_methods[] = {
    {"name", (PyCFunction)node_name, METH_NOARGS, "The node's type name, e.g. 'MulBackward0'."},
    {NULL},
};

static PyGetSetDef node_getset[] = {
    {"next_functions", (getter)node_next_functions, NULL, NULL, NULL},
    {"variable", (getter)node_variable, NULL, NULL, NULL},
    {"_pre_hooks", (getter)node_get_dict, NULL, NULL, (void *)0},
    {"_post_hooks", (getter)node_get_dict, NULL, NULL, (void *)1},
    {"metadata", (getter)node_get_dict, NULL, NULL, (void *)2},
    {"_sequence_nr", (getter)node_seq, NULL, NULL, NULL},
    {NULL},
};

PyTypeObject EmNodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.autograd.graph.Node",
    .tp_basicsize = sizeof(EmNode),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_repr = (reprfunc)node_repr,
    .tp_methods = node_methods,
    .tp_getset = node_getset,
    .tp_weaklistoffset = offsetof(EmNode, weakrefs),
    .tp_doc = "A step of the autograd graph: turns output gradients into input gradients.",
};

int em_init_nodes(PyObject *m) {
    if (PyType_Ready(&EmNodeType) < 0) return -1;
    node_types = PyDict_New();
    if (!node_types) return -1;
    if (PyModule_AddObjectRef(m, "_node_types", node_types) < 0) return -1;
    return PyModule_AddObjectRef(m, "Node", (PyObject *)&EmNodeType);
}
