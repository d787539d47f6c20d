/* tensor_type.c — the `ember.Tensor` Python type: its slots (operators,
 * comparisons, indexing, len/iter/bool/int/float/index), attributes (shape,
 * dtype, device, T, data, requires_grad, ...) and the methods that are not
 * ops of the table (size, stride, to, numpy, item, ...). The op table adds
 * its methods (t.add, t.add_, ...) at import (bindings.c). repr/format and
 * pickling live in Python (ember/_tensor.py). */
#include "../ember.h"
#include <stddef.h>

EmTensor *em_getitem(EmTensor *t, PyObject *key);
int em_setitem(EmTensor *t, PyObject *key, PyObject *value);

#define SELF ((EmTensor *)self)

/* ------------------------------------------------------- Python helpers */

/* _C._add_attrs(type, dict): methods and properties written in Python
 * (Tensor's repr and pickling, Node's hook registration) become attributes
 * of ember's C types. */
PyObject *em_add_attrs(PyObject *mod, PyObject *args) {
    PyObject *type, *d;
    if (!PyArg_ParseTuple(args, "OO!:_add_attrs", &type, &PyDict_Type, &d)) return NULL;
    if (type != (PyObject *)&EmTensorType && type != (PyObject *)&EmNodeType) {
        PyErr_SetString(PyExc_TypeError, "_add_attrs: only ember.Tensor and the autograd Node");
        return NULL;
    }
    if (PyDict_Update(((PyTypeObject *)type)->tp_dict, d) < 0) return NULL;
    PyType_Modified((PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* ----------------------------------------------------------- creation */

/* Tensor(*sizes) / Tensor(data) / Tensor(): torch's legacy constructor,
 * always float32 (the default dtype). */
static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Tensor() takes no keyword arguments; use ember.tensor()");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    EmTensor *src;
    int64_t zero = 0;
    if (n == 0) {
        src = em_empty(1, &zero, em_default_float, em_cpu());
    } else if (n == 1 && em_is_tensor(PyTuple_GET_ITEM(args, 0))) {
        src = (EmTensor *)Py_NewRef(PyTuple_GET_ITEM(args, 0));
    } else if (PyLong_Check(PyTuple_GET_ITEM(args, 0)) || (n == 1 && Py_TYPE(PyTuple_GET_ITEM(args, 0)) == EmSizeType)) {
        int nd;
        int64_t shape[EM_MAX_DIMS];
        if (em_parse_shape(n == 1 ? PyTuple_GET_ITEM(args, 0) : args, "Tensor", &nd, shape, false) < 0)
            return NULL;
        src = em_empty(nd, shape, em_default_float, em_cpu());
    } else if (n == 1) {
        src = em_tensor_from_data(PyTuple_GET_ITEM(args, 0), em_default_float);
    } else {
        PyErr_SetString(PyExc_TypeError, "Tensor(): expected sizes or a single data argument");
        return NULL;
    }
    if (!src || type == &EmTensorType) return (PyObject *)src;
    EmTensor *t = em_tensor_alloc(type, src->storage, src->offset, src->ndim, src->sizes, src->strides,
                                  (EmDType)src->dtype);
    Py_DECREF(src);
    return (PyObject *)t;
}

/* Tensor._make_subclass(cls, data, require_grad=False): an instance of cls
 * aliasing data (how nn.Parameter is built). */
static PyObject *make_subclass(PyObject *unused, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"cls", "data", "require_grad", NULL};
    PyObject *cls;
    EmTensor *data;
    int rg = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|p:_make_subclass", kwlist, &cls, &EmTensorType,
                                     &data, &rg))
        return NULL;
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &EmTensorType)) {
        PyErr_SetString(PyExc_TypeError, "_make_subclass: cls must be a subclass of Tensor");
        return NULL;
    }
    if (rg && !em_is_float(data->dtype)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Only Tensors of floating point and complex dtype can require gradients");
        return NULL;
    }
    EmTensor *t = em_tensor_alloc((PyTypeObject *)cls, data->storage, data->offset, data->ndim,
                                  data->sizes, data->strides, (EmDType)data->dtype);
    if (t) {
        em_version_share(t, data); /* Note [version counter] */
        t->requires_grad = rg;
    }
    return (PyObject *)t;
}

/* Tensor.as_subclass(cls): a cls instance aliasing self, in self's graph
 * (an autograd-recorded alias, as torch's). */
static PyObject *m_as_subclass(PyObject *self, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &EmTensorType)) {
        PyErr_Format(PyExc_TypeError, "as_subclass(): argument 'cls' must be a subclass of Tensor, not %.100s",
                     PyType_Check(cls) ? ((PyTypeObject *)cls)->tp_name : Py_TYPE(cls)->tp_name);
        return NULL;
    }
    PyObject *args[2] = {self, self};
    EmTensor *v = em_op_t(EM_OP_view_as, 2, args); /* C call: no __torch_function__ (Note [torch function]) */
    if (!v || (PyTypeObject *)cls == &EmTensorType) return (PyObject *)v;
    EmTensor *t = em_tensor_alloc((PyTypeObject *)cls, v->storage, v->offset, v->ndim, v->sizes, v->strides,
                                  (EmDType)v->dtype);
    if (t) {
        em_version_share(t, v);
        t->requires_grad = v->requires_grad;
        t->is_view = v->is_view;
        t->is_inference = v->is_inference;
        t->view_base = Py_XNewRef(v->view_base);
        t->grad_fn = Py_XNewRef(v->grad_fn);
        t->output_nr = v->output_nr;
        t->version_seen = v->version_seen;
    }
    Py_DECREF(v);
    return (PyObject *)t;
}

/* ------------------------------------------------------------ numbers */

/* Note [torch function]: a subclass or mode sees `a + b` as Tensor.__add__
 * (Tensor.__radd__ when the tensor is on the right, __iadd__ for +=). */
