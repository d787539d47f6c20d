/* shape.c — shape arithmetic shared by every op: dim wrapping, contiguous
 * strides, overflow-checked numel, broadcasting, the stride computation that
 * decides whether a view is possible, shape parsing from Python, and the
 * `ember.Size` tuple type. */
#include "../ember.h"

int em_wrap_dim(int64_t dim, int ndim, int *out) {
    int64_t n = ndim > 0 ? ndim : 1; /* a 0-d tensor accepts dims -1 and 0 */
    if (dim < -n || dim >= n) {
        PyErr_Format(PyExc_IndexError,
                     "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                     (long long)-n, (long long)(n - 1), (long long)dim);
        return -1;
    }
    *out = (int)(dim < 0 ? dim + n : dim);
    return 0;
}

void em_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= sizes[d] > 1 ? sizes[d] : 1;
    }
}

int em_numel_checked(int ndim, const int64_t *sizes, int64_t *numel) {
    int64_t n = 1;
    bool overflow = false, has_zero = false;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] < 0) {
            char buf[EM_SHAPE_BUF];
            PyErr_Format(PyExc_RuntimeError, "Trying to create tensor with negative dimension %lld: %s",
                         (long long)sizes[d], em_shape_str(ndim, sizes, buf, sizeof buf));
            return -1;
        }
        has_zero |= sizes[d] == 0;
        if (__builtin_mul_overflow(n, sizes[d], &n)) overflow = true;
    }
    if (has_zero) {
        n = 0; /* a zero anywhere makes the product 0 even if a partial product overflowed */
    } else if (overflow) {
        char buf[EM_SHAPE_BUF];
        PyErr_Format(PyExc_RuntimeError, "numel: integer multiplication overflow for shape %s",
                     em_shape_str(ndim, sizes, buf, sizeof buf));
        return -1;
    }
    *numel = n;
    return 0;
}

int em_extent_checked(int ndim, const int64_t *sizes, const int64_t *strides, int64_t *extent) {
    int64_t e = 1, term;
    for (int d = 0; d < ndim; d++) {
        if (sizes[d] == 0) {
            *extent = 0;
            return 0;
        }
    }
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0 || __builtin_mul_overflow(sizes[d] - 1, strides[d], &term) ||
            __builtin_add_overflow(e, term, &e)) {
            PyErr_SetString(PyExc_RuntimeError,
                            "the tensor's sizes and strides address more memory than can be indexed");
            return -1;
        }
    }
    *extent = e;
    return 0;
}

const char *em_shape_str(int ndim, const int64_t *sizes, char *buf, size_t n) {
    size_t k = 0;
    k += snprintf(buf + k, n - k, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)sizes[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

int em_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                        int64_t *out) {
    int n = na > nb ? na : nb;
    int64_t res[EM_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int da = na - n + i, db = nb - n + i;
        int64_t sa = da >= 0 ? a[da] : 1, sb = db >= 0 ? b[db] : 1;
        if (sa == sb || sb == 1)
            res[i] = sa;
        else if (sa == 1)
            res[i] = sb;
        else {
            PyErr_Format(PyExc_RuntimeError,
                         "The size of tensor a (%lld) must match the size of tensor b (%lld) at "
                         "non-singleton dimension %d",
                         (long long)sa, (long long)sb, i);
            return -1;
        }
    }
    memcpy(out, res, n * sizeof(int64_t));
    *nout = n;
    return 0;
}

/* Note [view strides]: a view can reuse the storage when every group of new
 * dims covers exactly one "chunk" of old dims that are laid out contiguously
 * with respect to each other. Walk old dims from the innermost, closing a
 * chunk whenever the next-outer dim is not stride-contiguous with it, and
 * assign strides to the new dims that multiply up to the chunk's size. */
bool em_compute_view_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                             int new_ndim, const int64_t *new_sizes, int64_t *new_strides) {
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= sizes[d];
    if (numel == 0 || ndim == 0) {
        em_contiguous_strides(new_ndim, new_sizes, new_strides);
        return true;
    }
    int view_d = new_ndim - 1;
    int64_t chunk_stride = strides[ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        tensor_numel *= sizes[d];
        bool chunk_ends = d == 0 ||
                          (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
            new_strides[view_d] = view_numel * chunk_stride;
            view_numel *= new_sizes[view_d];
            view_d--;
        }
        if (view_numel != tensor_numel) return false;
        if (d > 0) {
            chunk_stride = strides[d - 1];
            tensor_numel = 1;
            view_numel = 1;
        }
    }
    return view_d == -1;
}

