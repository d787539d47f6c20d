/* index.c — Tensor.__getitem__ / __setitem__. The key is read as torch
 * reads it: integers (Python, NumPy, 0-d integer tensors) select, slices
 * (positive steps) narrow, None adds a dim, `...` expands — all as a view;
 * tensors (int64/int32 indices, bool/uint8 masks), lists, NumPy arrays and
 * Python bools are advanced indices, handed with the view to
 * ops/index_advanced.c (Note [advanced indexing]): the result is a copy and
 * assignment writes through index_put_. Without advanced indices,
 * assignment copies (broadcasting, casting) or fills into the view. */
#include "../ember.h"

enum { K_NONE, K_ELLIPSIS, K_BOOL, K_INT, K_SLICE, K_TENSOR };

typedef struct {
    int kind;
    int64_t value;     /* K_INT: the index; K_BOOL: 0 / 1 */
    PyObject *obj;     /* K_SLICE: the slice (borrowed) */
    EmTensor *tensor;  /* K_TENSOR (new reference) */
} KeyItem;

typedef struct {
    int n;
    KeyItem items[EM_MAX_DIMS * 2];
} Key;

static void key_clear(Key *k) {
    for (int i = 0; i < k->n; i++) Py_CLEAR(k->items[i].tensor);
    k->n = 0;
}

static int bad_index_type(PyObject *o) {
    PyErr_Format(PyExc_IndexError,
                 "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                 "indices (got %.100s)",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static int bad_tensor_dtype(void) {
    PyErr_SetString(PyExc_IndexError, "tensors used as indices must be long, int, byte or bool tensors");
    return -1;
}

/* torch's indexing_tensor_from_data: bool (and uint8 arrays) stay masks,
 * everything else becomes int64 (floats truncate). */
static EmTensor *sequence_to_index(PyObject *seq) {
    int isarr = em_is_ndarray(seq);
    if (isarr < 0) return NULL;
    if (isarr) {
        PyObject *dt = PyObject_GetAttrString(seq, "dtype");
        if (!dt) return NULL;
        PyObject *kind = PyObject_GetAttrString(dt, "kind"), *isz = PyObject_GetAttrString(dt, "itemsize");
        Py_DECREF(dt);
        if (!kind || !isz) {
            Py_XDECREF(kind);
            Py_XDECREF(isz);
            return NULL;
        }
        bool keep = !PyUnicode_CompareWithASCIIString(kind, "b") ||
                    (!PyUnicode_CompareWithASCIIString(kind, "u") && PyLong_AsLong(isz) == 1);
        Py_DECREF(kind);
        Py_DECREF(isz);
        if (keep) return em_tensor_from_data(seq, EM_AUTO);
        PyObject *arr = PyObject_CallMethod(seq, "astype", "s", "int64");
        if (!arr) return NULL;
        EmTensor *t = em_tensor_from_data(arr, EM_AUTO);
        Py_DECREF(arr);
        return t;
    }
    EmTensor *t = em_tensor_from_data(seq, EM_AUTO);
    if (!t || t->dtype == EM_BOOL || t->dtype == EM_INT64) return t;
    EmTensor *r = em_to_dtype(t, EM_INT64, false);
    Py_DECREF(t);
    return r;
}

/* An int-like key item: Python int or another object with __index__. */
static int int_value(PyObject *k, int64_t *out) {
    PyObject *i = PyNumber_Index(k);
    if (!i) return -1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow) {
        PyErr_SetString(PyExc_IndexError, "index out of range");
        return -1;
    }
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* A tensor key item: 0-d integers select, 0-d bools act as Python bools. */
static int classify_tensor(EmTensor *t, KeyItem *it) {
    if (!em_is_cpu(t) && t->ndim > 0 &&
        (t->dtype == EM_INT64 || t->dtype == EM_INT32 || t->dtype == EM_BOOL)) { /* used on its device */
        it->kind = K_TENSOR;
        it->tensor = (EmTensor *)Py_NewRef(t);
        return 0;
    }
    if (!em_is_cpu(t)) { /* a GPU scalar (or uint8) index: its value is read here, so on the host */
        EmTensor *host = em_to_device(t, em_cpu(), false);
        int r = host ? classify_tensor(host, it) : -1;
        Py_XDECREF(host);
        return r;
    }
    EmDType d = (EmDType)t->dtype;
    if (d != EM_INT64 && d != EM_INT32 && d != EM_BOOL && d != EM_UINT8) {
        if (t->ndim == 0 && em_is_int(d)) { /* int8/int16 scalars still select */
            EmScalar s = em_scalar_load(em_data(t), d);
            it->kind = K_INT;
            it->value = s.v.i;
            return 0;
        }
        return bad_tensor_dtype();
    }
    if (em_check_cpu(t, "index") < 0) return -1;
    if (t->ndim == 0) {
        EmScalar s = em_scalar_load(em_data(t), d);
        it->kind = (d == EM_BOOL || d == EM_UINT8) ? K_BOOL : K_INT;
        it->value = it->kind == K_BOOL ? s.v.i != 0 : s.v.i;
        return 0;
    }
    if (d == EM_UINT8 &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "indexing with dtype ember.uint8 is now deprecated, please use a dtype ember.bool instead.",
                     1) < 0)
        return -1;
    it->kind = K_TENSOR;
    it->tensor = (EmTensor *)Py_NewRef(t);
    return 0;
}

