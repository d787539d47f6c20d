/* dispatch.c — the one dispatcher (DESIGN.md §3). Every op call, from
 * Python (python/bindings.c binds the arguments) or from C (em_op), runs
 * em_call_run: profiler -> autocast -> autograd's checks -> device choice ->
 * the impl -> the version bump -> the graph node. What it does for an op
 * comes from the op's row (Note [op row]). */
#include "../ember.h"

/* Run a bound call: autograd's checks, the impl, the version bump of the
 * tensor it wrote (Note [when versions change]) and the graph node (Note
 * [autograd graph]). Every way of calling an op ends here. */
static PyObject *call_run(EmCall *c);

EmAutogradHooks em_autograd_hooks; /* Note [autograd hooks] */

static PyObject *call_run_autocast(EmCall *c);

PyObject *em_call_run(EmCall *c) {
    if (EM_UNLIKELY(em_profiler_on)) return em_profiler_call(c, call_run_autocast); /* Note [profiler] */
    return call_run_autocast(c);
}

static PyObject *call_run_autocast(EmCall *c) {
    if (EM_LIKELY(!em_autocast_on) || em_autocast_suspend) return call_run(c);
    /* Note [autocast]: cast the arguments, then run with autocast suspended */
    EmCall cast = *c;
    PyObject *owned;
    if (em_autocast_args(&cast, &owned) < 0) {
        Py_XDECREF(owned);
        return NULL;
    }
    em_autocast_suspend++;
    PyObject *r = call_run(&cast);
    em_autocast_suspend--;
    Py_XDECREF(owned);
    return r;
}

/* Note [memory format]: torch's convolution, pooling, batch/group norm and
 * 2-d interpolation give channels-last results when an input is laid out
 * channels-last (convolution: its input or its weight; the backwards: the
 * saved input or indices), with channels-last's exact strides. The rows say
 * so with the FORMAT tag; their kernels compute in the contiguous layout, and
 * the dispatcher lays out each result of that rank as the inputs suggest.
 * Contiguous inputs, the common case, pay one stride walk per tensor. */
static EmMemoryFormat call_format(EmCall *c, int *rank) {
    const EmSignature *sig = &c->def->sig;
    for (int i = 0; i < sig->nparams; i++) {
        if (sig->params[i].type != EM_ARG_TENSOR || !em_is_tensor(c->args[i])) continue;
        EmMemoryFormat f = em_suggest_memory_format((EmTensor *)c->args[i]);
        if (f != EM_CONTIGUOUS_FORMAT) {
            *rank = ((EmTensor *)c->args[i])->ndim;
            return f;
        }
    }
    return EM_CONTIGUOUS_FORMAT;
}

static EmTensor *in_format(EmTensor *t, EmMemoryFormat f) {
    int64_t strides[EM_MAX_DIMS];
    em_memory_format_strides(f, t->ndim, t->sizes, strides);
    if (!memcmp(strides, t->strides, t->ndim * sizeof(int64_t))) return (EmTensor *)Py_NewRef(t);
    EmTensor *r = em_empty_strided(t->ndim, t->sizes, strides, (EmDType)t->dtype, em_device(t));
    if (r && !em_is_meta(t) && em_copy_(r, (PyObject *)t) < 0) Py_CLEAR(r);
    return r;
}

PyObject *em_result_in_format(EmCall *c, PyObject *r) {
    int rank = 0;
    EmMemoryFormat f = c->out ? EM_CONTIGUOUS_FORMAT : call_format(c, &rank); /* out= keeps its layout */
    if (f == EM_CONTIGUOUS_FORMAT) return r;
    if (em_is_tensor(r)) {
        if (((EmTensor *)r)->ndim != rank) return r;
        EmTensor *t = in_format((EmTensor *)r, f);
        Py_DECREF(r);
        return (PyObject *)t;
    }
    if (!PyTuple_Check(r)) return r;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(r); i++) { /* the impl's new tuple: its items may change */
        PyObject *item = PyTuple_GET_ITEM(r, i);
        if (!em_is_tensor(item) || ((EmTensor *)item)->ndim != rank) continue;
        EmTensor *t = in_format((EmTensor *)item, f);
        if (!t) {
            Py_DECREF(r);
            return NULL;
        }
        PyTuple_SET_ITEM(r, i, (PyObject *)t);
        Py_DECREF(item);
    }
    return r;
}

static PyObject *call_run(EmCall *c) {
    const EmOpDef *def = c->def;
    EmTensor *written = c->out ? c->out : def->writes_self ? (EmTensor *)c->args[0] : NULL;
    EmAutogradPre pre;
    memset(&pre, 0, sizeof pre);
    bool grad = em_grad_enabled();
    if (grad && em_autograd_hooks.precheck(def, c, &pre) < 0) {
        em_autograd_hooks.pre_clear(&pre);
        return NULL;
    }
    PyObject *r = EM_UNLIKELY(em_cuda_used | em_meta_used) ? em_device_dispatch(c) : def->impl(c);
    if (EM_UNLIKELY(def->tags & EM_TAG_FORMAT) && r && r != Py_NotImplemented) r = em_result_in_format(c, r);
    if (r && r != Py_NotImplemented) {
        if (written && !(def->tags & EM_TAG_DETACHES)) em_bump_version(written); /* detach_ writes no data */
        if (grad) r = em_autograd_hooks.record(def, c, r, &pre);
    }
    em_autograd_hooks.pre_clear(&pre);
    return r;
}

static PyObject *op_from_c(EmOpId id, bool inplace, int nargs, PyObject *const *args) {
    EmCall c;
    c.def = &em_op_defs[id];
    if (em_bind_args(&c.def->sig, NULL, args, nargs, NULL, &c) < 0) return NULL;
    c.inplace = inplace;
    c.reflected = false;
    c.out = inplace ? (EmTensor *)c.args[0] : NULL;
    PyObject *r = em_call_run(&c);
    Py_XDECREF(c.owned);
    Py_XDECREF(c.owned_tensor);
    return r;
}

PyObject *em_op(EmOpId id, int nargs, PyObject *const *args) { return op_from_c(id, false, nargs, args); }
PyObject *em_op_inplace(EmOpId id, int nargs, PyObject *const *args) { return op_from_c(id, true, nargs, args); }

EmTensor *em_op_t(EmOpId id, int nargs, PyObject *const *args) {
    PyObject *r = em_op(id, nargs, args);
    if (r && !em_is_tensor(r)) {
        Py_DECREF(r);
        PyErr_Format(PyExc_SystemError, "ember: %s did not return a tensor", em_op_defs[id].name);
        return NULL;
    }
    return (EmTensor *)r;
}