/* ------------------------------------------------------------ parsing */

static int index_to_int64(PyObject *item, int64_t *out) {
    if (PyLong_Check(item) && !PyBool_Check(item)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_RuntimeError, "Overflow when unpacking long");
            return -1;
        }
        *out = v;
        return 0;
    }
    if (em_is_tensor(item)) {
        EmTensor *t = (EmTensor *)item;
        if (t->numel == 1 && !em_is_float(t->dtype) && t->dtype != EM_BOOL) {
            EmScalar s;
            if (em_scalar_from_py(item, &s) < 0) return -1;
            *out = s.v.i;
            return 0;
        }
        return 1;
    }
    if (!PyBool_Check(item) && !PyFloat_Check(item) && PyIndex_Check(item)) {
        PyObject *i = PyNumber_Index(item);
        if (!i) return -1;
        long long v = PyLong_AsLongLong(i);
        Py_DECREF(i);
        if (v == -1 && PyErr_Occurred()) return -1;
        *out = v;
        return 0;
    }
    return 1; /* not an int */
}

int em_parse_intlist(PyObject *obj, const char *fname, int *ndim, int64_t *sizes) {
    int64_t single;
    int r = index_to_int64(obj, &single);
    if (r < 0) return -1;
    int n = 0;
    if (r == 0) {
        sizes[0] = single;
        n = 1;
    } else {
        if (!PyTuple_Check(obj) && !PyList_Check(obj)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'size' must be tuple of ints, not %.100s", fname,
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        Py_ssize_t len = PySequence_Fast_GET_SIZE(obj);
        if (len > EM_MAX_DIMS) {
            PyErr_Format(PyExc_RuntimeError, "%s(): number of dimensions %zd exceeds the maximum of %d",
                         fname, len, EM_MAX_DIMS);
            return -1;
        }
        PyObject **items = PySequence_Fast_ITEMS(obj);
        for (Py_ssize_t i = 0; i < len; i++) {
            r = index_to_int64(items[i], &sizes[i]);
            if (r < 0) return -1;
            if (r > 0) {
                PyErr_Format(PyExc_TypeError,
                             "%s(): argument 'size' must be tuple of ints, but found element of "
                             "type %.100s at pos %zd",
                             fname, Py_TYPE(items[i])->tp_name, i);
                return -1;
            }
        }
        n = (int)len;
    }
    *ndim = n;
    return 0;
}

int em_parse_shape(PyObject *obj, const char *fname, int *ndim, int64_t *sizes,
                   bool allow_minus_one) {
    int n;
    if (em_parse_intlist(obj, fname, &n, sizes) < 0) return -1;
    int minus_ones = 0;
    for (int d = 0; d < n; d++) {
        if (sizes[d] == -1 && allow_minus_one) {
            if (++minus_ones > 1) {
                PyErr_SetString(PyExc_RuntimeError, "only one dimension can be inferred");
                return -1;
            }
        } else if (sizes[d] < 0) {
            char buf[EM_SHAPE_BUF];
            PyErr_Format(PyExc_RuntimeError, "Trying to create tensor with negative dimension %lld: %s",
                         (long long)sizes[d], em_shape_str(n, sizes, buf, sizeof buf));
            return -1;
        }
    }
    *ndim = n;
    return 0;
}

/* ----------------------------------------------------------- ember.Size */

PyTypeObject *EmSizeType;
static PyTypeObject EmSizeTypeObj;

PyObject *em_size_new(int ndim, const int64_t *sizes) {
    PyTupleObject *t = (PyTupleObject *)EmSizeTypeObj.tp_alloc(&EmSizeTypeObj, ndim);
    if (!t) return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *v = PyLong_FromLongLong(sizes[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        t->ob_item[i] = v;
    }
    return (PyObject *)t;
}

static PyObject *size_from_tuple(PyObject *tup) {
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    PyTupleObject *t = (PyTupleObject *)EmSizeTypeObj.tp_alloc(&EmSizeTypeObj, n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) t->ob_item[i] = Py_NewRef(PyTuple_GET_ITEM(tup, i));
    return (PyObject *)t;
}

static PyObject *size_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *seq = NULL;
    if (!PyArg_ParseTuple(args, "|O:Size", &seq)) return NULL;
    PyObject *tup = seq ? PySequence_Tuple(seq) : PyTuple_New(0);
    if (!tup) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tup); i++) {
        int64_t v;
        int r = index_to_int64(PyTuple_GET_ITEM(tup, i), &v);
        if (r != 0) {
            if (r > 0)
                PyErr_Format(PyExc_TypeError,
                             "ember.Size() takes an iterable of 'int' (item %zd is '%.100s')", i,
                             Py_TYPE(PyTuple_GET_ITEM(tup, i))->tp_name);
            Py_DECREF(tup);
            return NULL;
        }
        PyObject *iv = PyLong_FromLongLong(v);
        if (!iv) { Py_DECREF(tup); return NULL; }
        PyObject *old = PyTuple_GET_ITEM(tup, i);
        PyTuple_SET_ITEM(tup, i, iv);
        Py_DECREF(old);
    }
    PyObject *r = size_from_tuple(tup);
    Py_DECREF(tup);
    return r;
}