static inline bool tf_pair(PyObject *a, PyObject *b) {
    return em_tf_active() && (em_tf_modes || (!em_tf_plain(a) && em_tf_overrides(a)) ||
                              (b && !em_tf_plain(b) && em_tf_overrides(b)));
}
#define BINARY(slot, op, name)                                                \
    static PyObject *slot(PyObject *a, PyObject *b) {                         \
        if (tf_pair(a, b)) return em_tf_dispatch_binary("__" name "__", "__r" name "__", a, b); \
        return em_binary_op(EM_OP_##op, a, b, NULL);                          \
    }                                                                         \
    static PyObject *slot##_inplace(PyObject *a, PyObject *b) {               \
        if (tf_pair(a, b)) return em_tf_dispatch_binary("__i" name "__", NULL, a, b); \
        return em_binary_op(EM_OP_##op, a, b, (EmTensor *)a);                 \
    }
BINARY(nb_add, add, "add")
BINARY(nb_sub, sub, "sub")
BINARY(nb_mul, mul, "mul")
BINARY(nb_truediv, div, "truediv")
BINARY(nb_floordiv, floor_divide, "floordiv")
BINARY(nb_mod, remainder, "mod")
BINARY(nb_and, bitwise_and, "and")
BINARY(nb_or, bitwise_or, "or")
BINARY(nb_xor, bitwise_xor, "xor")
BINARY(nb_lshift, bitwise_left_shift, "lshift")
BINARY(nb_rshift, bitwise_right_shift, "rshift")

static PyObject *nb_pow(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
    if (tf_pair(a, b)) return em_tf_dispatch_binary("__pow__", "__rpow__", a, b);
    return em_binary_op(EM_OP_pow, a, b, NULL);
}
static PyObject *nb_pow_inplace(PyObject *a, PyObject *b, PyObject *mod) {
    if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
    if (tf_pair(a, b)) return em_tf_dispatch_binary("__ipow__", NULL, a, b);
    return em_binary_op(EM_OP_pow, a, b, (EmTensor *)a);
}
/* hand-written methods that return tensors: Tensor.<name>(self, ...) */
#define TF_METHOD(name, args, kw) \
    if (EM_UNLIKELY(em_tf_wanted_tuple(self, args, kw))) return em_tf_dispatch_method(name, self, args, kw)
#define TF_UNARY(name, a) \
    if (tf_pair(a, NULL)) return em_tf_dispatch_method(name, a, NULL, NULL)
static PyObject *nb_neg(PyObject *a) {
    TF_UNARY("__neg__", a);
    return em_unary_op(EM_OP_neg, (EmTensor *)a, NULL);
}
static PyObject *nb_pos(PyObject *a) {
    TF_UNARY("__pos__", a);
    return em_unary_op(EM_OP_positive, (EmTensor *)a, NULL);
}
static PyObject *nb_abs(PyObject *a) {
    TF_UNARY("__abs__", a);
    return em_unary_op(EM_OP_abs, (EmTensor *)a, NULL);
}
static PyObject *nb_invert(PyObject *a) {
    TF_UNARY("__invert__", a);
    if (em_is_float(((EmTensor *)a)->dtype)) {
        PyErr_SetString(PyExc_TypeError,
                        "~ (operator.invert) is only implemented on integer and Boolean-type tensors");
        return NULL;
    }
    return em_unary_op(EM_OP_bitwise_not, (EmTensor *)a, NULL);
}

static PyObject *nb_matmul(PyObject *a, PyObject *b) {
    if (!em_is_tensor(a) || !em_is_tensor(b)) Py_RETURN_NOTIMPLEMENTED;
    if (tf_pair(a, b)) return em_tf_dispatch_binary("__matmul__", NULL, a, b);
    return em_binary_op(EM_OP_matmul, a, b, NULL);
}

static int single_value(EmTensor *t, const char *what) {
    if (t->numel == 1) return 0;
    if (t->numel == 0)
        PyErr_Format(PyExc_RuntimeError, "%s value of Tensor with no values is ambiguous", what);
    else
        PyErr_Format(PyExc_RuntimeError, "%s value of Tensor with more than one value is ambiguous", what);
    return -1;
}

static int nb_bool(PyObject *self) {
    if (single_value(SELF, "Boolean") < 0) return -1;
    if (em_is_meta(SELF)) { /* Note [meta device]: no value to test (torch's item() error) */
        PyErr_SetString(PyExc_RuntimeError, "Tensor.item() cannot be called on meta tensors");
        return -1;
    }
    EmScalar s;
    if (em_scalar_from_py(self, &s) < 0) return -1;
    return s.kind == 'c' ? s.v.f != 0 || s.im != 0 : s.kind == 'f' ? s.v.f != 0 : s.v.i != 0;
}

static PyObject *nb_int(PyObject *self) {
    if (SELF->numel != 1) {
        PyErr_SetString(PyExc_ValueError, "only one element tensors can be converted to Python scalars");
        return NULL;
    }
    PyObject *v = em_tensor_item(SELF);
    if (!v || PyLong_CheckExact(v)) return v;
    PyObject *i = PyBool_Check(v) ? PyLong_FromLong(v == Py_True) : PyNumber_Long(v);
    Py_DECREF(v);
    return i;
}

static PyObject *nb_float(PyObject *self) {
    if (SELF->numel != 1) {
        PyErr_SetString(PyExc_ValueError, "only one element tensors can be converted to Python scalars");
        return NULL;
    }
    PyObject *v = em_tensor_item(SELF);
    if (!v || PyFloat_Check(v)) return v;
    PyObject *f = PyNumber_Float(v);
    Py_DECREF(v);
    return f;
}

static PyObject *nb_index(PyObject *self) {
    if (SELF->numel != 1 || em_is_float(SELF->dtype)) {
        PyErr_SetString(PyExc_TypeError, "only integer tensors of a single element can be converted to an index");
        return NULL;
    }
    PyObject *v = em_tensor_item(SELF);
    if (!v || !PyBool_Check(v)) return v;
    PyObject *i = PyLong_FromLong(v == Py_True);
    Py_DECREF(v);
    return i;
}

static PyNumberMethods tensor_as_number = {
    .nb_add = nb_add, .nb_subtract = nb_sub, .nb_multiply = nb_mul, .nb_true_divide = nb_truediv,
    .nb_floor_divide = nb_floordiv, .nb_remainder = nb_mod, .nb_power = nb_pow,
    .nb_negative = nb_neg, .nb_positive = nb_pos, .nb_absolute = nb_abs, .nb_invert = nb_invert,
    .nb_and = nb_and, .nb_or = nb_or, .nb_xor = nb_xor, .nb_lshift = nb_lshift,
    .nb_rshift = nb_rshift, .nb_matrix_multiply = nb_matmul, .nb_bool = nb_bool,
    .nb_int = nb_int, .nb_float = nb_float, .nb_index = nb_index,
    .nb_inplace_add = nb_add_inplace, .nb_inplace_subtract = nb_sub_inplace,
    .nb_inplace_multiply = nb_mul_inplace, .nb_inplace_true_divide = nb_truediv_inplace,
    .nb_inplace_floor_divide = nb_floordiv_inplace, .nb_inplace_remainder = nb_mod_inplace,
    .nb_inplace_power = nb_pow_inplace, .nb_inplace_and = nb_and_inplace,
    .nb_inplace_or = nb_or_inplace, .nb_inplace_xor = nb_xor_inplace,
    .nb_inplace_lshift = nb_lshift_inplace, .nb_inplace_rshift = nb_rshift_inplace,
};

static PyObject *richcompare(PyObject *a, PyObject *b, int op) {
    static const EmOpId ops[] = {[Py_LT] = EM_OP_lt, [Py_LE] = EM_OP_le, [Py_EQ] = EM_OP_eq,
                                 [Py_NE] = EM_OP_ne, [Py_GT] = EM_OP_gt, [Py_GE] = EM_OP_ge};
    static const char *const names[] = {[Py_LT] = "__lt__", [Py_LE] = "__le__", [Py_EQ] = "__eq__",
                                        [Py_NE] = "__ne__", [Py_GT] = "__gt__", [Py_GE] = "__ge__"};
    if (tf_pair(a, b)) return em_tf_dispatch_binary(names[op], NULL, a, b);
    return em_binary_op(ops[op], a, b, NULL);
}

/* ------------------------------------------------- sequence / mapping */

static Py_ssize_t tensor_len(PyObject *self) {
    if (SELF->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)SELF->sizes[0];
}

static PyObject *tensor_getitem(PyObject *self, PyObject *key) {
    if (tf_pair(self, key)) return em_tf_dispatch_binary("__getitem__", NULL, self, key);
    PyObject *args[2] = {self, key};
    return em_op(EM_OP__index, 2, args);
}
static int tensor_setitem(PyObject *self, PyObject *key, PyObject *value) {
    if (value && tf_pair(self, key) | tf_pair(value, NULL)) {
        PyObject *kv = PyTuple_Pack(2, key, value);
        PyObject *r = kv ? em_tf_dispatch_method("__setitem__", self, kv, NULL) : NULL;
        Py_XDECREF(kv);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    return em_setitem(SELF, key, value);
}

static PyObject *tensor_iter(PyObject *self) {
    if (SELF->ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
        return NULL;
    }
    /* torch iterates over unbind(0): the rows are recorded by autograd */
    PyObject *tup = em_op(EM_OP_unbind, 1, &self);
    if (!tup) return NULL;
    PyObject *it = PyObject_GetIter(tup);
    Py_DECREF(tup);
    return it;
}

static int tensor_contains(PyObject *self, PyObject *el) {
    if (!em_is_tensor(el) && !PyNumber_Check(el)) {
        PyErr_Format(PyExc_RuntimeError,
                     "Tensor.__contains__ only supports Tensor or scalar, but you passed in a %.100s.",
                     Py_TYPE(el)->tp_name);
        return -1;
    }
    PyObject *eq = em_binary_op(EM_OP_eq, self, el, NULL);
    if (!eq || eq == Py_NotImplemented) {
        Py_XDECREF(eq);
        return -1;
    }
    EmTensor *c = em_is_cpu((EmTensor *)eq) ? em_contiguous((EmTensor *)eq)
                                            : em_to_device((EmTensor *)eq, em_cpu(), false);
    Py_DECREF(eq);
    if (!c) return -1;
    int found = memchr(em_data(c), 1, (size_t)c->numel) != NULL;
    Py_DECREF(c);
    return found;
}

static PyMappingMethods tensor_as_mapping = {
    .mp_length = tensor_len, .mp_subscript = tensor_getitem, .mp_ass_subscript = tensor_setitem,
};
static PySequenceMethods tensor_as_sequence = {
    .sq_length = tensor_len, .sq_contains = tensor_contains,
};

/* --------------------------------------------------------- attributes */

static PyObject *get_shape(PyObject *self, void *c) { return em_size_new(SELF->ndim, SELF->sizes); }
static PyObject *get_dtype(PyObject *self, void *c) { return Py_NewRef(em_dtype_object((EmDType)SELF->dtype)); }
static PyObject *get_device(PyObject *self, void *c) {
    EmDevice d = em_device(SELF);
    if (d.type == EM_CPU) d.index = -1;
    return em_device_object(d);
}
static PyObject *get_ndim(PyObject *self, void *c) { return PyLong_FromLong(SELF->ndim); }
static PyObject *get_is_cpu(PyObject *self, void *c) { return PyBool_FromLong(em_is_cpu(SELF)); }
static PyObject *get_is_cuda(PyObject *self, void *c) { return PyBool_FromLong(em_device(SELF).type == EM_CUDA); }
static PyObject *get_is_meta(PyObject *self, void *c) { return PyBool_FromLong(em_is_meta(SELF)); }
static PyObject *get_false(PyObject *self, void *c) { Py_RETURN_FALSE; }
static PyObject *get_itemsize(PyObject *self, void *c) { return PyLong_FromLong(em_itemsize(SELF->dtype)); }
static PyObject *get_nbytes(PyObject *self, void *c) {
    return PyLong_FromLongLong(SELF->numel * em_itemsize(SELF->dtype));
}
static PyObject *get_version(PyObject *self, void *c) { return PyLong_FromLongLong(em_version(SELF)); }
static PyObject *get_base(PyObject *self, void *c) {
    return Py_NewRef(SELF->is_view && SELF->view_base ? SELF->view_base : Py_None);
}

/* .T and .mT go through the op table, so autograd records them (as
 * PermuteBackward0 / TransposeBackward0, torch's nodes) */
static PyObject *get_T(PyObject *self, void *c) {
    static bool warned; /* once per process, as torch's TORCH_WARN_ONCE */
    if (SELF->ndim != 2 && !warned) {
        warned = true;
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
                         "deprecated and it will throw an error in a future release. Consider `x.mT` to "
                         "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to "
                         "reverse the dimensions of a tensor.", 1) < 0)
            return NULL;
    }
    PyObject *dims = PyTuple_New(SELF->ndim);
    if (!dims) return NULL;
    for (int i = 0; i < SELF->ndim; i++) {
        PyObject *d = PyLong_FromLong(SELF->ndim - 1 - i);
        if (!d) {
            Py_DECREF(dims);
            return NULL;
        }
        PyTuple_SET_ITEM(dims, i, d);
    }
    PyObject *args[2] = {self, dims};
    PyObject *r = em_op(EM_OP_permute, 2, args);
    Py_DECREF(dims);
    return r;
}
static PyObject *get_mT(PyObject *self, void *c) {
    if (SELF->ndim == 0) { /* torch: deprecated, the identity */
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
                         1) < 0)
            return NULL;
        return Py_NewRef(self);
    }
    if (SELF->ndim < 2) {
        PyErr_SetString(PyExc_RuntimeError, "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.");
        return NULL;
    }
    PyObject *d0 = PyLong_FromLong(-2), *d1 = PyLong_FromLong(-1), *r = NULL;
    if (d0 && d1) {
        PyObject *args[3] = {self, d0, d1};
        r = em_op(EM_OP_transpose, 3, args);
    }
    Py_XDECREF(d0);
    Py_XDECREF(d1);
    return r;
}

