/* record.c — building the graph as ops run (Note [autograd graph]).
 *
 * em_call_run (ops/dispatch.c) calls em_autograd_precheck before an op writes
 * into a tensor (torch's errors for in-place writes to leaves, out= with
 * grad) and em_autograd_record after it ran: one node per differentiable op
 * call with an input that requires grad, edges to the producers of its
 * inputs, the tensors its formula reads saved with their versions.
 *
 * Note [in-place on views]: writing in place into a view of a tensor that
 * takes part in autograd rewrites the base's history: the base gets a
 * CopySlices node (its old gradient, with the view's region replaced by what
 * the op's backward says) and the view becomes an as_strided view of the
 * new base — torch's design. CopySlices and that view node are computed
 * with internal C copies, so gradients through them are not themselves
 * differentiable (create_graph through in-place writes on views).
 */
#include "../ember.h"

/* Tensor arguments of a call in parameter order, skipping out= (NULL where
 * a number or None was passed), the tensors of a TensorList in place.
 * With ts NULL, only counts them. */
static int tensor_args(const EmOpDef *def, EmCall *c, EmTensor **ts) {
    int k = 0;
    for (int i = 0; i < def->sig.nparams; i++) {
        EmArgType ty = def->sig.params[i].type;
        if (i == def->sig.out_index) continue;
        if (ty == EM_ARG_TENSOR_LIST && c->args[i] != Py_None) {
            PyObject *seq = c->args[i];
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq); j++, k++)
                if (ts) ts[k] = (EmTensor *)PySequence_Fast_ITEMS(seq)[j];
        } else if (ty == EM_ARG_TENSOR || ty == EM_ARG_TENSOR_OR_NUMBER) {
            if (ts) ts[k] = em_is_tensor(c->args[i]) ? (EmTensor *)c->args[i] : NULL;
            k++;
        }
    }
    return k;
}

/* Whether a tensor argument (out= skipped) requires grad, without building
 * the inputs array: the answer of most calls is no, and they stop here. */
static bool any_input_requires_grad(const EmOpDef *def, EmCall *c) {
    for (int i = 0; i < def->sig.nparams; i++) {
        EmArgType ty = def->sig.params[i].type;
        PyObject *a = c->args[i];
        if (i == def->sig.out_index) continue;
        if (ty == EM_ARG_TENSOR_LIST && a != Py_None) {
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(a); j++)
                if (em_requires_grad((EmTensor *)PySequence_Fast_ITEMS(a)[j])) return true;
        } else if ((ty == EM_ARG_TENSOR || ty == EM_ARG_TENSOR_OR_NUMBER) && em_is_tensor(a) &&
                   em_requires_grad((EmTensor *)a)) {
            return true;
        }
    }
    return false;
}

/* The call's tensor arguments in `small` or, for long lists (cat of many
 * tensors), a PyMem block the caller frees when it is not `small`. */
#define SMALL_INPUTS 8
static EmTensor **inputs_of(const EmOpDef *def, EmCall *c, EmTensor **small, int *nin) {
    int k = tensor_args(def, c, NULL);
    EmTensor **ts = k <= SMALL_INPUTS ? small : PyMem_Malloc((size_t)k * sizeof(EmTensor *));
    if (!ts) {
        PyErr_NoMemory();
        return NULL;
    }
    *nin = tensor_args(def, c, ts);
    return ts;
}

static void inputs_free(EmTensor **ts, EmTensor **small) {
    if (ts != small) PyMem_Free(ts);
}

static EmOpId op_id(const EmOpDef *def) { return (EmOpId)(def - em_op_defs); }

static EmTensor *root_base(EmTensor *t) {
    return t->is_view && t->view_base ? (EmTensor *)t->view_base : NULL;
}

void em_autograd_pre_clear(EmAutogradPre *pre) {
    Py_CLEAR(pre->saved_self);
    em_meta_clear(&pre->self_meta);
}

/* In-place view ops (x.squeeze_(), t_, transpose_, ...) change only the
 * tensor's geometry, writing no data: on a view they get their own node as
 * torch's, not CopySlices on the base (whose shape the node's is not). */
static bool changes_only_geometry(EmOpId op) { return em_op_defs[op].tags & EM_TAG_GEOMETRY; }

/* torch forbids writing in place into an autograd.Function output that is an
 * input returned as-is or a view made inside forward: the view+inplace
 * rewrite would bypass the custom backward. Function.apply lists those
 * outputs in ctx._view_outputs (python/ember/autograd/function.py). */