static PyObject *size_repr(PyObject *self) {
    Py_ssize_t n = PyTuple_GET_SIZE(self);
    PyObject *parts = PyList_New(n);
    if (!parts) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyObject_Repr(PyTuple_GET_ITEM(self, i));
        if (!r) { Py_DECREF(parts); return NULL; }
        PyList_SET_ITEM(parts, i, r);
    }
    PyObject *sep = PyUnicode_FromString(", ");
    PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
    Py_XDECREF(sep);
    Py_DECREF(parts);
    if (!joined) return NULL;
    PyObject *r = PyUnicode_FromFormat("ember.Size([%U])", joined);
    Py_DECREF(joined);
    return r;
}

static PyObject *size_subscript(PyObject *self, PyObject *key) {
    PyObject *r = PyTuple_Type.tp_as_mapping->mp_subscript(self, key);
    if (r && PySlice_Check(key) && PyTuple_CheckExact(r)) {
        PyObject *s = size_from_tuple(r);
        Py_DECREF(r);
        return s;
    }
    return r;
}

static PyObject *size_binop_result(PyObject *r) {
    if (r && PyTuple_CheckExact(r)) {
        PyObject *s = size_from_tuple(r);
        Py_DECREF(r);
        return s;
    }
    return r;
}
static PyObject *size_concat(PyObject *a, PyObject *b) {
    return size_binop_result(PyTuple_Type.tp_as_sequence->sq_concat(a, b));
}
static PyObject *size_repeat(PyObject *a, Py_ssize_t n) {
    return size_binop_result(PyTuple_Type.tp_as_sequence->sq_repeat(a, n));
}

static PyObject *size_numel(PyObject *self, PyObject *unused) {
    int64_t n = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self); i++) {
        int64_t v = PyLong_AsLongLong(PyTuple_GET_ITEM(self, i));
        if (v == -1 && PyErr_Occurred()) return NULL;
        n *= v;
    }
    return PyLong_FromLongLong(n);
}

static PyObject *size_reduce(PyObject *self, PyObject *unused) {
    PyObject *tup = PySequence_Tuple(self);
    if (!tup) return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)&EmSizeTypeObj, tup);
}

static PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, "Number of elements a tensor of this shape holds."},
    {"__reduce__", size_reduce, METH_NOARGS, NULL},
    {NULL},
};
static PyMappingMethods size_as_mapping;
static PySequenceMethods size_as_sequence;

static PyTypeObject EmSizeTypeObj = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.Size",
    .tp_basicsize = sizeof(PyTupleObject) - sizeof(PyObject *),
    .tp_itemsize = sizeof(PyObject *),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_TUPLE_SUBCLASS,
    .tp_new = size_new,
    .tp_repr = size_repr,
    .tp_methods = size_methods,
    .tp_as_mapping = &size_as_mapping,
    .tp_as_sequence = &size_as_sequence,
    .tp_doc = "The shape of a tensor: a tuple of ints.",
};

int em_init_size(PyObject *m) {
    EmSizeTypeObj.tp_base = &PyTuple_Type;
    size_as_mapping = *PyTuple_Type.tp_as_mapping;
    size_as_mapping.mp_subscript = size_subscript;
    size_as_sequence = *PyTuple_Type.tp_as_sequence;
    size_as_sequence.sq_concat = size_concat;
    size_as_sequence.sq_repeat = size_repeat;
    if (PyType_Ready(&EmSizeTypeObj) < 0) return -1;
    EmSizeType = &EmSizeTypeObj;
    return PyModule_AddObjectRef(m, "Size", (PyObject *)&EmSizeTypeObj);
}