/* Note [version counter]: .data aliases the data under a counter of its own
 * (writes through it are not seen by autograd, as torch); `.data = t` keeps
 * this tensor's counter. */
static PyObject *get_data(PyObject *self, void *c) {
    EmTensor *t = em_detach(SELF);
    if (t && em_version_own(t, 0) < 0) Py_CLEAR(t);
    return (PyObject *)t;
}
static int set_data(PyObject *self, PyObject *v, void *c) {
    if (!v || !em_is_tensor(v)) {
        PyErr_SetString(PyExc_TypeError, "Tensor.data must be set to a Tensor");
        return -1;
    }
    EmTensor *o = (EmTensor *)v;
    if (!SELF->vc && em_version_own(SELF, em_version(SELF)) < 0) return -1;
    if (em_tensor_set_geometry(SELF, o->ndim, o->sizes, o->strides, o->offset) < 0) return -1;
    Py_SETREF(SELF->storage, (EmStorage *)Py_NewRef(o->storage));
    SELF->dtype = o->dtype;
    return 0;
}

static PyObject *get_requires_grad(PyObject *self, void *c) {
    return PyBool_FromLong(SELF->requires_grad || SELF->grad_fn);
}
static int set_requires_grad(PyObject *self, PyObject *v, void *c) {
    int b = v ? PyObject_IsTrue(v) : -1;
    if (b < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
        return -1;
    }
    if (SELF->grad_fn) {
        if (!b) {
            PyErr_SetString(PyExc_RuntimeError,
                            "you can only change requires_grad flags of leaf variables. If you want "
                            "to use a computed variable in a subgraph that doesn't require "
                            "differentiation use var_no_grad = var.detach().");
            return -1;
        }
        return 0;
    }
    if (b && !em_is_float(SELF->dtype)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "only Tensors of floating point and complex dtype can require gradients");
        return -1;
    }
    if (b && SELF->is_inference && !em_inference_mode()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
        return -1;
    }
    SELF->requires_grad = b;
    return 0;
}

