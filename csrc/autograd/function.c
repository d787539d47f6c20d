/* function.c — the autograd entry points Python calls: running backward
 * (engine.c), hook dictionaries of tensors, and graph nodes for Python
 * autograd.Function subclasses (their ctx object runs the user's backward,
 * see ember/autograd/function.py). */
#include "../ember.h"

PyObject *em_node_tensor_hooks(EmNode *n, int output_nr);
int em_init_grad_mode(PyObject *m);
PyObject *em_differentiable_ops(PyObject *m, PyObject *u);
int em_init_nodes(PyObject *m);

/* The node type cache (node.c) keys on the name's address, so a Python
 * Function's name must outlive every node: one canonical copy per name,
 * kept for the life of the process. */
static const char *lasting_name(PyObject *name) {
    static PyObject *names;
    if (!names && !(names = PyDict_New())) return NULL;
    PyObject *canon = PyDict_SetDefault(names, name, name); /* borrowed */
    return canon ? PyUnicode_AsUTF8(canon) : NULL;
}

/* _C._python_node(ctx, name, inputs, outputs, non_differentiable) -> node:
 * edges to the tensor inputs that require grad; the differentiable tensor
 * outputs get the node as grad_fn. */
static PyObject *python_node(PyObject *m, PyObject *args) {
    PyObject *ctx, *inputs, *outputs, *nondiff, *name_obj;
    if (!PyArg_ParseTuple(args, "OUO!O!O:_python_node", &ctx, &name_obj, &PyTuple_Type, &inputs,
                          &PyTuple_Type, &outputs, &nondiff))
        return NULL;
    const char *name = lasting_name(name_obj);
    if (!name) return NULL;
    int nin = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); i++) nin += em_is_tensor(PyTuple_GET_ITEM(inputs, i));
    int nout = (int)PyTuple_GET_SIZE(outputs);
    EmNode *n = em_node_new(EM_NODE_PYTHON, name, nin, nout);
    if (!n) return NULL;
    n->ctx = Py_NewRef(ctx);
    for (Py_ssize_t i = 0, k = 0; i < PyTuple_GET_SIZE(inputs); i++) {
        PyObject *o = PyTuple_GET_ITEM(inputs, i);
        if (!em_is_tensor(o)) continue;
        EmTensor *t = (EmTensor *)o;
        if ((em_requires_grad(t) && em_gradient_edge(t, &n->next[k]) < 0) || em_meta_set(&n->in_meta[k], t) < 0)
            goto fail;
        k++;
    }
    for (int j = 0; j < nout; j++) {
        PyObject *o = PyTuple_GET_ITEM(outputs, j);
        if (!em_is_tensor(o)) continue;
        EmTensor *t = (EmTensor *)o;
        if (em_meta_set(&n->out_meta[j], t) < 0) goto fail;
        bool skip = false; /* identity, not ==: tensors compare elementwise */
        for (Py_ssize_t k = 0; PyTuple_Check(nondiff) && k < PyTuple_GET_SIZE(nondiff); k++)
            skip |= PyTuple_GET_ITEM(nondiff, k) == o;
        if (skip || !em_is_float(t->dtype)) continue;
        Py_XSETREF(t->grad_fn, Py_NewRef((PyObject *)n));
        t->output_nr = j;
        t->version_seen = em_version(t);
    }
    return (PyObject *)n;
fail:
    Py_DECREF(n);
    return NULL;
}

/* Tensor._backward_hooks(): where Tensor.register_hook stores hooks — the
 * tensor's own dict for leaves, its grad_fn's per-output dict otherwise. */
static PyObject *backward_hooks(PyObject *m, PyObject *arg) {
    if (!em_is_tensor(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    EmTensor *t = (EmTensor *)arg;
    if (t->grad_fn) return em_node_tensor_hooks((EmNode *)t->grad_fn, t->output_nr);
    if (!t->backward_hooks && !(t->backward_hooks = PyDict_New())) return NULL;
    return Py_NewRef(t->backward_hooks);
}

static PyObject *post_accumulate_hooks(PyObject *m, PyObject *arg) {
    if (!em_is_tensor(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    EmTensor *t = (EmTensor *)arg;
    if (t->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "post accumulate grad hooks cannot be registered on non-leaf tensors");
        return NULL;
    }
    if (!t->post_acc_hooks && !(t->post_acc_hooks = PyDict_New())) return NULL;
    return Py_NewRef(t->post_acc_hooks);
}

static PyObject *is_inference(PyObject *m, PyObject *arg) {
    if (!em_is_tensor(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a Tensor");
        return NULL;
    }
    return PyBool_FromLong(((EmTensor *)arg)->is_inference);
}

static PyMethodDef methods[] = {
    {"_run_backward", (PyCFunction)(void (*)(void))em_run_backward, METH_VARARGS | METH_KEYWORDS,
     "Run the autograd engine."},
    {"_python_node", python_node, METH_VARARGS, "Graph node for an autograd.Function call."},
    {"_backward_hooks", backward_hooks, METH_O, NULL},
    {"_post_accumulate_grad_hooks", post_accumulate_hooks, METH_O, NULL},
    {"_is_inference", is_inference, METH_O, NULL},
    {"_differentiable_ops", em_differentiable_ops, METH_NOARGS, "{op: node name} of ops with a backward."},
    {NULL},
};

int em_init_autograd(PyObject *m) {
    em_autograd_hooks = (EmAutogradHooks){em_autograd_precheck, em_autograd_record, em_autograd_pre_clear};
    if (em_init_grad_mode(m) < 0 || em_init_nodes(m) < 0 ||
        em_init_saved_hooks(m) < 0)
        return -1;
    return PyModule_AddFunctions(m, methods);
}