static int check_custom_function_view(EmTensor *t) {
    EmNode *n = (EmNode *)t->grad_fn;
    if (!n || n->kind != EM_NODE_PYTHON || !n->ctx) return 0;
    PyObject *views = PyObject_GetAttrString(n->ctx, "_view_outputs");
    if (!views) {
        PyErr_Clear();
        return 0;
    }
    PyObject *nr = PyLong_FromLong(t->output_nr);
    int hit = nr ? PySequence_Contains(views, nr) : -1;
    Py_XDECREF(nr);
    Py_DECREF(views);
    if (hit <= 0) return hit;
    PyObject *cls = PyObject_GetAttrString(n->ctx, "_cls");
    PyObject *name = cls ? PyObject_GetAttrString(cls, "__name__") : NULL;
    Py_XDECREF(cls);
    if (!name) return -1;
    PyErr_Format(PyExc_RuntimeError,
                 "Output %d of %U is a view and is being modified inplace. This view was created inside a "
                 "custom Function (or because an input was returned as-is) and the autograd logic to handle "
                 "view+inplace would override the custom backward associated with the custom Function, "
                 "leading to incorrect gradients. This behavior is forbidden. You can fix this by cloning the "
                 "output of the custom Function.", (int)t->output_nr, name);
    Py_DECREF(name);
    return -1;
}

int em_autograd_precheck(const EmOpDef *def, EmCall *c, EmAutogradPre *pre) {
    EmOpId op = op_id(def);
    if (!c->out && !c->inplace && !def->writes_self) return 0; /* nothing written: nothing to check */
    bool any = any_input_requires_grad(def, c);
    if (c->out && !c->inplace) {
        if (em_derivatives[op].fn && (any || em_requires_grad(c->out))) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s(): functions with out=... arguments don't support automatic "
                         "differentiation, but one of the arguments requires grad.", def->name);
            return -1;
        }
        return 0;
    }
    if (!c->inplace && !def->writes_self) return 0;
    if (def->tags & EM_TAG_DETACHES) return 0; /* detach_ only leaves the graph */
    EmTensor *target = (EmTensor *)c->args[0];
    if (target->is_inference && !em_inference_mode()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Inplace update to inference tensor outside InferenceMode is not allowed.");
        return -1;
    }
    if (check_custom_function_view(target) < 0) return -1;
    if (target->requires_grad && !target->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a leaf Variable that requires grad is being used in an in-place operation.");
        return -1;
    }
    EmTensor *base = root_base(target);
    if (base && base->requires_grad && !base->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a view of a leaf Variable that requires grad is being used in an in-place "
                        "operation.");
        return -1;
    }
    bool tracked = any || (base && em_requires_grad(base));
    if (!tracked) return 0;
    /* self's shape before the write (in-place view ops change it) and, when
     * the formula reads self, a copy of its value before it is overwritten */
    if (em_meta_set(&pre->self_meta, target) < 0) return -1;
    if (changes_only_geometry(op) && target->is_view) {
        /* the node's edge is the view's history before its geometry changes (an
         * alias keeps it: a later refresh would describe the new geometry) */
        if (em_view_refresh(target) < 0) return -1;
        EmTensor *alias = em_detach(target);
        if (!alias) return -1;
        alias->grad_fn = Py_XNewRef(target->grad_fn);
        alias->output_nr = target->output_nr;
        pre->saved_self = alias;
    } else if (em_derivatives[op].saves & (EM_SAVE_IN(0) | EM_SAVE_ALL_IN)) {
        if (em_view_refresh(target) < 0) return -1;
        EmTensor *copy = em_clone(target);
        if (!copy) return -1;
        copy->grad_fn = Py_XNewRef(target->grad_fn);
        copy->output_nr = target->output_nr;
        pre->saved_self = copy;
    }
    return 0;
}

/* The call's arguments for ARG(i): tensors as None, except one-element
 * tensors given for an int / number / shape parameter (cat(xs, dim=tensor(1))),
 * which become that number. */
static PyObject *args_without_tensors(const EmOpDef *def, EmCall *c) {
    PyObject *t = PyTuple_New(def->sig.nparams);
    for (int i = 0; t && i < def->sig.nparams; i++) {
        PyObject *a = c->args[i] ? c->args[i] : Py_None;
        EmArgType ty = def->sig.params[i].type;
        bool scalar = ty == EM_ARG_INT || ty == EM_ARG_NUMBER || ty == EM_ARG_FLOAT || ty == EM_ARG_INTLIST;
        if (scalar && em_is_tensor(a) && ((EmTensor *)a)->numel == 1) {
            if (!(a = em_tensor_item((EmTensor *)a))) {
                Py_DECREF(t);
                return NULL;
            }
            PyTuple_SET_ITEM(t, i, a);
            continue;
        }
        /* an `object` parameter keeps its tensor: x[mask]'s key is needed by the formula */
        bool keep = ty == EM_ARG_OBJECT;
        PyTuple_SET_ITEM(t, i, Py_NewRef(em_is_tensor(a) && !keep ? Py_None : a));
    }
    return t;
}