static PyObject *get_grad(PyObject *self, void *c) {
    if (!SELF->grad && SELF->grad_fn) { /* torch warns: non-leaves don't get .grad unless retained */
        PyObject *kept = SELF->dict ? PyDict_GetItemString(SELF->dict, "_retains_grad") : NULL;
        if ((!kept || !PyObject_IsTrue(kept)) &&
            PyErr_WarnEx(PyExc_UserWarning,
                         "The .grad attribute of a Tensor that is not a leaf Tensor is being "
                         "accessed. Its .grad attribute won't be populated during "
                         "autograd.backward(). If you indeed want the .grad field to be populated "
                         "for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.", 1) < 0)
            return NULL;
    }
    return Py_NewRef(SELF->grad ? SELF->grad : Py_None);
}
static int set_grad(PyObject *self, PyObject *v, void *c) {
    if (v && v != Py_None) {
        if (!em_is_tensor(v)) {
            PyErr_Format(PyExc_TypeError, "assigned grad expected to be a Tensor or None but got grad of type %.100s",
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        EmTensor *g = (EmTensor *)v;
        if (g->dtype != SELF->dtype) {
            PyErr_SetString(PyExc_RuntimeError, "assigned grad has data of a different type");
            return -1;
        }
        if (g->ndim != SELF->ndim || memcmp(g->sizes, SELF->sizes, g->ndim * sizeof(int64_t))) {
            PyErr_SetString(PyExc_RuntimeError, "assigned grad has data of a different size");
            return -1;
        }
    }
    Py_XSETREF(SELF->grad, v && v != Py_None ? Py_NewRef(v) : NULL);
    return 0;
}
static PyObject *get_grad_fn(PyObject *self, void *c) {
    if (em_view_refresh(SELF) < 0) return NULL;
    return Py_NewRef(SELF->grad_fn ? SELF->grad_fn : Py_None);
}
static PyObject *get_is_leaf(PyObject *self, void *c) { return PyBool_FromLong(SELF->grad_fn == NULL); }
static PyObject *get_output_nr(PyObject *self, void *c) { return PyLong_FromLong(SELF->output_nr); }

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "The size of each dimension (an ember.Size).", NULL},
    {"dtype", get_dtype, NULL, NULL, NULL},
    {"device", get_device, NULL, NULL, NULL},
    {"ndim", get_ndim, NULL, NULL, NULL},
    {"T", get_T, NULL, "All dimensions reversed.", NULL},
    {"mT", get_mT, NULL, "The last two dimensions swapped.", NULL},
    {"data", get_data, set_data, NULL, NULL},
    {"requires_grad", get_requires_grad, set_requires_grad, NULL, NULL},
    {"grad", get_grad, set_grad, NULL, NULL},
    {"grad_fn", get_grad_fn, NULL, NULL, NULL},
    {"is_leaf", get_is_leaf, NULL, NULL, NULL},
    {"output_nr", get_output_nr, NULL, NULL, NULL},
    {"is_cpu", get_is_cpu, NULL, NULL, NULL},
    {"is_cuda", get_is_cuda, NULL, NULL, NULL},
    {"is_sparse", get_false, NULL, NULL, NULL},
    {"is_quantized", get_false, NULL, NULL, NULL},
    {"is_meta", get_is_meta, NULL, NULL, NULL},
    {"is_mps", get_false, NULL, NULL, NULL},
    {"is_nested", get_false, NULL, NULL, NULL},
    {"itemsize", get_itemsize, NULL, NULL, NULL},
    {"nbytes", get_nbytes, NULL, NULL, NULL},
    {"_version", get_version, NULL, NULL, NULL},
    {"_base", get_base, NULL, NULL, NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

/* ------------------------------------------------------------ methods */

/* size(dim=None) / stride(dim=None): the whole tuple, or one entry. */
static PyObject *dim_query(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw,
                           const char *name, bool sizes) {
    Py_ssize_t nkw = kw ? PyTuple_GET_SIZE(kw) : 0;
    if (n + nkw > 1 || (nkw && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw, 0), "dim"))) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most one argument (dim)", name);
        return NULL;
    }
    PyObject *dim = n + nkw ? args[0] : Py_None;
    const int64_t *vals = sizes ? SELF->sizes : SELF->strides;
    if (dim == Py_None) {
        if (sizes) return em_size_new(SELF->ndim, vals);
        PyObject *t = PyTuple_New(SELF->ndim);
        for (int i = 0; t && i < SELF->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(vals[i]));
        return t;
    }
    long long d = PyLong_AsLongLong(dim);
    int w;
    if ((d == -1 && PyErr_Occurred()) || em_wrap_dim(d, SELF->ndim, &w) < 0) return NULL;
    if (SELF->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "Dimension specified as 0 but tensor has no dimensions");
        return NULL;
    }
    return PyLong_FromLongLong(vals[w]);
}

static PyObject *m_size(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    return dim_query(self, args, n, kw, "size", true);
}
static PyObject *m_stride(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kw) {
    return dim_query(self, args, n, kw, "stride", false);
}