static int classify(PyObject *o, KeyItem *it) {
    it->tensor = NULL;
    if (o == Py_None) {
        it->kind = K_NONE;
        return 0;
    }
    if (o == Py_Ellipsis) {
        it->kind = K_ELLIPSIS;
        return 0;
    }
    if (PyBool_Check(o)) {
        it->kind = K_BOOL;
        it->value = o == Py_True;
        return 0;
    }
    if (PySlice_Check(o)) {
        it->kind = K_SLICE;
        it->obj = o;
        return 0;
    }
    if (PyLong_Check(o)) {
        int overflow;
        it->kind = K_INT;
        it->value = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            PyErr_SetString(PyExc_IndexError, "index out of range");
            return -1;
        }
        return it->value == -1 && PyErr_Occurred() ? -1 : 0;
    }
    if (em_is_tensor(o)) return classify_tensor((EmTensor *)o, it);
    int isarr = em_is_ndarray(o);
    if (isarr < 0) return -1;
    if (!isarr && (PyFloat_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) ||
                   !strncmp(Py_TYPE(o)->tp_name, "numpy.bool", 10)))
        return bad_index_type(o);
    if (!isarr && PyIndex_Check(o)) { /* NumPy integers */
        it->kind = K_INT;
        return int_value(o, &it->value);
    }
    if (isarr || PySequence_Check(o)) {
        EmTensor *t = sequence_to_index(o);
        if (!t) return -1;
        int r = classify_tensor(t, it);
        Py_DECREF(t);
        return r;
    }
    return bad_index_type(o);
}

/* torch's treatSequenceAsTuple: a short list holding slices, None, `...`,
 * tensors or sequences is read as a tuple (deprecated, with a warning). */
static int list_as_tuple(PyObject *key) {
    if (PyTuple_Check(key)) return 1;
    if (!PyList_Check(key) || PyList_GET_SIZE(key) >= 32) return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(key); i++) {
        PyObject *o = PyList_GET_ITEM(key, i);
        if (em_is_tensor(o) || PySequence_Check(o) || PySlice_Check(o) || o == Py_Ellipsis || o == Py_None) {
            if (PyErr_WarnEx(PyExc_UserWarning,
                             "Using a non-tuple sequence for multidimensional indexing is deprecated; use "
                             "x[tuple(seq)] instead of x[seq]. A future version will read it as a tensor index, "
                             "x[ember.tensor(seq)], which will result either in an error or a different result",
                             1) < 0)
                return -1;
            return 1;
        }
    }
    return 0;
}