/* Geometry block: ndim, sizes, strides, offset. */
static int64_t *geom_put(int64_t *p, const EmTensor *t) {
    *p++ = t->ndim;
    for (int d = 0; d < t->ndim; d++) *p++ = t->sizes[d];
    for (int d = 0; d < t->ndim; d++) *p++ = t->strides[d];
    *p++ = t->offset;
    return p;
}

/* The view/base geometry below is in elements of one size: a view whose
 * elements differ in size from its base's (view_as_real, view_as_complex,
 * .real / .imag, view(dtype)) cannot be replayed as an as_strided view, so
 * an in-place change through one (or to its base, when the view is used
 * after) under autograd is refused rather than given a wrong gradient. */
static int check_view_replayable(const EmTensor *view, const EmTensor *base) {
    if (em_itemsize(view->dtype) == em_itemsize(base->dtype)) return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "ember's autograd cannot follow an in-place change through a %s view of a %s tensor "
                 "(view_as_real, view_as_complex, .real/.imag or view(dtype) with another element size) "
                 "that requires grad; clone() the view, or write out of place",
                 em_dtype_name((EmDType)view->dtype), em_dtype_name((EmDType)base->dtype));
    return -1;
}

/* Note [set_ under autograd]: set_ points a tensor at other data, which has
 * no derivative. As in torch, the tensor's history becomes a node that raises
 * "derivative for set_ is not implemented" when backward reaches it, and so
 * does a view of it regenerated afterwards: the view still addresses the old
 * storage, so replaying it as an as_strided view of the base would read and
 * write outside the base's gradient. The node is a COPY_SLICES node without
 * geometry (engine.c run_copy_slices raises for it). */
int em_history_without_derivative(EmTensor *t, const char *node_name) {
    EmNode *n = em_node_new(EM_NODE_COPY_SLICES, node_name, 1, 1);
    if (!n) return -1;
    t->version_seen = em_version(t); /* the edge is to t's history as it is, not a refreshed one */
    if (em_gradient_edge(t, &n->next[0]) < 0 || em_meta_set(&n->in_meta[0], t) < 0 ||
        em_meta_set(&n->out_meta[0], t) < 0) {
        Py_DECREF(n);
        return -1;
    }
    Py_XSETREF(t->grad_fn, (PyObject *)n);
    t->output_nr = 0;
    return 0;
}

/* The view as an as_strided view of its base's current history: a node
 * with the base/view geometry and no inner op (engine.c run_copy_slices). */
static int set_view_node(EmTensor *view, EmTensor *base) {
    if (view->storage != base->storage) return em_history_without_derivative(view, "AsStridedBackward0");
    if (check_view_replayable(view, base) < 0) return -1;
    EmNode *vn = em_node_new(EM_NODE_COPY_SLICES, "AsStridedBackward0", 1, 1);
    if (!vn) return -1;
    vn->view_geom = PyMem_Malloc((4 + 2 * (size_t)(base->ndim + view->ndim)) * sizeof(int64_t));
    if (!vn->view_geom) {
        Py_DECREF(vn);
        PyErr_NoMemory();
        return -1;
    }
    geom_put(geom_put(vn->view_geom, base), view);
    if (em_gradient_edge(base, &vn->next[0]) < 0 || em_meta_set(&vn->in_meta[0], base) < 0 ||
        em_meta_set(&vn->out_meta[0], view) < 0) {
        Py_DECREF(vn);
        return -1;
    }
    Py_XSETREF(view->grad_fn, (PyObject *)vn);
    view->output_nr = 0;
    view->version_seen = em_version(view);
    return 0;
}

/* Note [stale views]: torch regenerates a view's grad_fn when its data was
 * written in place after the grad_fn was recorded (through the base or
 * another view), so gradients see the write. */
int em_view_refresh(EmTensor *t) {
    if (!t->is_view || !t->grad_fn || t->version_seen == em_version(t)) return 0;
    EmTensor *base = root_base(t);
    if (!base || !em_requires_grad(base)) return 0;
    return set_view_node(t, base);
}