static PyObject *m_dim(PyObject *self, PyObject *u) { return PyLong_FromLong(SELF->ndim); }
static PyObject *m_numel(PyObject *self, PyObject *u) { return PyLong_FromLongLong(SELF->numel); }
static PyObject *m_element_size(PyObject *self, PyObject *u) { return PyLong_FromLong(em_itemsize(SELF->dtype)); }
static PyObject *m_storage_offset(PyObject *self, PyObject *u) { return PyLong_FromLongLong(SELF->offset); }
static PyObject *m_data_ptr(PyObject *self, PyObject *u) {
    return PyLong_FromVoidPtr(em_is_meta(SELF) ? NULL : em_data(SELF)); /* a meta tensor has no data: 0 */
}
/* is_contiguous(memory_format=contiguous_format) */
static PyObject *m_is_contiguous(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"memory_format", NULL};
    PyObject *mf = Py_None;
    EmMemoryFormat f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:is_contiguous", kwlist, &mf) ||
        em_memory_format_from_py(mf, EM_CONTIGUOUS_FORMAT, &f) < 0)
        return NULL;
    if (f == EM_PRESERVE_FORMAT) {
        PyErr_SetString(PyExc_RuntimeError, "is_contiguous: preserve_format is not a layout a tensor can have");
        return NULL;
    }
    return PyBool_FromLong(em_is_contiguous_as(SELF, f));
}
static PyObject *m_is_floating_point(PyObject *self, PyObject *u) { return PyBool_FromLong(em_is_real_float(SELF->dtype)); }
static PyObject *m_is_complex(PyObject *self, PyObject *u) { return PyBool_FromLong(em_is_complex(SELF->dtype)); }
static PyObject *m_is_signed(PyObject *self, PyObject *u) {
    return PyBool_FromLong(em_dtype_info[SELF->dtype].is_signed);
}
static PyObject *m_false(PyObject *self, PyObject *u) { Py_RETURN_FALSE; }

/* Page-locked host memory (pin_memory): a CPU storage whose bytes come from
 * the CUDA backend's host allocator, so copies to the GPU can be
 * asynchronous. Recognised by its deleter. */
static void pinned_free(void *p) { em_cuda->host_free(p); }

static PyObject *m_is_pinned(PyObject *self, PyObject *a, PyObject *k) {
    return PyBool_FromLong(em_is_cpu(SELF) && SELF->storage->deleter == pinned_free);
}

static PyObject *m_pin_memory(PyObject *self, PyObject *a, PyObject *k) {
    TF_METHOD("pin_memory", a, k);
    if (!em_is_cpu(SELF)) {
        char buf[32];
        PyErr_Format(PyExc_RuntimeError, "cannot pin '%s' memory: only dense CPU tensors can be pinned",
                     em_device_str(em_device(SELF), buf, sizeof buf));
        return NULL;
    }
    if (SELF->storage->deleter == pinned_free) return Py_NewRef(self);
    if (!em_cuda_get()) return NULL;
    size_t nbytes = (size_t)SELF->numel * em_itemsize(SELF->dtype);
    void *p = em_cuda->host_alloc(nbytes);
    if (!p) return em_cuda_error("pin_memory"), NULL;
    EmStorage *s = em_storage_wrap(p, (int64_t)nbytes, em_cpu(), NULL);
    if (!s) {
        em_cuda->host_free(p);
        return NULL;
    }
    s->deleter = pinned_free;
    s->deleter_ctx = p;
    EmTensor *t = em_tensor_alloc(&EmTensorType, s, 0, SELF->ndim, SELF->sizes, NULL, (EmDType)SELF->dtype);
    Py_DECREF(s);
    if (t && em_copy_(t, self) < 0) Py_CLEAR(t);
    return (PyObject *)t;
}
/* Tensor.record_stream(stream): Note [record_stream] (csrc/cuda/allocator.cpp).
 * Memory ember did not allocate (DLPack imports) is the owner's to manage. */
static PyObject *m_record_stream(PyObject *self, PyObject *stream) {
    if (em_is_cpu(SELF)) {
        PyErr_SetString(PyExc_RuntimeError, "record_stream: expected a CUDA tensor, but got a CPU tensor");
        return NULL;
    }
    PyObject *h = PyObject_GetAttrString(stream, "cuda_stream");
    PyObject *d = h ? PyObject_GetAttrString(stream, "device_index") : NULL;
    void *handle = h ? PyLong_AsVoidPtr(h) : NULL;
    long dev = d ? PyLong_AsLong(d) : -1;
    Py_XDECREF(h);
    Py_XDECREF(d);
    if (PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "record_stream(): argument 'stream' must be a CUDA Stream, not %s",
                         Py_TYPE(stream)->tp_name);
        }
        return NULL;
    }
    if (dev != em_device(SELF).index) {
        PyErr_Format(PyExc_RuntimeError, "record_stream: the stream is on cuda:%ld but the tensor on cuda:%d", dev,
                     em_device(SELF).index);
        return NULL;
    }
    EmStorage *s = SELF->storage;
    if (s->base || s->deleter || !em_cuda->record_stream) Py_RETURN_NONE;
    if (em_cuda->record_stream((int)dev, s->data, handle) < 0) return em_cuda_error("record_stream"), NULL;
    Py_RETURN_NONE;
}
static PyObject *m_get_device(PyObject *self, PyObject *u) {
    return PyLong_FromLong(em_is_cpu(SELF) ? -1 : em_device(SELF).index);
}
static PyObject *m_item(PyObject *self, PyObject *u) { return em_tensor_item(SELF); }
static PyObject *m_tolist(PyObject *self, PyObject *u) { return em_tensor_tolist(SELF); }
static PyObject *m_untyped_storage(PyObject *self, PyObject *u) { return Py_NewRef(SELF->storage); }

/* set_(source=None, storage_offset=0, size=None, stride=None): make this tensor
 * view `source` (a Tensor, or an untyped storage with a geometry); with no
 * source, an empty storage. The write bumps the tensor's version counter,
 * which it keeps (Note [version counter]; unlike torch, views made before
 * set_ don't see the tensor's later writes). */
