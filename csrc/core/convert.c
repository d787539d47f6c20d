/* convert.c — Python data to tensors and back: ember.tensor()'s nested
 * sequences (shape and dtype inferred as torch infers them), tolist() and
 * item(). NumPy arrays go through numpy.c. */
#include "../ember.h"

/* dtype of a NumPy scalar (np.float32(1) ...), from numpy.c; 0 when o isn't one */
int em_numpy_scalar_dtype(PyObject *o, EmDType *out);

typedef struct {
    int ndim;
    int64_t shape[EM_MAX_DIMS];
    int dtype; /* EM_NUM_DTYPES until a leaf is seen */
} Inferred;

static bool is_leaf_number(PyObject *o) {
    return PyFloat_Check(o) || PyLong_Check(o); /* bool is a PyLong */
}

static void merge_dtype(Inferred *inf, EmDType d) {
    inf->dtype = inf->dtype == EM_NUM_DTYPES ? d : em_promote_types((EmDType)inf->dtype, d);
}

static int leaf_dtype(PyObject *o, Inferred *inf) {
    EmDType d;
    int r;
    if (PyBool_Check(o)) merge_dtype(inf, EM_BOOL);
    else if (PyLong_CheckExact(o)) merge_dtype(inf, EM_INT64);
    else if (PyFloat_CheckExact(o)) merge_dtype(inf, em_default_float);
    else if (em_is_tensor(o)) {
        EmTensor *t = (EmTensor *)o;
        if (t->numel != 1) { /* torch reads a float element as a scalar, an int one as an index */
            if (em_is_float((EmDType)t->dtype))
                PyErr_SetString(PyExc_ValueError, "only one element tensors can be converted to Python scalars");
            else
                PyErr_SetString(PyExc_TypeError, "only integer tensors of a single element can be converted to an index");
            return -1;
        }
        merge_dtype(inf, (EmDType)t->dtype);
    } else if ((r = em_numpy_scalar_dtype(o, &d)) != 0) { /* np.float64 is a float subclass */
        if (r < 0) return -1;
        merge_dtype(inf, d);
    } else if (PyLong_Check(o)) merge_dtype(inf, EM_INT64);
    else if (PyFloat_Check(o)) merge_dtype(inf, em_default_float);
    else {
        if (PyComplex_Check(o)) merge_dtype(inf, em_complex_of(em_default_float));
        else if (PyIndex_Check(o)) merge_dtype(inf, EM_INT64);
        else if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float)
            merge_dtype(inf, em_default_float);
        else {
            PyErr_Format(PyExc_RuntimeError, "Could not infer dtype of %.100s", Py_TYPE(o)->tp_name);
            return -1;
        }
    }
    return inf->dtype == EM_DTYPE_ERROR ? -1 : 0;
}

static bool is_sequence(PyObject *o) {
    if (PyList_Check(o) || PyTuple_Check(o)) return true;
    if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || em_is_tensor(o)) return false;
    return PySequence_Check(o) && !is_leaf_number(o) && PyObject_HasAttrString(o, "__len__");
}

/* Walk everything: check each sequence's length against the shape taken
 * from the first elements, and promote the leaves' dtypes. */
static int infer(PyObject *o, int depth, Inferred *inf) {
    if (depth == inf->ndim) {
        if (is_sequence(o)) {
            PyErr_Format(PyExc_ValueError, "expected a number at dim %d, got a sequence", depth);
            return -1;
        }
        if (PyUnicode_Check(o) || PyBytes_Check(o)) {
            PyErr_Format(PyExc_TypeError, "new(): invalid data type '%.100s'", Py_TYPE(o)->tp_name);
            return -1;
        }
        return leaf_dtype(o, inf);
    }
    if (!is_sequence(o)) {
        PyErr_Format(PyExc_TypeError, "not a sequence: expected a sequence of length %lld at dim %d, got %.100s",
                     (long long)inf->shape[depth], depth, Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int r = 0;
    if (n != inf->shape[depth]) {
        PyErr_Format(PyExc_ValueError, "expected sequence of length %lld at dim %d (got %zd)",
                     (long long)inf->shape[depth], depth, n);
        r = -1;
    }
    for (Py_ssize_t i = 0; i < n && r == 0; i++)
        r = infer(PySequence_Fast_ITEMS(seq)[i], depth + 1, inf);
    Py_DECREF(seq);
    return r;
}

static int fill(PyObject *o, int depth, const Inferred *inf, EmDType dtype, char **ptr) {
    if (depth == inf->ndim) {
        EmScalar s;
        if (PyFloat_CheckExact(o)) {
            s.kind = 'f';
            s.v.f = PyFloat_AS_DOUBLE(o);
        } else if (PyLong_Check(o) && !PyBool_Check(o) && (em_is_float(dtype) || dtype == EM_UINT64)) {
            /* as torch reads a Python int for these: through a double, or as unsigned
             * (its OverflowError for a negative one or one past 2**64 - 1) */
            if (dtype == EM_UINT64) {
                unsigned long long u = PyLong_AsUnsignedLongLong(o);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
                s.kind = 'u';
                s.v.i = (int64_t)u;
            } else {
                s.kind = 'f';
                s.v.f = PyLong_AsDouble(o);
                if (s.v.f == -1.0 && PyErr_Occurred()) return -1;
            }
        } else if (em_scalar_from_py(o, &s) < 0 || (s.kind == 'u' && PyLong_Check(o))) {
            /* torch's words for an int that does not fit int64 */
            if (PyLong_Check(o) && (s.kind == 'u' || PyErr_ExceptionMatches(PyExc_OverflowError))) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "Overflow when unpacking long long");
            }
            return -1;
        }
        if (!em_is_tensor(o) && em_scalar_check_range(s, dtype) < 0) return -1;
        em_scalar_store(s, dtype, *ptr);
        *ptr += em_itemsize(dtype);
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) return -1;
    int r = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq) && r == 0; i++)
        r = fill(PySequence_Fast_ITEMS(seq)[i], depth + 1, inf, dtype, ptr);
    Py_DECREF(seq);
    return r;
}