static int parse_key(PyObject *key, Key *k) {
    k->n = 0;
    if (!PyTuple_Check(key) && !PyList_Check(key)) { /* one item: no tuple to build */
        if (classify(key, &k->items[0]) < 0) return -1;
        k->n = 1;
        return 0;
    }
    int as_tuple = list_as_tuple(key);
    if (as_tuple < 0) return -1;
    PyObject *tup = as_tuple ? PySequence_Tuple(key) : PyTuple_Pack(1, key);
    if (!tup) return -1;
    Py_ssize_t nk = PyTuple_GET_SIZE(tup);
    if (nk > (Py_ssize_t)(sizeof k->items / sizeof k->items[0])) {
        Py_DECREF(tup);
        PyErr_SetString(PyExc_IndexError, "too many indices");
        return -1;
    }
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (classify(PyTuple_GET_ITEM(tup, i), &k->items[i]) < 0) {
            key_clear(k);
            Py_DECREF(tup);
            return -1;
        }
        k->n++;
    }
    Py_DECREF(tup);
    return 0;
}

/* The basic parts of the key as a view of t (new reference); advanced
 * indices land in idx[] (new references) at the view's dims. */
static EmTensor *apply_key(EmTensor *t, Key *k, EmTensor **idx, int *nadv) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], offset = t->offset;
    int nd = 0, d = 0, consumed = 0;
    bool seen_ellipsis = false;
    *nadv = 0;
    sizes[0] = strides[0] = 0; /* (a 0-d view reads neither) */
    /* idx[i] is set as view dim i is added: NULL, or the dim's index tensor */

    for (int i = 0; i < k->n; i++) { /* dims the key consumes */
        KeyItem *it = &k->items[i];
        if (it->kind == K_INT || it->kind == K_SLICE) consumed++;
        if (it->kind == K_TENSOR) {
            EmDType dt = (EmDType)it->tensor->dtype;
            consumed += (dt == EM_BOOL || dt == EM_UINT8) ? it->tensor->ndim : 1;
        }
    }
    EM_CHECK(consumed <= t->ndim, PyExc_IndexError, "too many indices for tensor of dimension %d", t->ndim);

    for (int i = 0; i < k->n; i++) {
        KeyItem *it = &k->items[i];
        EM_CHECK(nd < EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
        switch (it->kind) {
        case K_NONE:
            sizes[nd] = 1;
            idx[nd] = NULL;
            strides[nd++] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
            break;
        case K_BOOL: { /* a new dim of size 1, indexed by [0] (True) or [] (False) */
            int64_t n = it->value ? 1 : 0;
            EmTensor *ix = em_zeros(1, &n, EM_INT64, em_device(t));
            EM_TRY(ix);
            sizes[nd] = 1;
            strides[nd] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
            idx[nd++] = ix;
            (*nadv)++;
            break;
        }
        case K_ELLIPSIS: {
            /* torch accepts x[..., ...] (only ellipses) but nothing else with two */
            EM_CHECK(!seen_ellipsis || consumed == 0, PyExc_IndexError,
                     "an index can only have a single ellipsis ('...')");
            int skip = seen_ellipsis ? 0 : t->ndim - consumed;
            seen_ellipsis = true;
            for (; skip > 0; skip--, d++) {
                EM_CHECK(nd < EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
                sizes[nd] = t->sizes[d];
                idx[nd] = NULL;
                strides[nd++] = t->strides[d];
            }
            break;
        }
        case K_SLICE: {
            Py_ssize_t start, stop, step;
            if (PySlice_Unpack(it->obj, &start, &stop, &step) < 0) goto fail;
            EM_CHECK(step > 0, PyExc_ValueError, "step must be greater than zero");
            Py_ssize_t len = PySlice_AdjustIndices((Py_ssize_t)t->sizes[d], &start, &stop, step);
            sizes[nd] = len;
            idx[nd] = NULL;
            strides[nd++] = t->strides[d] * step;
            if (len > 0) offset += start * t->strides[d];
            d++;
            break;
        }
        case K_INT: {
            int64_t iv = it->value, size = t->sizes[d];
            EM_CHECK(iv >= -size && iv < size, PyExc_IndexError,
                     "index %lld is out of bounds for dimension %d with size %lld", (long long)iv, d,
                     (long long)size);
            if (iv < 0) iv += size;
            offset += iv * t->strides[d];
            d++;
            break;
        }
        default: { /* K_TENSOR: the dims it indexes stay in the view */
            EmTensor *ix = it->tensor;
            int used = (ix->dtype == EM_BOOL || ix->dtype == EM_UINT8) ? ix->ndim : 1;
            EM_CHECK(nd + used <= EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
            (*nadv)++;
            for (int j = 0; j < used; j++, d++) {
                sizes[nd] = t->sizes[d];
                idx[nd] = j ? NULL : (EmTensor *)Py_NewRef(ix);
                strides[nd++] = t->strides[d];
            }
            break;
        }
        }
    }
    for (; d < t->ndim; d++) {
        EM_CHECK(nd < EM_MAX_DIMS, PyExc_IndexError, "too many dimensions in index result");
        sizes[nd] = t->sizes[d];
        idx[nd] = NULL;
        strides[nd++] = t->strides[d];
    }
    EmTensor *view = em_view_of(t, nd, sizes, strides, offset);
    if (view) return view;
fail:
    for (int i = 0; i < nd; i++) Py_CLEAR(idx[i]);
    return NULL;
}

EmTensor *em_getitem(EmTensor *t, PyObject *key) {
    Key k;
    EmTensor *idx[EM_MAX_DIMS];
    int nadv;
    if (parse_key(key, &k) < 0) return NULL;
    EmTensor *view = apply_key(t, &k, idx, &nadv), *r = view;
    key_clear(&k);
    if (view && nadv) {
        r = em_index_advanced(view, idx);
        for (int i = 0; i < view->ndim; i++) Py_XDECREF(idx[i]);
        Py_DECREF(view);
    }
    return r;
}

PyObject *em_impl_index(EmCall *c) { return (PyObject *)em_getitem(em_arg_tensor(c, 0), c->args[1]); }

/* The value as a tensor of self's dtype (numbers: with torch's overflow
 * check), or the tensor itself; leading size-1 dims dropped as torch does. */
static EmTensor *value_tensor(EmTensor *self, PyObject *value) {
    EmOperand o;
    int kind = em_to_operand(value, &o);
    EmTensor *v;
    if (kind < 0) return NULL;
    if (kind == 0 && !o.t) {
        if (em_scalar_check_range(o.s, (EmDType)self->dtype) < 0) return NULL;
        return em_scalar_tensor(o.s, (EmDType)self->dtype, em_device(self));
    }
    v = kind == 0 ? (EmTensor *)Py_NewRef(value) : em_tensor_from_data(value, self->dtype);
    if (!v) return NULL;
    int lead = 0;
    while (lead < v->ndim && v->sizes[lead] == 1) lead++;
    if (lead) { /* through the op table: a value that requires grad keeps its graph */
        PyObject *shape = em_size_new(v->ndim - lead, v->sizes + lead);
        PyObject *args[2] = {(PyObject *)v, shape};
        EmTensor *s = shape ? em_op_t(EM_OP_view, 2, args) : NULL;
        Py_XDECREF(shape);
        Py_SETREF(v, s);
    }
    return v;
}

int em_setitem(EmTensor *t, PyObject *key, PyObject *value) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "Tensor does not support item deletion");
        return -1;
    }
    EmOperand o;
    int kind = em_to_operand(value, &o);
    if (kind < 0) return -1;
    if (kind > 0 && !PySequence_Check(value)) {
        PyErr_Format(PyExc_TypeError, "can't assign a %.100s to a tensor of dtype %s", Py_TYPE(value)->tp_name,
                     em_dtype_info[t->dtype].name);
        return -1;
    }
    if (key == Py_False) return 0; /* selects nothing */
    Key k;
    EmTensor *idx[EM_MAX_DIMS];
    int nadv, r = -1;
    if (parse_key(key, &k) < 0) return -1;
    EmTensor *view = apply_key(t, &k, idx, &nadv);
    key_clear(&k);
    if (!view) return -1;
    /* every write goes through the op pipeline (index_put_, fill_, copy_ on
     * the view): the version bump and, with autograd, Note [in-place on views] */
    PyObject *res = NULL;
    if (nadv) {
        /* a key with no basic part writes into t itself (torch's IndexPutBackward0, not CopySlices) */
        bool same = view->ndim == t->ndim && view->offset == t->offset;
        for (int i = 0; same && i < t->ndim; i++) same = view->sizes[i] == t->sizes[i] && view->strides[i] == t->strides[i];
        if (same) {
            Py_SETREF(view, (EmTensor *)Py_NewRef(t));
        } else if (em_grad_enabled() && em_requires_grad(t)) {
            /* the same view made by a recorded op, so autograd sees the write's
             * self gradient (CopySlices asks the index_put node for it) */
            PyObject *sz = em_size_new(view->ndim, view->sizes), *st = em_size_new(view->ndim, view->strides);
            PyObject *off = PyLong_FromLongLong(view->offset);
            PyObject *args[4] = {(PyObject *)t, sz, st, off};
            EmTensor *tracked = sz && st && off ? em_op_t(EM_OP_as_strided, 4, args) : NULL;
            Py_XDECREF(sz);
            Py_XDECREF(st);
            Py_XDECREF(off);
            if (!tracked) {
                for (int i = 0; i < view->ndim; i++) Py_XDECREF(idx[i]);
                Py_DECREF(view);
                return -1;
            }
            Py_SETREF(view, tracked);
        }
        EmTensor *v = value_tensor(t, value);
        /* index_put_'s indices: one entry per dim, a mask standing for all it covers */
        PyObject *indices = v ? PyList_New(0) : NULL;
        for (int i = 0; indices && i < view->ndim;) {
            EmTensor *ix = idx[i];
            if (PyList_Append(indices, ix ? (PyObject *)ix : Py_None) < 0) Py_CLEAR(indices);
            i += ix && (ix->dtype == EM_BOOL || ix->dtype == EM_UINT8) && ix->ndim > 0 ? ix->ndim : 1;
        }
        if (indices) {
            PyObject *args[3] = {(PyObject *)view, indices, (PyObject *)v};
            res = em_op(EM_OP__index_put_, 3, args);
        }
        Py_XDECREF(indices);
        Py_XDECREF(v);
        for (int i = 0; i < view->ndim; i++) Py_XDECREF(idx[i]);
    } else if (kind == 0 && !o.t) { /* a number */
        PyObject *args[2] = {(PyObject *)view, value};
        res = em_op(EM_OP_fill_, 2, args);
    } else {
        EmTensor *src = kind == 0 ? (EmTensor *)Py_NewRef(value) : em_tensor_from_data(value, view->dtype);
        if (src) {
            /* leading size-1 dims of the value beyond the target's rank are dropped */
            int lead = 0;
            while (src->ndim - lead > view->ndim && src->sizes[lead] == 1) lead++;
            if (lead) {
                PyObject *shape = em_size_new(src->ndim - lead, src->sizes + lead);
                PyObject *args[2] = {(PyObject *)src, shape};
                EmTensor *s2 = shape ? em_op_t(EM_OP_view, 2, args) : NULL;
                Py_XDECREF(shape);
                Py_SETREF(src, s2);
            }
            if (src) {
                PyObject *args[2] = {(PyObject *)view, (PyObject *)src};
                res = em_op(EM_OP_copy_, 2, args);
            }
            Py_XDECREF(src);
        }
    }
    r = res ? 0 : -1;
    Py_XDECREF(res);
    Py_DECREF(view);
    return r;
}