static PyObject *m_set_(PyObject *self, PyObject *args, PyObject *kw) {
    TF_METHOD("set_", args, kw);
    static char *kwlist[] = {"source", "storage_offset", "size", "stride", NULL};
    PyObject *src = Py_None, *off_o = Py_None, *size_o = Py_None, *stride_o = Py_None;
    long long off = 0;
    int nd = 0, nstride = 0;
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    EmStorage *st = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOO:set_", kwlist, &src, &off_o, &size_o, &stride_o))
        return NULL;
    bool geometry = off_o != Py_None || size_o != Py_None;
    if (off_o != Py_None && ((off = PyLong_AsLongLong(off_o)) == -1 && PyErr_Occurred())) return NULL;
    if (geometry && size_o == Py_None) {
        PyErr_SetString(PyExc_TypeError, "set_(): a storage_offset needs a size");
        return NULL;
    }
    if (em_grad_enabled() && SELF->requires_grad && !SELF->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a leaf Variable that requires grad is being used in an in-place operation.");
        return NULL;
    }
    int isz = em_itemsize(SELF->dtype);
    if (src == Py_None) {
        if (!(st = em_storage_new(0, em_device(SELF)))) return NULL;
        nd = 1;
        sizes[0] = 0;
        strides[0] = 1;
        off = 0;
    } else if (em_is_tensor(src)) {
        EmTensor *o = (EmTensor *)src;
        if (o->dtype != SELF->dtype) {
            PyErr_Format(PyExc_RuntimeError, "Could not set tensor of type %s to a tensor of type %s",
                         em_dtype_name((EmDType)o->dtype), em_dtype_name((EmDType)SELF->dtype));
            return NULL;
        }
        st = (EmStorage *)Py_NewRef(o->storage);
        nd = o->ndim;
        memcpy(sizes, o->sizes, nd * sizeof(int64_t));
        memcpy(strides, o->strides, nd * sizeof(int64_t));
        if (!geometry) off = o->offset;
        if (geometry) { /* set_(tensor, offset, size, stride): a geometry over its storage */
            if (em_parse_intlist(size_o, "set_", &nd, sizes) < 0) goto fail;
            if (stride_o == Py_None) em_contiguous_strides(nd, sizes, strides);
            else if (em_parse_intlist(stride_o, "set_", &nstride, strides) < 0) goto fail;
            else EM_CHECK(nstride == nd, PyExc_RuntimeError, "set_: %d sizes but %d strides", nd, nstride);
        }
    } else if (PyObject_TypeCheck(src, &EmStorageType)) {
        st = (EmStorage *)Py_NewRef(src);
        if (size_o == Py_None) {
            nd = 1;
            sizes[0] = st->nbytes / isz;
            strides[0] = 1;
        } else {
            if (em_parse_intlist(size_o, "set_", &nd, sizes) < 0) goto fail;
            if (stride_o == Py_None) em_contiguous_strides(nd, sizes, strides);
            else if (em_parse_intlist(stride_o, "set_", &nstride, strides) < 0) goto fail;
            else EM_CHECK(nstride == nd, PyExc_RuntimeError, "set_: %d sizes but %d strides", nd, nstride);
        }
    } else {
        PyErr_Format(PyExc_TypeError, "set_(): argument 'source' must be Tensor or Storage, not %.100s",
                     Py_TYPE(src)->tp_name);
        return NULL;
    }
    /* the geometry must address only the storage's bytes */
    int64_t reach = off, numel = 1;
    EM_CHECK(off >= 0, PyExc_RuntimeError, "set_: storage offset must be non-negative, got %lld", off);
    for (int d = 0; d < nd; d++) {
        EM_CHECK(sizes[d] >= 0 && strides[d] >= 0, PyExc_RuntimeError,
                 "set_: negative size or stride in dimension %d", d);
        if (__builtin_mul_overflow(numel, sizes[d], &numel)) numel = INT64_MAX;
    }
    if (numel > 0) {
        for (int d = 0; d < nd; d++) {
            int64_t step;
            EM_CHECK(!__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) &&
                         !__builtin_add_overflow(reach, step, &reach),
                     PyExc_RuntimeError, "set_: the geometry overflows");
        }
        EM_CHECK(reach < st->nbytes / isz, PyExc_RuntimeError,
                 "set_: the geometry needs a storage of %lld elements, but the storage holds %lld",
                 (long long)reach + 1, (long long)(st->nbytes / isz));
    }
    /* the write is counted where the tensor's views and aliases see it; then the
     * counter stays with the tensor while its storage changes */
    em_bump_version(SELF);
    if (!SELF->vc && em_version_own(SELF, em_version(SELF)) < 0) goto fail;
    if (em_tensor_set_geometry(SELF, nd, sizes, strides, off) < 0) goto fail;
    Py_SETREF(SELF->storage, st);
    /* in a graph, the new data has no derivative (Note [set_ under autograd]) */
    if (em_grad_enabled() && SELF->grad_fn && em_history_without_derivative(SELF, "NotImplemented") < 0)
        return NULL;
    return Py_NewRef(self);
fail:
    Py_XDECREF(st);
    return NULL;
}

static PyObject *m_numpy(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"force", NULL};
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$p:numpy", kwlist, &force)) return NULL;
    if ((SELF->requires_grad || SELF->grad_fn) && !force) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
        return NULL;
    }
    return em_to_numpy(SELF);
}

static PyObject *m_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OOO:__dlpack__", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    if (SELF->requires_grad || SELF->grad_fn) {
        PyErr_SetString(PyExc_RuntimeError,
                        "Can't export tensors that require gradient, use tensor.detach()");
        return NULL;
    }
    if (copy == Py_True) {
        EmTensor *c = em_clone(SELF);
        if (!c) return NULL;
        PyObject *r = em_to_dlpack(c, max_version != Py_None);
        Py_DECREF(c);
        return r;
    }
    if (!em_is_cpu(SELF) && em_cuda->synchronize(em_device(SELF).index) < 0) /* ready for any consumer stream */
        return em_cuda_error("__dlpack__"), NULL;
    bool versioned = false;
    if (max_version != Py_None) {
        PyObject *major = PySequence_GetItem(max_version, 0);
        if (!major) return NULL;
        versioned = PyLong_AsLong(major) >= 1;
        Py_DECREF(major);
    }
    return em_to_dlpack(SELF, versioned);
}

static PyObject *m_dlpack_device(PyObject *self, PyObject *u) {
    if (em_is_cpu(SELF)) return Py_BuildValue("(ii)", 1, 0);
    return Py_BuildValue("(ii)", 2, em_device(SELF).index);
}

/* to(dtype) / to(device, dtype=None) / to(other) with non_blocking, copy */
/* t.to(device[, dtype]): through the op table (_to_device), so autograd
 * records ToCopyBackward0 and the gradient returns to t's device. */
static PyObject *to_device(PyObject *self, EmDevice dev, EmDType d, bool non_blocking) {
    PyObject *args[4] = {self, em_device_object(dev), em_dtype_object(d),
                         non_blocking ? Py_True : Py_False};
    if (!args[1]) return NULL;
    PyObject *r = em_op(EM_OP__to_device, 4, args);
    Py_DECREF(args[1]);
    return r;
}

static PyObject *to_dtype_device(PyObject *self, PyObject *args, PyObject *kw);

/* to(...): the dtype and device conversion, then memory_format= (which
 * copies only when the result is not laid out so already) */
static PyObject *m_to(PyObject *self, PyObject *args, PyObject *kw) {
    TF_METHOD("to", args, kw);
    EmMemoryFormat f = EM_PRESERVE_FORMAT;
    if (kw && em_memory_format_from_py(PyDict_GetItemString(kw, "memory_format"), EM_PRESERVE_FORMAT, &f) < 0)
        return NULL;
    PyObject *r = to_dtype_device(self, args, kw);
    if (!r || f == EM_PRESERVE_FORMAT || em_is_contiguous_as((EmTensor *)r, f)) return r;
    PyObject *call_args[2] = {r, em_memory_format_object(f)};
    Py_SETREF(r, em_op(EM_OP_contiguous, 2, call_args));
    return r;
}