/* Note [in-place on views]: base gets CopySlices around op node n; the
 * view becomes an as_strided view of the new base. */
static int rebase_view(EmTensor *view, EmNode *n) {
    EmTensor *base = (EmTensor *)view->view_base;
    if (check_view_replayable(view, base) < 0) return -1;
    EmNode *cs = em_node_new(EM_NODE_COPY_SLICES, "CopySlices", n->num_next, 1);
    if (!cs) return -1;
    int64_t *geom = PyMem_Malloc((4 + 4 * (size_t)(base->ndim + view->ndim)) * sizeof(int64_t));
    if (!geom) {
        PyErr_NoMemory();
        goto fail;
    }
    geom_put(geom_put(geom, base), view);
    cs->view_geom = geom;
    if (em_gradient_edge(base, &cs->next[0]) < 0 || em_meta_set(&cs->in_meta[0], base) < 0 ||
        em_meta_set(&cs->out_meta[0], base) < 0)
        goto fail;
    for (int i = 1; i < n->num_next; i++) { /* the op's other inputs are CopySlices' too; n keeps
                                                 * its edges so its formula knows what is needed */
        cs->next[i] = n->next[i];
        Py_XINCREF(cs->next[i].fn);
        if (n->in_meta[i].defined) {
            EmMeta *src = &n->in_meta[i];
            cs->in_meta[i] = *src;
            if (src->big) { /* deep copy the large-rank sizes */
                cs->in_meta[i].big = PyMem_Malloc(src->ndim * sizeof(int64_t));
                if (!cs->in_meta[i].big) {
                    PyErr_NoMemory();
                    goto fail;
                }
                memcpy(cs->in_meta[i].big, src->big, src->ndim * sizeof(int64_t));
            }
        }
    }
    cs->ctx = Py_NewRef((PyObject *)n);
    Py_XSETREF(base->grad_fn, Py_NewRef((PyObject *)cs));
    base->output_nr = 0;

    base->version_seen = em_version(base);
    /* the view, regenerated from the new base */
    if (set_view_node(view, base) < 0) goto fail;
    Py_DECREF(cs);
    return 0;
fail:
    Py_DECREF(cs);
    return -1;
}

/* Whether the formula keeps output j: all of them (EM_SAVE_OUT), or those
 * after the first (EM_SAVE_AUX_OUT: a norm's mean and rstd, cross-entropy's
 * lse), so that the result itself may be written in place before backward,
 * as in torch (transformers' Trainer scales its loss with `loss *= ...`;
 * ResNets add the shortcut into a BatchNorm's output). */
static bool saves_out(unsigned saves, int j) {
    return (saves & EM_SAVE_OUT) || ((saves & EM_SAVE_AUX_OUT) && j > 0);
}

static bool is_input(const EmTensor *t, EmTensor **ins, int nin) {
    for (int i = 0; i < nin; i++)
        if (ins[i] == t) return true;
    return false;
}

