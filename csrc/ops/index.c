/* index.c — Tensor.__getitem__ / __setitem__ for basic indexing: ints,
 * slices (positive steps), None, Ellipsis and Python bools. Each key
 * becomes a view over the same storage; assignment copies (broadcasting,
 * casting) or fills into that view. */
#include "../ember.h"

/* An int-like key: Python int, NumPy integer, or a 0-d integer tensor. */
static int index_value(PyObject *k, int64_t *out) {
    if (PyBool_Check(k)) return 1;
    if (PyLong_Check(k)) {
        int overflow;
        *out = PyLong_AsLongLongAndOverflow(k, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_IndexError, "index out of range");
            return -1;
        }
        return 0;
    }
    if (em_is_tensor(k)) {
        EmTensor *t = (EmTensor *)k;
        if (t->ndim != 0 || !em_is_int((EmDType)t->dtype)) return 1;
        EmScalar s;
        if (em_scalar_from_py(k, &s) < 0) return -1;
        *out = s.v.i;
        return 0;
    }
    if (PyIndex_Check(k) && !PyFloat_Check(k)) {
        PyObject *i = PyNumber_Index(k);
        if (!i) return -1;
        *out = PyLong_AsLongLong(i);
        Py_DECREF(i);
        return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
    }
    return 1;
}

EmTensor *em_getitem(EmTensor *t, PyObject *key) {
    PyObject *tup = PyTuple_Check(key) ? Py_NewRef(key) : PyTuple_Pack(1, key);
    if (!tup) return NULL;
    Py_ssize_t nk = PyTuple_GET_SIZE(tup);
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], offset = t->offset, iv;
    int nd = 0, d = 0, consumed = 0;
    bool seen_ellipsis = false;
    EmTensor *r = NULL;

    /* how many tensor dims the key consumes (ints and slices) */
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(tup, i);
        if (k == Py_None || k == Py_Ellipsis || PyBool_Check(k)) continue;
        if (PySlice_Check(k)) { consumed++; continue; }
        int r2 = index_value(k, &iv);
        if (r2 < 0) goto fail;
        if (r2 > 0) {
            PyErr_Format(PyExc_IndexError,
                         "only integers, slices (`:`), ellipsis (`...`) and None (`newaxis`) are "
                         "valid indices in this version of ember (got %.100s)", Py_TYPE(k)->tp_name);
            goto fail;
        }
        consumed++;
    }
    EM_CHECK(consumed <= t->ndim, PyExc_IndexError, "too many indices for tensor of dimension %d", t->ndim);

    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *k = PyTuple_GET_ITEM(tup, i);
        EM_CHECK(nd < EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
        if (k == Py_None || PyBool_Check(k)) {
            sizes[nd] = k == Py_False ? 0 : 1;
            strides[nd++] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else if (k == Py_Ellipsis) {
            /* torch accepts x[..., ...] (only ellipses) but nothing else with two */
            EM_CHECK(!seen_ellipsis || consumed == 0, PyExc_IndexError,
                     "an index can only have a single ellipsis ('...')");
            int skip = seen_ellipsis ? 0 : t->ndim - consumed;
            seen_ellipsis = true;
            for (; skip > 0; skip--, d++) {
                sizes[nd] = t->sizes[d];
                strides[nd++] = t->strides[d];
            }
        } else if (PySlice_Check(k)) {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(k, &start, &stop, &step) < 0) goto fail;
            EM_CHECK(step > 0, PyExc_ValueError, "step must be greater than zero");
            Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)t->sizes[d], &start, &stop, step);
            sizes[nd] = len;
            strides[nd++] = t->strides[d] * step;
            if (len > 0) offset += start * t->strides[d];
            d++;
        } else {
            index_value(k, &iv);
            int64_t size = t->sizes[d];
            EM_CHECK(iv >= -size && iv < size, PyExc_IndexError,
                     "index %lld is out of bounds for dimension %d with size %lld", (long long)iv, d,
                     (long long)size);
            if (iv < 0) iv += size;
            offset += iv * t->strides[d];
            d++;
        }
    }
    for (; d < t->ndim; d++) {
        EM_CHECK(nd < EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
        sizes[nd] = t->sizes[d];
        strides[nd++] = t->strides[d];
    }
    r = em_view_of(t, nd, sizes, strides, offset);
fail:
    Py_DECREF(tup);
    return r;
}

PyObject *em_impl_index(EmCall *c) { return (PyObject *)em_getitem(em_arg_tensor(c, 0), c->args[1]); }

int em_setitem(EmTensor *t, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "Tensor does not support item deletion");
        return -1;
    }
    EmTensor *view = em_getitem(t, key);
    if (!view) return -1;
    int r = -1;
    EmOperand o;
    int kind = em_to_operand(value, &o);
    if (kind < 0) goto done;
    if (kind == 0 && !o.t) { /* a number: fill_ the view */
        PyObject *args[2] = {(PyObject *)view, value};
        PyObject *res = em_op(EM_OP_fill_, 2, args);
        r = res ? 0 : -1;
        Py_XDECREF(res);
        goto done;
    }
    if (kind > 0 && !PySequence_Check(value)) {
        PyErr_Format(PyExc_TypeError, "can't assign a %.100s to a tensor of dtype %s",
                     Py_TYPE(value)->tp_name, em_dtype_info[view->dtype].name);
        goto done;
    }
    EmTensor *src = kind == 0 ? (EmTensor *)Py_NewRef(value) : em_tensor_from_data(value, view->dtype);
    if (!src) goto done;
    /* leading size-1 dims of the value beyond the target's rank are dropped */
    int lead = 0;
    while (src->ndim - lead > view->ndim && src->sizes[lead] == 1) lead++;
    if (lead) {
        PyObject *shape = em_size_new(src->ndim - lead, src->sizes + lead);
        PyObject *args[2] = {(PyObject *)src, shape};
        EmTensor *s2 = shape ? em_op_t(EM_OP_view, 2, args) : NULL;
        Py_XDECREF(shape);
        Py_SETREF(src, s2);
        if (!src) goto done;
    }
    /* copy_ into the view, through the op pipeline: version bump and, when
     * autograd is involved, Note [in-place on views] */
    PyObject *args[2] = {(PyObject *)view, (PyObject *)src};
    PyObject *res = em_op(EM_OP_copy_, 2, args);
    r = res ? 0 : -1;
    Py_XDECREF(res);
    Py_DECREF(src);
done:
    Py_DECREF(view);
    return r;
}