static PyObject *to_dtype_device(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *dtype_o = NULL, *device_o = NULL, *copy_o = NULL, *non_blocking_o = NULL;
    EmTensor *like = NULL; /* to(other): other's dtype and device */
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (Py_TYPE(a) == &EmDTypeType || a == (PyObject *)&PyFloat_Type ||
            a == (PyObject *)&PyLong_Type || a == (PyObject *)&PyBool_Type)
            dtype_o = a;
        else if (em_is_tensor(a)) {
            like = (EmTensor *)a;
            dtype_o = em_dtype_object((EmDType)like->dtype);
        } else if (Py_TYPE(a) == &EmDeviceType || PyUnicode_Check(a))
            device_o = a;
        else if (PyBool_Check(a) && i > 0)
            continue; /* non_blocking / copy given positionally */
        else if (a != Py_None) {
            PyErr_Format(PyExc_TypeError, "to() received an invalid argument of type %.100s",
                         Py_TYPE(a)->tp_name);
            return NULL;
        }
    }
    if (kw) {
        PyObject *v;
        if ((v = PyDict_GetItemString(kw, "dtype")) && v != Py_None) dtype_o = v;
        if ((v = PyDict_GetItemString(kw, "device")) && v != Py_None) device_o = v;
        copy_o = PyDict_GetItemString(kw, "copy");
    }
    EmDType d = (EmDType)SELF->dtype;
    if (dtype_o && em_dtype_from_py(dtype_o, &d) < 0) return NULL;
    bool copy = copy_o && PyObject_IsTrue(copy_o);
    bool non_blocking = false;
    if (kw && (non_blocking_o = PyDict_GetItemString(kw, "non_blocking"))) non_blocking = PyObject_IsTrue(non_blocking_o);
    if (device_o || like) {
        EmDevice dev = like ? em_device(like) : (EmDevice){0};
        if (device_o && em_device_from_py(device_o, &dev) < 0) return NULL;
        if (dev.type == EM_CPU && dev.index > 0) {
            PyErr_Format(PyExc_RuntimeError, "CPU device index must be -1 or zero, got %d", dev.index);
            return NULL;
        }
        if (dev.type != EM_CPU && em_cuda_resolve(&dev) < 0) return NULL;
        if (!em_device_eq(dev, em_device(SELF))) return to_device(self, dev, d, non_blocking);
    }
    if (d == SELF->dtype && !copy) return Py_NewRef(self);
    PyObject *call_args[2] = {self, em_dtype_object(d)};
    return em_op(EM_OP__to_copy, 2, call_args);
}

static PyObject *convert_to(PyObject *self, EmDType d) {
    if (d == SELF->dtype) return Py_NewRef(self);
    PyObject *args[2] = {self, em_dtype_object(d)};
    return em_op(EM_OP__to_copy, 2, args);
}
#define CONVERT(name, dt)                                             \
    static PyObject *m_##name(PyObject *self, PyObject *a, PyObject *k) { \
        TF_METHOD(#name, a, k);                                       \
        return convert_to(self, dt);                                  \
    }
CONVERT(float, EM_FLOAT32)
CONVERT(double, EM_FLOAT64)
CONVERT(half, EM_FLOAT16)
CONVERT(bfloat16, EM_BFLOAT16)
CONVERT(int, EM_INT32)
CONVERT(long, EM_INT64)
CONVERT(short, EM_INT16)
CONVERT(char, EM_INT8)
CONVERT(byte, EM_UINT8)
CONVERT(bool, EM_BOOL)

static PyObject *m_type(PyObject *self, PyObject *args, PyObject *kw) {
    TF_METHOD("type", args, kw);
    /* torch's legacy type names: its ScalarType name + "Tensor" (ember.FloatTensor) */
    PyObject *d = PyTuple_GET_SIZE(args) ? PyTuple_GET_ITEM(args, 0) : kw ? PyDict_GetItemString(kw, "dtype") : NULL;
    if (!d || d == Py_None) return PyUnicode_FromFormat("ember.%sTensor", em_dtype_name((EmDType)SELF->dtype));
    EmDType dt;
    if (PyUnicode_Check(d)) {
        const char *s = PyUnicode_AsUTF8(d);
        const char *dot = s ? strrchr(s, '.') : NULL;
        size_t len = dot ? strlen(dot + 1) : 0;
        for (int i = 0; dot && i < EM_NUM_DTYPES; i++) {
            const char *n = em_dtype_name((EmDType)i);
            if (len == strlen(n) + 6 && !strncmp(dot + 1, n, strlen(n)) && !strcmp(dot + 1 + strlen(n), "Tensor"))
                return convert_to(self, (EmDType)i);
        }
        PyErr_Format(PyExc_ValueError, "invalid type: '%U'", d);
        return NULL;
    }
    if (PyType_Check(d)) { /* a legacy typed-tensor class: ember.LongTensor, ember.cuda.FloatTensor, ... */
        PyObject *cls_dtype = PyObject_GetAttrString(d, "dtype");
        if (!cls_dtype) return NULL;
        int r = Py_TYPE(cls_dtype) == &EmDTypeType ? em_dtype_from_py(cls_dtype, &dt) : -2;
        Py_DECREF(cls_dtype);
        if (r == -2) {
            PyErr_Format(PyExc_TypeError, "type(): expected a dtype, a tensor type or its name, got %.100s",
                         ((PyTypeObject *)d)->tp_name);
            return NULL;
        }
        if (r < 0) return NULL;
        return convert_to(self, dt);
    }
    if (em_dtype_from_py(d, &dt) < 0) return NULL;
    return convert_to(self, dt);
}

static PyObject *m_cpu(PyObject *self, PyObject *a, PyObject *k) {
    TF_METHOD("cpu", a, k);
    if (em_is_cpu(SELF)) return Py_NewRef(self);
    return to_device(self, em_cpu(), (EmDType)SELF->dtype, false);
}

/* cuda(device=None, non_blocking=False) */
static PyObject *m_cuda(PyObject *self, PyObject *args, PyObject *kw) {
    TF_METHOD("cuda", args, kw);
    static char *kwlist[] = {"device", "non_blocking", "memory_format", NULL};
    PyObject *dev_o = Py_None, *mf = Py_None;
    int non_blocking = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OpO:cuda", kwlist, &dev_o, &non_blocking, &mf)) return NULL;
    EmDevice dev = {EM_CUDA, -1};
    if (dev_o != Py_None) {
        if (em_device_from_py(dev_o, &dev) < 0) return NULL;
        if (dev.type != EM_CUDA) {
            PyErr_Format(PyExc_RuntimeError, "Invalid device, must be cuda device");
            return NULL;
        }
    }
    if (em_cuda_resolve(&dev) < 0) return NULL;
    if (em_device_eq(dev, em_device(SELF))) return Py_NewRef(self);
    return to_device(self, dev, (EmDType)SELF->dtype, non_blocking);
}

static PyObject *m_requires_grad_(PyObject *self, PyObject *args, PyObject *kw) {
    TF_METHOD("requires_grad_", args, kw);
    static char *kwlist[] = {"requires_grad", NULL};
    PyObject *v = Py_True;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:requires_grad_", kwlist, &v)) return NULL;
    if (set_requires_grad(self, v, NULL) < 0) return NULL;
    return Py_NewRef(self);
}