static PyObject *record(const EmOpDef *def, EmCall *c, PyObject *result, EmAutogradPre *pre,
                        EmTensor **ins, int nin) {
    EmTensor *saved_self = pre->saved_self;
    EmOpId op = op_id(def);
    const EmDerivative *d = &em_derivatives[op];
    EmTensor *one_out[1], **outs = one_out;
    bool any = saved_self != NULL, inplace = c->inplace || def->writes_self;
    for (int i = 0; i < nin; i++) any |= ins[i] && em_requires_grad(ins[i]);
    /* an in-place write into a view changes its base's history (Note [in-place on views]) */
    if (inplace && nin > 0 && ins[0] && root_base(ins[0]) && em_requires_grad(root_base(ins[0]))) any = true;
    if (!any || (c->out && !c->inplace)) return result;
    if (def->tags & EM_TAG_DETACHES) return result; /* detach_: nothing to record */
    if (!d->fn && inplace && em_in_place_derivatives[op].fn) d = &em_in_place_derivatives[op];
    if (!d->fn) return result;             /* not differentiable: outputs stay outside the graph */
    for (int i = 0; i < nin; i++) {
        if (ins[i] && ins[i]->is_inference && em_requires_grad(ins[i])) goto inference;
    }

    int nout = 0;
    if (em_is_tensor(result)) {
        outs[nout++] = (EmTensor *)result;
    } else if (PyTuple_Check(result)) { /* unbind, split, max(dim): every item a tensor */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(result); i++)
            if (!em_is_tensor(PyTuple_GET_ITEM(result, i))) return result;
        outs = (EmTensor **)&PyTuple_GET_ITEM(result, 0);
        nout = (int)PyTuple_GET_SIZE(result);
    } else {
        return result;
    }
    if (result == (PyObject *)ins[0] && !inplace) {
        /* an op that returned its input unchanged (contiguous() of a contiguous
         * tensor, positive): nothing happened that needs a node */
        return result;
    }

    EmNode *n = em_node_new(EM_NODE_OP, em_derivative_node_name(d, c, result),
                            nin, nout);
    if (!n) goto fail;
    n->op = op;
    n->backward = d->fn;
    for (int i = 0; i < nin; i++) {
        EmTensor *t = i == 0 && saved_self ? saved_self : ins[i];
        if (!t) continue;
        if (em_requires_grad(t) && em_gradient_edge(t, &n->next[i]) < 0) goto fail_node;
        if (i == 0 && inplace && pre->self_meta.defined) { /* self's shape before the write */
            n->in_meta[0] = pre->self_meta;
            memset(&pre->self_meta, 0, sizeof(EmMeta));
        } else if (em_meta_set(&n->in_meta[i], t) < 0) {
            goto fail_node;
        }
        bool save = (d->saves & EM_SAVE_ALL_IN) || (i < 29 && (d->saves & EM_SAVE_IN(i)));
        if (save && em_saved_set(&n->saved[i], t, n, false) < 0) goto fail_node;
        /* an input sharing the written tensor's counter was read at the version before
         * this op's own bump (h.mul_(h.detach()): a later write must still be caught) */
        if (save && inplace && t != saved_self && ins[0] && em_version_slot(t) == em_version_slot(ins[0]))
            n->saved[i].version--;
    }
    if (!(n->args = args_without_tensors(def, c))) goto fail_node;
    if (d->saves & (EM_SAVE_OUT | EM_SAVE_AUX_OUT)) {
        n->saved_out = PyMem_Calloc(nout, sizeof(EmSaved));
        if (!n->saved_out) {
            PyErr_NoMemory();
            goto fail_node;
        }
    }
    for (int j = 0; j < nout; j++) {
        EmTensor *t = outs[j];
        /* an input handed back as it is (broadcast_tensors, as torch): not this node's output */
        if (outs != one_out && !inplace && is_input(t, ins, nin)) continue;
        if (!em_is_float(t->dtype)) { /* indices, masks: not differentiable, but max(dim)'s
                                       * formula reads its indices */
            if (saves_out(d->saves, j) && em_saved_set(&n->saved_out[j], t, n, true) < 0) goto fail_node;
            continue;
        }
        if (em_meta_set(&n->out_meta[j], t) < 0) goto fail_node;
        /* a view that set_ pointed at other data is a tensor of its own (Note [set_ under autograd]) */
        if (inplace && j == 0 && root_base(t) && root_base(t)->storage == t->storage && !changes_only_geometry(op) &&
            (em_requires_grad(root_base(t)) || em_requires_grad(t) || any)) {
            if (rebase_view(t, n) < 0) goto fail_node;
        } else {
            Py_XSETREF(t->grad_fn, Py_NewRef((PyObject *)n));
            t->output_nr = j;
            t->version_seen = em_version(t);
        }
        if (saves_out(d->saves, j) && em_saved_set(&n->saved_out[j], t, n, true) < 0) goto fail_node;
    }
    Py_DECREF(n);
    return result;
inference:
    PyErr_SetString(PyExc_RuntimeError,
                    "Inference tensors cannot be saved for backward. To work around you can make a "
                    "clone to get a normal tensor and use it in autograd.");
    goto fail;
fail_node:
    Py_DECREF(n);
fail:
    Py_DECREF(result);
    return NULL;
}

PyObject *em_autograd_record(const EmOpDef *def, EmCall *c, PyObject *result, EmAutogradPre *pre) {
    if (!pre->saved_self && !any_input_requires_grad(def, c)) {
        /* only an in-place write into a view of a graph tensor records without
         * a tracked input (Note [in-place on views]) */
        if (!c->inplace && !def->writes_self) return result;
        EmTensor *self = em_is_tensor(c->args[0]) ? (EmTensor *)c->args[0] : NULL; /* ins[0] below */
        if (self && !(root_base(self) && em_requires_grad(root_base(self)))) return result;
    }
    EmTensor *small[SMALL_INPUTS], **ins;
    int nin = 0;
    if (!(ins = inputs_of(def, c, small, &nin))) {
        Py_DECREF(result);
        return NULL;
    }
    PyObject *r = record(def, c, result, pre, ins, nin);
    inputs_free(ins, small);
    return r;
}