EmTensor *em_tensor_from_data(PyObject *data, int dtype) {
    if (em_is_tensor(data)) {
        EmTensor *src = (EmTensor *)data;
        return em_to_dtype(src, dtype == EM_AUTO ? (EmDType)src->dtype : (EmDType)dtype, true);
    }
    int isarr = em_is_ndarray(data);
    if (isarr < 0) return NULL;
    if (isarr) {
        EmTensor *shared = em_from_numpy(data, false);
        if (!shared) return NULL;
        EmTensor *r = em_to_dtype(shared, dtype == EM_AUTO ? (EmDType)shared->dtype : (EmDType)dtype, true);
        Py_DECREF(shared);
        return r;
    }
    Inferred inf = {0, {0}, EM_NUM_DTYPES};
    /* shape from the chain of first elements */
    PyObject *cur = data;
    Py_INCREF(cur);
    while (is_sequence(cur)) {
        Py_ssize_t n = PySequence_Size(cur);
        if (n < 0) { Py_DECREF(cur); return NULL; }
        if (inf.ndim >= EM_MAX_DIMS) {
            Py_DECREF(cur);
            PyErr_Format(PyExc_ValueError, "too many dimensions (more than %d)", EM_MAX_DIMS);
            return NULL;
        }
        inf.shape[inf.ndim++] = n;
        if (n == 0) break;
        PyObject *first = PySequence_GetItem(cur, 0);
        Py_DECREF(cur);
        if (!first) return NULL;
        cur = first;
        if (PyUnicode_Check(cur)) { /* torch reads a string here as one more dimension */
            Py_DECREF(cur);
            PyErr_SetString(PyExc_ValueError, "too many dimensions 'str'");
            return NULL;
        }
    }
    Py_DECREF(cur);
    if (infer(data, 0, &inf) < 0) return NULL;
    EmDType d = dtype != EM_AUTO ? (EmDType)dtype
                : inf.dtype == EM_NUM_DTYPES ? em_default_float : (EmDType)inf.dtype;
    EmTensor *t = em_empty(inf.ndim, inf.shape, d, em_cpu());
    if (!t) return NULL;
    char *p = em_data(t);
    if (t->numel > 0 && fill(data, 0, &inf, d, &p) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

/* ------------------------------------------------------------- back */

static PyObject *tolist_rec(EmTensor *t, int dim, const char *p) {
    if (dim == t->ndim) return em_scalar_to_py(em_scalar_load(p, (EmDType)t->dtype));
    PyObject *l = PyList_New(t->sizes[dim]);
    if (!l) return NULL;
    int64_t step = t->strides[dim] * em_itemsize(t->dtype);
    for (int64_t i = 0; i < t->sizes[dim]; i++) {
        PyObject *v = tolist_rec(t, dim + 1, p + i * step);
        if (!v) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, v);
    }
    return l;
}

PyObject *em_tensor_tolist(EmTensor *t) {
    if (!em_is_cpu(t)) { /* through the host */
        EmTensor *h = em_to_device(t, em_cpu(), false);
        PyObject *r = h ? em_tensor_tolist(h) : NULL;
        Py_XDECREF(h);
        return r;
    }
    return tolist_rec(t, 0, em_data(t));
}

PyObject *em_tensor_item(EmTensor *t) {
    if (t->numel != 1) {
        PyErr_Format(PyExc_RuntimeError, "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)t->numel);
        return NULL;
    }
    if (em_is_meta(t)) {
        PyErr_SetString(PyExc_RuntimeError, "Tensor.item() cannot be called on meta tensors");
        return NULL;
    }
    if (!em_is_cpu(t)) {
        EmTensor *h = em_to_device(t, em_cpu(), false);
        PyObject *r = h ? em_tensor_item(h) : NULL;
        Py_XDECREF(h);
        return r;
    }
    return em_scalar_to_py(em_scalar_load(em_data(t), (EmDType)t->dtype));
}

/* _C._from_bytes(data, dtype, shape): a new tensor holding a copy of the
 * bytes (pickling's inverse of Tensor._raw_bytes). */
PyObject *em_from_bytes(PyObject *m, PyObject *args) {
    Py_buffer buf;
    PyObject *dt, *shape_o;
    if (!PyArg_ParseTuple(args, "y*OO:_from_bytes", &buf, &dt, &shape_o)) return NULL;
    EmTensor *t = NULL;
    EmDType d;
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (em_dtype_from_py(dt, &d) < 0 || em_parse_shape(shape_o, "_from_bytes", &n, shape, false) < 0)
        goto done;
    t = em_empty(n, shape, d, em_cpu());
    if (!t) goto done;
    if (t->numel * em_itemsize(d) != buf.len) {
        PyErr_Format(PyExc_ValueError, "_from_bytes: %zd bytes do not make a %s tensor of %lld elements",
                     buf.len, em_dtype_info[d].name, (long long)t->numel);
        Py_CLEAR(t);
        goto done;
    }
    memcpy(em_data(t), buf.buf, (size_t)buf.len);
done:
    PyBuffer_Release(&buf);
    return (PyObject *)t;
}