/* Raw bytes of the elements in logical order (for pickling). */
static PyObject *m_raw_bytes(PyObject *self, PyObject *u) {
    EmTensor *c = em_is_cpu(SELF) ? em_contiguous(SELF) : em_to_device(SELF, em_cpu(), false);
    if (c && !em_is_contiguous(c)) Py_SETREF(c, em_contiguous(c));
    if (!c) return NULL;
    PyObject *b = PyBytes_FromStringAndSize(em_data(c), c->numel * em_itemsize(c->dtype));
    Py_DECREF(c);
    return b;
}

static PyObject *m_repr(PyObject *self) {
    PyObject *f = em_py_helper("repr");
    return f ? PyObject_CallOneArg(f, self) : NULL;
}

static PyMethodDef hand_methods[] = {
    {"size", (PyCFunction)(void (*)(void))m_size, METH_FASTCALL | METH_KEYWORDS, "size(dim=None)"},
    {"stride", (PyCFunction)(void (*)(void))m_stride, METH_FASTCALL | METH_KEYWORDS, "stride(dim=None)"},
    {"dim", m_dim, METH_NOARGS, NULL},
    {"ndimension", m_dim, METH_NOARGS, NULL},
    {"numel", m_numel, METH_NOARGS, NULL},
    {"nelement", m_numel, METH_NOARGS, NULL},
    {"element_size", m_element_size, METH_NOARGS, NULL},
    {"storage_offset", m_storage_offset, METH_NOARGS, NULL},
    {"data_ptr", m_data_ptr, METH_NOARGS, NULL},
    {"is_contiguous", (PyCFunction)(void (*)(void))m_is_contiguous, METH_VARARGS | METH_KEYWORDS, NULL},
    {"is_floating_point", m_is_floating_point, METH_NOARGS, NULL},
    {"is_signed", m_is_signed, METH_NOARGS, NULL},
    {"is_complex", m_is_complex, METH_NOARGS, NULL},
    {"is_pinned", (PyCFunction)(void (*)(void))m_is_pinned, METH_VARARGS | METH_KEYWORDS, NULL},
    {"pin_memory", (PyCFunction)(void (*)(void))m_pin_memory, METH_VARARGS | METH_KEYWORDS, NULL},
    {"record_stream", m_record_stream, METH_O, NULL},
    {"get_device", m_get_device, METH_NOARGS, NULL},
    {"item", m_item, METH_NOARGS, NULL},
    {"tolist", m_tolist, METH_NOARGS, NULL},
    {"untyped_storage", m_untyped_storage, METH_NOARGS, NULL},
    {"set_", (PyCFunction)(void (*)(void))m_set_, METH_VARARGS | METH_KEYWORDS,
     "set_(source=None, storage_offset=0, size=None, stride=None)"},
    {"numpy", (PyCFunction)(void (*)(void))m_numpy, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack__", (PyCFunction)(void (*)(void))m_dlpack, METH_VARARGS | METH_KEYWORDS, NULL},
    {"__dlpack_device__", m_dlpack_device, METH_NOARGS, NULL},
    {"to", (PyCFunction)(void (*)(void))m_to, METH_VARARGS | METH_KEYWORDS, NULL},
    {"type", (PyCFunction)(void (*)(void))m_type, METH_VARARGS | METH_KEYWORDS, NULL},
    {"float", (PyCFunction)(void (*)(void))m_float, METH_VARARGS | METH_KEYWORDS, NULL},
    {"double", (PyCFunction)(void (*)(void))m_double, METH_VARARGS | METH_KEYWORDS, NULL},
    {"half", (PyCFunction)(void (*)(void))m_half, METH_VARARGS | METH_KEYWORDS, NULL},
    {"bfloat16", (PyCFunction)(void (*)(void))m_bfloat16, METH_VARARGS | METH_KEYWORDS, NULL},
    {"int", (PyCFunction)(void (*)(void))m_int, METH_VARARGS | METH_KEYWORDS, NULL},
    {"long", (PyCFunction)(void (*)(void))m_long, METH_VARARGS | METH_KEYWORDS, NULL},
    {"short", (PyCFunction)(void (*)(void))m_short, METH_VARARGS | METH_KEYWORDS, NULL},
    {"char", (PyCFunction)(void (*)(void))m_char, METH_VARARGS | METH_KEYWORDS, NULL},
    {"byte", (PyCFunction)(void (*)(void))m_byte, METH_VARARGS | METH_KEYWORDS, NULL},
    {"bool", (PyCFunction)(void (*)(void))m_bool, METH_VARARGS | METH_KEYWORDS, NULL},
    {"cpu", (PyCFunction)(void (*)(void))m_cpu, METH_VARARGS | METH_KEYWORDS, NULL},
    {"cuda", (PyCFunction)(void (*)(void))m_cuda, METH_VARARGS | METH_KEYWORDS, NULL},
    {"requires_grad_", (PyCFunction)(void (*)(void))m_requires_grad_, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_raw_bytes", m_raw_bytes, METH_NOARGS, NULL},
    {"as_subclass", m_as_subclass, METH_O, "as_subclass(cls): a cls instance with the same data, in the same graph."},
    {"_make_subclass", (PyCFunction)(void (*)(void))make_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_STATIC, NULL},
    {NULL},
};

/* Joins the hand-written methods with the op table's and readies the type. */
int em_init_tensor_type(PyObject *m) {
    PyMethodDef *op_methods;
    if (em_init_ops(m, &op_methods) < 0) return -1;
    size_t nh = sizeof hand_methods / sizeof hand_methods[0] - 1, no = 0;
    while (op_methods[no].ml_name) no++;
    PyMethodDef *all = PyMem_Calloc(nh + no + 1, sizeof(PyMethodDef)); /* lives with the type */
    if (!all) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(all, hand_methods, nh * sizeof(PyMethodDef));
    memcpy(all + nh, op_methods, no * sizeof(PyMethodDef));
    /* the Python face of core/tensor.c's type object */
    EmTensorType.tp_new = tensor_new;
    EmTensorType.tp_repr = m_repr;
    EmTensorType.tp_as_number = &tensor_as_number;
    EmTensorType.tp_as_sequence = &tensor_as_sequence;
    EmTensorType.tp_as_mapping = &tensor_as_mapping;
    EmTensorType.tp_richcompare = richcompare;
    EmTensorType.tp_iter = tensor_iter;
    EmTensorType.tp_getset = tensor_getset;
    EmTensorType.tp_methods = all;
    EmTensorType.tp_hash = PyBaseObject_Type.tp_hash; /* identity, like torch */
    if (PyType_Ready(&EmTensorType) < 0) return -1;
    /* NumPy defers binary operators to tensors */
    PyObject *prio = PyFloat_FromDouble(1000.0);
    if (!prio || PyDict_SetItemString(EmTensorType.tp_dict, "__array_priority__", prio) < 0) {
        Py_XDECREF(prio);
        return -1;
    }
    Py_DECREF(prio);
    PyType_Modified(&EmTensorType);
    return PyModule_AddObjectRef(m, "Tensor", (PyObject *)&EmTensorType);
}
