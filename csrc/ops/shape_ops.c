/* shape_ops.c — views and shape ops: each computes new sizes/strides/offset
 * over the same storage (view, permute, expand, narrow, diagonal, ...) or,
 * when no view can express the result, copies (reshape of a non-viewable
 * tensor, clone, tril/triu). In-place variants (t.transpose_()) apply the
 * computed geometry to self. */
#include "../ember.h"
#include "device_slot.h"

/* The result of a view op: a new view, or self re-shaped for in-place calls. */
static PyObject *finish_view(EmCall *c, EmTensor *self, EmTensor *v) {
    if (!v) return NULL;
    if (!c->inplace) return (PyObject *)v;
    int r = em_tensor_set_geometry(self, v->ndim, v->sizes, v->strides, v->offset);
    Py_DECREF(v);
    return r < 0 ? NULL : Py_NewRef(self);
}

static int arg_dim(EmCall *c, int i, int ndim, int *dim) {
    int64_t d;
    if (em_arg_int(c, i, &d) < 0) return -1;
    return em_wrap_dim(d, ndim, dim);
}

/* Resolve a single -1 in shape against numel. Every size is checked here,
   not only by the parsers: unflatten and the other callers build shapes of
   their own, and a product that overflows int64 must not wrap to a size that
   happens to fit. */
static int infer_size(int n, int64_t *shape, int64_t numel) {
    int64_t prod = 1;
    int infer = -1;
    bool overflow = false;
    char buf[EM_SHAPE_BUF];
    for (int d = 0; d < n; d++) {
        if (shape[d] == -1) {
            if (infer >= 0) {
                PyErr_SetString(PyExc_RuntimeError, "only one dimension can be inferred");
                return -1;
            }
            infer = d;
        } else if (shape[d] < 0) {
            PyErr_Format(PyExc_RuntimeError, "invalid shape dimension %lld", (long long)shape[d]);
            return -1;
        } else if (!overflow && __builtin_mul_overflow(prod, shape[d], &prod)) {
            overflow = true;
        }
    }
    if (overflow) prod = -1; /* larger than any numel: only a zero size could save it */
    for (int d = 0; d < n && overflow; d++)
        if (shape[d] == 0) prod = 0, overflow = false;
    if (infer >= 0 && !overflow) {
        if (prod == 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "cannot reshape tensor of %lld elements into shape %s because the "
                         "unspecified dimension size -1 can be any value and is ambiguous",
                         (long long)numel, em_shape_str(n, shape, buf, sizeof buf));
            return -1;
        }
        if (numel % prod == 0) {
            shape[infer] = numel / prod;
            return 0;
        }
    } else if (infer < 0 && !overflow && prod == numel) {
        return 0;
    }
    PyErr_Format(PyExc_RuntimeError, "shape '%s' is invalid for input of size %lld",
                 em_shape_str(n, shape, buf, sizeof buf), (long long)numel);
    return -1;
}

/* A view with `shape`, or NULL with *impossible set when strides forbid it. */
static EmTensor *try_view(EmTensor *t, int n, const int64_t *shape, bool *impossible) {
    int64_t strides[EM_MAX_DIMS];
    *impossible = !em_compute_view_strides(t->ndim, t->sizes, t->strides, n, shape, strides);
    if (*impossible) return NULL;
    return em_view_of(t, n, shape, strides, t->offset);
}

EmTensor *em_reshape(EmTensor *t, int n, int64_t *shape) {
    if (infer_size(n, shape, t->numel) < 0) return NULL;
    bool impossible;
    EmTensor *v = try_view(t, n, shape, &impossible);
    if (v || !impossible) return v;
    EmTensor *c = em_contiguous(t);
    if (!c) return NULL;
    v = try_view(c, n, shape, &impossible);
    Py_DECREF(c);
    return v;
}

static EmTensor *view_dtype(EmTensor *t, EmDType d) {
    int old = em_itemsize(t->dtype), new = em_itemsize(d);
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], offset = t->offset;
    memcpy(sizes, t->sizes, t->ndim * sizeof(int64_t));
    memcpy(strides, t->strides, t->ndim * sizeof(int64_t));
    const char *from = em_dtype_name((EmDType)t->dtype), *to = em_dtype_name(d);
    if (old != new) {
        EM_CHECK(t->ndim > 0, PyExc_RuntimeError,
                 "self.dim() cannot be 0 to view %s as %s (different element sizes)", from, to);
        int last = t->ndim - 1;
        EM_CHECK(t->strides[last] == 1 || t->sizes[last] == 1, PyExc_RuntimeError,
                 "self.stride(-1) must be 1 to view %s as %s (different element sizes), but got %lld",
                 from, to, (long long)t->strides[last]);
        if (new < old) {
            int r = old / new;
            for (int i = 0; i < last; i++) strides[i] *= r;
            sizes[last] *= r;
            strides[last] = 1;
            offset *= r;
        } else {
            int r = new / old;
            EM_CHECK(sizes[last] % r == 0, PyExc_RuntimeError,
                     "self.size(-1) must be divisible by %d to view %s as %s (different element "
                     "sizes), but got %lld", r, from, to, (long long)sizes[last]);
            EM_CHECK(offset % r == 0, PyExc_RuntimeError,
                     "self.storage_offset() must be divisible by %d to view %s as %s (different "
                     "element sizes), but got %lld", r, from, to, (long long)offset);
            for (int i = 0; i < last; i++)
                EM_CHECK(strides[i] % r == 0, PyExc_RuntimeError,
                         "self.stride(%d) must be divisible by %d to view %s as %s (different "
                         "element sizes), but got %lld", i, r, from, to, (long long)strides[i]);
            for (int i = 0; i < last; i++) strides[i] /= r;
            sizes[last] /= r;
            strides[last] = 1;
            offset /= r;
        }
    }
    EmTensor *v = em_view_of(t, t->ndim, sizes, strides, offset);
    if (v) v->dtype = (int8_t)d;
    return v;
fail:
    return NULL;
}

PyObject *em_impl_view(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    /* torch's two overloads: view(*shape) and view(dtype), the dtype also as dtype= */
    PyObject *dt = c->args[2] != Py_None ? c->args[2] : Py_TYPE(c->args[1]) == &EmDTypeType ? c->args[1] : NULL;
    if (dt && c->args[2] != Py_None && c->args[1] != Py_None) {
        PyErr_SetString(PyExc_TypeError, "view() received both a size and a dtype");
        return NULL;
    }
    if (dt) {
        EmDType d;
        if (em_dtype_from_py(dt, &d) < 0) return NULL;
        return (PyObject *)view_dtype(t, d);
    }
    if (c->args[1] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "view() missing 1 required positional argument: 'size'");
        return NULL;
    }
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (em_parse_shape(c->args[1], "view", &n, shape, true) < 0) return NULL;
    if (infer_size(n, shape, t->numel) < 0) return NULL;
    bool impossible;
    EmTensor *v = try_view(t, n, shape, &impossible);
    if (impossible)
        PyErr_SetString(PyExc_RuntimeError,
                        "view size is not compatible with input tensor's size and stride (at least "
                        "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                        "instead.");
    return (PyObject *)v;
}

/* view_as / reshape_as / expand_as: `other` gives only its shape, so it is
 * an `object` in the row (not an input of the graph nor of the device check,
 * as in torch) and is checked here */
static EmTensor *shape_of_other(EmCall *c, const char *fname) {
    PyObject *o = c->args[1];
    if (!em_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'other' (position 1) must be Tensor, not %s", fname,
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return (EmTensor *)o;
}

PyObject *em_impl_view_as(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0), *o = shape_of_other(c, "view_as");
    if (!o) return NULL;
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, o->sizes, o->ndim * sizeof(int64_t));
    if (infer_size(o->ndim, shape, t->numel) < 0) return NULL;
    bool impossible;
    EmTensor *v = try_view(t, o->ndim, shape, &impossible);
    if (impossible)
        PyErr_SetString(PyExc_RuntimeError,
                        "view size is not compatible with input tensor's size and stride (at least "
                        "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                        "instead.");
    return (PyObject *)v;
}

PyObject *em_impl_reshape(EmCall *c) {
    int n;
    int64_t shape[EM_MAX_DIMS];
    if (em_parse_shape(c->args[1], "reshape", &n, shape, true) < 0) return NULL;
    return (PyObject *)em_reshape(em_arg_tensor(c, 0), n, shape);
}

PyObject *em_impl_reshape_as(EmCall *c) {
    EmTensor *o = shape_of_other(c, "reshape_as");
    if (!o) return NULL;
    int64_t shape[EM_MAX_DIMS];
    memcpy(shape, o->sizes, o->ndim * sizeof(int64_t));
    return (PyObject *)em_reshape(em_arg_tensor(c, 0), o->ndim, shape);
}

EmTensor *em_transpose(EmTensor *t, int d0, int d1) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    memcpy(sizes, t->sizes, t->ndim * sizeof(int64_t));
    memcpy(strides, t->strides, t->ndim * sizeof(int64_t));
    if (t->ndim > 0) {
        int64_t s = sizes[d0]; sizes[d0] = sizes[d1]; sizes[d1] = s;
        s = strides[d0]; strides[d0] = strides[d1]; strides[d1] = s;
    }
    return em_view_of(t, t->ndim, sizes, strides, t->offset);
}

PyObject *em_impl_transpose(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int d0, d1;
    if (arg_dim(c, 1, t->ndim, &d0) < 0 || arg_dim(c, 2, t->ndim, &d1) < 0) return NULL;
    return finish_view(c, t, em_transpose(t, d0, d1));
}

PyObject *em_impl_t(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (t->ndim > 2) {
        PyErr_Format(PyExc_RuntimeError, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                     t->ndim);
        return NULL;
    }
    return finish_view(c, t, em_transpose(t, 0, t->ndim < 2 ? 0 : 1));
}

EmTensor *em_permute(EmTensor *t, int n, const int64_t *dims) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    bool seen[EM_MAX_DIMS] = {false};
    EM_CHECK(n == t->ndim, PyExc_RuntimeError,
             "permute(sparse_coo): number of dimensions in the tensor input does not match the "
             "length of the desired ordering of dimensions i.e. input.dim() = %d is not equal to "
             "len(dims) = %d", t->ndim, n);
    for (int i = 0; i < n; i++) {
        int d;
        if (em_wrap_dim(dims[i], t->ndim, &d) < 0) return NULL;
        EM_CHECK(!seen[d], PyExc_RuntimeError, "permute(): duplicate dims are not allowed.");
        seen[d] = true;
        sizes[i] = t->sizes[d];
        strides[i] = t->strides[d];
    }
    return em_view_of(t, n, sizes, strides, t->offset);
fail:
    return NULL;
}

PyObject *em_impl_permute(EmCall *c) {
    int n;
    int64_t dims[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, dims) < 0) return NULL;
    return (PyObject *)em_permute(em_arg_tensor(c, 0), n, dims);
}

/* contiguous(memory_format=contiguous_format): self when already laid out so, else a copy */
PyObject *em_impl_contiguous(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    EmMemoryFormat f;
    if (em_memory_format_from_py(c->args[1], EM_CONTIGUOUS_FORMAT, &f) < 0) return NULL;
    if (f == EM_CONTIGUOUS_FORMAT) return (PyObject *)em_contiguous(t);
    if (f == EM_PRESERVE_FORMAT) {
        PyErr_SetString(PyExc_RuntimeError, "preserve memory format is unsupported by the contiguous operator");
        return NULL;
    }
    if (em_is_contiguous_as(t, f)) return Py_NewRef(t);
    EmTensor *r = em_empty_format(t, (EmDType)t->dtype, em_device(t), f);
    if (r && em_copy_(r, (PyObject *)t) < 0) Py_CLEAR(r);
    return (PyObject *)r;
}

PyObject *em_impl_squeeze(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    bool drop[EM_MAX_DIMS] = {false};
    if (em_arg_is_none(c, 1)) {
        for (int d = 0; d < t->ndim; d++) drop[d] = t->sizes[d] == 1;
    } else {
        int n;
        int64_t dims[EM_MAX_DIMS];
        if (em_arg_intlist(c, 1, &n, dims) < 0) return NULL;
        for (int i = 0; i < n; i++) {
            int d;
            if (em_wrap_dim(dims[i], t->ndim, &d) < 0) return NULL;
            if (t->ndim > 0) drop[d] = t->sizes[d] == 1;
        }
    }
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (drop[d]) continue;
        sizes[k] = t->sizes[d];
        strides[k++] = t->strides[d];
    }
    return finish_view(c, t, em_view_of(t, k, sizes, strides, t->offset));
}

EmTensor *em_unsqueeze(EmTensor *t, int d) {
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    if (t->ndim >= EM_MAX_DIMS) {
        PyErr_Format(PyExc_RuntimeError, "unsqueeze: a tensor can have at most %d dimensions", EM_MAX_DIMS);
        return NULL;
    }
    for (int i = 0, k = 0; i <= t->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else {
            sizes[i] = t->sizes[k];
            strides[i] = t->strides[k++];
        }
    }
    return em_view_of(t, t->ndim + 1, sizes, strides, t->offset);
}

PyObject *em_impl_unsqueeze(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int d;
    if (arg_dim(c, 1, t->ndim + 1, &d) < 0) return NULL;
    return finish_view(c, t, em_unsqueeze(t, d));
}

PyObject *em_impl_flatten(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int s, e;
    if (arg_dim(c, 1, t->ndim, &s) < 0 || arg_dim(c, 2, t->ndim, &e) < 0) return NULL;
    if (s > e) {
        PyErr_SetString(PyExc_RuntimeError,
                        "flatten() has invalid args: start_dim cannot come after end_dim");
        return NULL;
    }
    if (t->ndim == 0) {
        int64_t one = 1;
        return (PyObject *)em_reshape(t, 1, &one);
    }
    if (s == e) return Py_NewRef(t);
    int64_t shape[EM_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < s; d++) shape[k++] = t->sizes[d];
    int64_t m = 1;
    for (int d = s; d <= e; d++) m *= t->sizes[d];
    shape[k++] = m;
    for (int d = e + 1; d < t->ndim; d++) shape[k++] = t->sizes[d];
    return (PyObject *)em_reshape(t, k, shape);
}

PyObject *em_impl_unflatten(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim, n;
    int64_t sizes[EM_MAX_DIMS], shape[EM_MAX_DIMS];
    char buf[EM_SHAPE_BUF];
    if (arg_dim(c, 1, t->ndim, &dim) < 0 || em_arg_intlist(c, 2, &n, sizes) < 0) return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_RuntimeError, "unflatten: sizes must be non-empty");
        return NULL;
    }
    if (t->ndim - 1 + n > EM_MAX_DIMS) {
        PyErr_Format(PyExc_RuntimeError, "unflatten: a tensor can have at most %d dimensions", EM_MAX_DIMS);
        return NULL;
    }
    int64_t dsize = t->ndim ? t->sizes[dim] : 1;
    int64_t prod = 1;
    int infer = -1;
    bool overflow = false;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0) {
                PyErr_SetString(PyExc_RuntimeError, "only one dimension can be inferred");
                return NULL;
            }
            infer = i;
        } else if (sizes[i] < 0) {
            PyErr_Format(PyExc_RuntimeError, "invalid shape dimension %lld", (long long)sizes[i]);
            return NULL;
        } else if (!overflow && __builtin_mul_overflow(prod, sizes[i], &prod)) {
            overflow = true;
        }
    }
    if (overflow) prod = -1; /* overflowed: equals no dim size */
    for (int i = 0; i < n && overflow; i++)
        if (sizes[i] == 0) prod = 0, overflow = false;
    if (infer >= 0 && prod > 0 && dsize % prod == 0) {
        sizes[infer] = dsize / prod;
        prod = dsize;
    }
    if (prod != dsize) {
        PyErr_Format(PyExc_RuntimeError,
                     "unflatten: Provided sizes %s don't multiply up to the size of dim %d (%lld) "
                     "in the input tensor", em_shape_str(n, sizes, buf, sizeof buf), dim,
                     (long long)dsize);
        return NULL;
    }
    int k = 0;
    for (int d = 0; d < dim; d++) shape[k++] = t->sizes[d];
    for (int i = 0; i < n; i++) shape[k++] = sizes[i];
    for (int d = dim + 1; d < t->ndim; d++) shape[k++] = t->sizes[d];
    return (PyObject *)em_reshape(t, k, shape);
}

EmTensor *em_expand(EmTensor *t, int n, const int64_t *sizes) {
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    int64_t shape[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    EM_CHECK(n >= t->ndim, PyExc_RuntimeError,
             "expand(%s, size=%s): the number of sizes provided (%d) must be greater or equal to "
             "the number of dimensions in the tensor (%d)",
             em_shape_str(t->ndim, t->sizes, a, sizeof a), em_shape_str(n, sizes, b, sizeof b), n,
             t->ndim);
    for (int i = n - 1; i >= 0; i--) {
        int td = i - (n - t->ndim);
        int64_t want = sizes[i];
        if (td < 0) {
            EM_CHECK(want >= 0, PyExc_RuntimeError,
                     "The expanded size of the tensor (%lld) isn't allowed in a leading, "
                     "non-existing dimension %d", (long long)want, i);
            shape[i] = want;
            strides[i] = 0;
            continue;
        }
        int64_t have = t->sizes[td];
        if (want == -1) want = have;
        EM_CHECK(want >= 0, PyExc_RuntimeError,
                 "Trying to create tensor with negative dimension %lld: %s", (long long)want,
                 em_shape_str(n, sizes, a, sizeof a));
        if (have == want) {
            shape[i] = have;
            strides[i] = t->strides[td];
        } else {
            EM_CHECK(have == 1, PyExc_RuntimeError,
                     "The expanded size of the tensor (%lld) must match the existing size (%lld) "
                     "at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                     (long long)want, (long long)have, i, em_shape_str(n, sizes, a, sizeof a),
                     em_shape_str(t->ndim, t->sizes, b, sizeof b));
            shape[i] = want;
            strides[i] = 0;
        }
    }
    return em_view_of(t, n, shape, strides, t->offset);
fail:
    return NULL;
}

PyObject *em_impl_expand(EmCall *c) {
    int n;
    int64_t sizes[EM_MAX_DIMS];
    if (em_arg_intlist(c, 1, &n, sizes) < 0) return NULL;
    return (PyObject *)em_expand(em_arg_tensor(c, 0), n, sizes);
}

PyObject *em_impl_expand_as(EmCall *c) {
    EmTensor *o = shape_of_other(c, "expand_as");
    if (!o) return NULL;
    return (PyObject *)em_expand(em_arg_tensor(c, 0), o->ndim, o->sizes);
}

EmTensor *em_narrow(EmTensor *t, int dim, int64_t start, int64_t length) {
    int64_t sizes[EM_MAX_DIMS];
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError, "narrow() cannot be applied to a 0-dim tensor.");
    int64_t size = t->sizes[dim];
    EM_CHECK(start >= -size && start <= size, PyExc_IndexError,
             "start out of range (expected to be in range of [%lld, %lld], but got %lld)",
             (long long)-size, (long long)size, (long long)start);
    if (start < 0) start += size;
    EM_CHECK(length >= 0, PyExc_RuntimeError, "narrow(): length must be non-negative.");
    EM_CHECK(start <= size - length, PyExc_RuntimeError,
             "start (%lld) + length (%lld) exceeds dimension size (%lld).", (long long)start,
             (long long)length, (long long)size);
    memcpy(sizes, t->sizes, t->ndim * sizeof(int64_t));
    sizes[dim] = length;
    return em_view_of(t, t->ndim, sizes, t->strides, t->offset + start * t->strides[dim]);
fail:
    return NULL;
}

PyObject *em_impl_narrow(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim;
    int64_t start, length;
    if (arg_dim(c, 1, t->ndim, &dim) < 0 || em_arg_int(c, 2, &start) < 0 ||
        em_arg_int(c, 3, &length) < 0)
        return NULL;
    return (PyObject *)em_narrow(t, dim, start, length);
}

EmTensor *em_select(EmTensor *t, int dim, int64_t index) {
    char buf[EM_SHAPE_BUF];
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS];
    EM_CHECK(t->ndim > 0, PyExc_IndexError, "select() cannot be applied to a 0-dim tensor.");
    int64_t size = t->sizes[dim];
    EM_CHECK(index >= -size && index < size, PyExc_IndexError,
             "select(): index %lld out of range for tensor of size %s at dimension %d",
             (long long)index, em_shape_str(t->ndim, t->sizes, buf, sizeof buf), dim);
    if (index < 0) index += size;
    for (int d = 0, k = 0; d < t->ndim; d++) {
        if (d == dim) continue;
        sizes[k] = t->sizes[d];
        strides[k++] = t->strides[d];
    }
    return em_view_of(t, t->ndim - 1, sizes, strides, t->offset + index * t->strides[dim]);
fail:
    return NULL;
}

PyObject *em_impl_select(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim;
    int64_t index;
    if (t->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "select() cannot be applied to a 0-dim tensor.");
        return NULL;
    }
    if (arg_dim(c, 1, t->ndim, &dim) < 0 || em_arg_int(c, 2, &index) < 0) return NULL;
    return (PyObject *)em_select(t, dim, index);
}

PyObject *em_impl_unbind(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim;
    if (t->ndim == 0) {
        PyErr_SetString(PyExc_IndexError, "Dimension specified as 0 but tensor has no dimensions");
        return NULL;
    }
    if (arg_dim(c, 1, t->ndim, &dim) < 0) return NULL;
    PyObject *tup = PyTuple_New(t->sizes[dim]);
    if (!tup) return NULL;
    for (int64_t i = 0; i < t->sizes[dim]; i++) {
        EmTensor *s = em_select(t, dim, i);
        if (!s) { Py_DECREF(tup); return NULL; }
        PyTuple_SET_ITEM(tup, i, (PyObject *)s);
    }
    return tup;
}

/* Pieces of `sizes[i]` along dim, as a tuple of narrowed views. */
static PyObject *split_sizes(EmTensor *t, int dim, int n, const int64_t *sizes) {
    PyObject *tup = PyTuple_New(n);
    if (!tup) return NULL;
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        EmTensor *p = em_narrow(t, dim, start, sizes[i]);
        if (!p) { Py_DECREF(tup); return NULL; }
        PyTuple_SET_ITEM(tup, i, (PyObject *)p);
        start += sizes[i];
    }
    return tup;
}

static PyObject *split_even(EmTensor *t, int dim, int64_t step) {
    int64_t size = t->sizes[dim];
    if (step < 0) {
        PyErr_Format(PyExc_RuntimeError, "split expects split_size be non-negative, but got split_size=%lld",
                     (long long)step);
        return NULL;
    }
    if (step == 0 && size != 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "split_size can only be 0 if dimension size is 0, but got dimension size of %lld",
                     (long long)size);
        return NULL;
    }
    int64_t n = step == 0 ? 1 : size / step + (size % step != 0);
    if (n == 0) n = 1;
    if (n > 1 << 24) {
        PyErr_Format(PyExc_RuntimeError, "split would create %lld pieces", (long long)n);
        return NULL;
    }
    int64_t *sizes = PyMem_Malloc(n * sizeof(int64_t));
    if (!sizes) return PyErr_NoMemory();
    for (int64_t i = 0; i < n; i++) sizes[i] = size - i * step >= step ? step : size - i * step;
    PyObject *r = split_sizes(t, dim, (int)n, sizes);
    PyMem_Free(sizes);
    return r;
}

PyObject *em_impl_split(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int dim;
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError, "split expects at least a 1-dimensional tensor");
    if (arg_dim(c, 2, t->ndim, &dim) < 0) return NULL;
    PyObject *arg = c->args[1];
    if (PyLong_Check(arg) || (em_is_tensor(arg) && ((EmTensor *)arg)->ndim == 0)) {
        int64_t step;
        if (em_arg_int(c, 1, &step) < 0) return NULL;
        return split_even(t, dim, step);
    }
    EM_CHECK(PyList_Check(arg) || PyTuple_Check(arg), PyExc_TypeError,
             "split(): argument 'split_size_or_sections' must be int or a list of ints, not %.100s",
             Py_TYPE(arg)->tp_name);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(arg);
    int64_t *sizes = PyMem_Malloc((n ? n : 1) * sizeof(int64_t)), total = 0;
    if (!sizes) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        sizes[i] = PyLong_AsLongLong(PySequence_Fast_ITEMS(arg)[i]);
        if (sizes[i] == -1 && PyErr_Occurred()) { PyMem_Free(sizes); return NULL; }
        if (sizes[i] < 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "split_with_sizes expects split_sizes have only non-negative entries, but "
                         "got split_sizes=%R", arg);
            PyMem_Free(sizes);
            return NULL;
        }
        if (__builtin_add_overflow(total, sizes[i], &total)) total = INT64_MAX; /* cannot match a size */
    }
    if (total != t->sizes[dim]) {
        PyErr_Format(PyExc_RuntimeError,
                     "split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's "
                     "size at dimension %d), but got split_sizes=%R",
                     (long long)t->sizes[dim], dim, arg);
        PyMem_Free(sizes);
        return NULL;
    }
    PyObject *r = split_sizes(t, dim, (int)n, sizes);
    PyMem_Free(sizes);
    return r;
fail:
    return NULL;
}

PyObject *em_impl_chunk(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int64_t chunks;
    int dim;
    EM_CHECK(t->ndim > 0, PyExc_RuntimeError, "chunk expects at least a 1-dimensional tensor");
    if (em_arg_int(c, 1, &chunks) < 0 || arg_dim(c, 2, t->ndim, &dim) < 0) return NULL;
    EM_CHECK(chunks > 0, PyExc_RuntimeError, "chunk expects `chunks` to be greater than 0, got: %lld",
             (long long)chunks);
    int64_t size = t->sizes[dim];
    int64_t step = (size + chunks - 1) / chunks;
    if (step == 0) { /* empty dim: `chunks` empty pieces, as torch returns */
        int64_t *zeros = PyMem_Calloc((size_t)chunks, sizeof(int64_t));
        if (!zeros) return PyErr_NoMemory();
        PyObject *r = split_sizes(t, dim, (int)chunks, zeros);
        PyMem_Free(zeros);
        return r;
    }
    return split_even(t, dim, step);
fail:
    return NULL;
}

PyObject *em_impl_diagonal(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int64_t off;
    int d1, d2;
    if (em_arg_int(c, 1, &off) < 0 || arg_dim(c, 2, t->ndim, &d1) < 0 ||
        arg_dim(c, 3, t->ndim, &d2) < 0)
        return NULL;
    EM_CHECK(t->ndim >= 2, PyExc_RuntimeError, "diagonal dimensions requires ndim larger than 1");
    EM_CHECK(d1 != d2, PyExc_RuntimeError, "diagonal dimensions cannot be identical %d, %d", d1, d2);
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], offset = t->offset, len;
    if (off >= 0) {
        len = t->sizes[d1] < t->sizes[d2] - off ? t->sizes[d1] : t->sizes[d2] - off;
        if (len > 0) offset += off * t->strides[d2];
    } else {
        len = t->sizes[d1] + off < t->sizes[d2] ? t->sizes[d1] + off : t->sizes[d2];
        if (len > 0) offset -= off * t->strides[d1];
    }
    if (len < 0) len = 0;
    int k = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d == d1 || d == d2) continue;
        sizes[k] = t->sizes[d];
        strides[k++] = t->strides[d];
    }
    sizes[k] = len;
    strides[k++] = t->strides[d1] + t->strides[d2];
    return (PyObject *)em_view_of(t, k, sizes, strides, offset);
fail:
    return NULL;
}

PyObject *em_impl_as_strided(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    int n, ns;
    int64_t sizes[EM_MAX_DIMS], strides[EM_MAX_DIMS], offset = t->offset;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    if (em_parse_shape(c->args[1], "as_strided", &n, sizes, false) < 0 ||
        em_arg_intlist(c, 2, &ns, strides) < 0)
        return NULL;
    if (!em_arg_is_none(c, 3) && em_arg_int(c, 3, &offset) < 0) return NULL;
    EM_CHECK(n == ns, PyExc_RuntimeError, "mismatch in length of strides and shape");
    EM_CHECK(offset >= 0, PyExc_RuntimeError, "Tensor: invalid storage offset %lld", (long long)offset);
    for (int d = 0; d < n; d++)
        EM_CHECK(strides[d] >= 0, PyExc_RuntimeError,
                 "as_strided: Negative strides are not supported at the moment, got strides: %s",
                 em_shape_str(n, strides, a, sizeof a));
    int64_t extent, need, numel;
    int isz = em_itemsize(t->dtype);
    EM_TRY(em_numel_checked(n, sizes, &numel) == 0 && em_extent_checked(n, sizes, strides, &extent) == 0);
    need = extent == 0 ? 0 : extent + offset;
    EM_CHECK(need >= 0 && need <= t->storage->nbytes / isz, PyExc_RuntimeError,
             "setStorage: sizes %s, strides %s, storage offset %lld, and itemsize %d requiring a "
             "storage size of %lld are out of bounds for storage of size %lld",
             em_shape_str(n, sizes, a, sizeof a), em_shape_str(n, strides, b, sizeof b),
             (long long)offset, isz, (long long)need * isz, (long long)t->storage->nbytes);
    return finish_view(c, t, em_view_of(t, n, sizes, strides, offset));
fail:
    return NULL;
}

EmTensor *em_clone_as(EmTensor *t, EmMemoryFormat f) {
    EmTensor *r = em_empty_format(t, (EmDType)t->dtype, em_device(t), f);
    if (r && em_copy_(r, (PyObject *)t) < 0) Py_CLEAR(r);
    return r;
}

EmTensor *em_clone(EmTensor *t) { return em_clone_as(t, EM_PRESERVE_FORMAT); }

/* clone(memory_format=preserve_format) */
PyObject *em_impl_clone(EmCall *c) {
    EmMemoryFormat f;
    if (em_memory_format_from_py(c->args[1], EM_PRESERVE_FORMAT, &f) < 0) return NULL;
    return (PyObject *)em_clone_as(em_arg_tensor(c, 0), f);
}

EmTensor *em_detach(EmTensor *t) {
    EmTensor *r = em_tensor_alloc(&EmTensorType, t->storage, t->offset, t->ndim, t->sizes,
                                  t->strides, (EmDType)t->dtype);
    if (r) em_version_share(r, t); /* Note [version counter] */
    return r;
}

PyObject *em_impl_detach(EmCall *c) {
    EmTensor *t = em_arg_tensor(c, 0);
    if (c->inplace) {
        if (t->is_view) {
            PyErr_SetString(PyExc_RuntimeError, "Can't detach views in-place. Use detach() instead.");
            return NULL;
        }
        t->requires_grad = false;
        Py_CLEAR(t->grad_fn);
        return Py_NewRef(t);
    }
    return (PyObject *)em_detach(t);
}

/* tril/triu: copy (unless in place), then zero the other triangle of every
 * matrix in the batch. On a GPU the zeroing is the backend's tri_mask
 * kernel (Note [CUDA shape kernels]). */
static PyObject *triangle(EmCall *c, bool lower, bool gpu) {
    EmTensor *t = em_arg_tensor(c, 0), *r = NULL;
    int64_t k;
    if (em_arg_int(c, 1, &k) < 0) return NULL;
    if (t->ndim < 2) {
        PyErr_Format(PyExc_RuntimeError, "%s: input tensor must have at least 2 dimensions",
                     lower ? "tril" : "triu");
        return NULL;
    }
    if (gpu && !em_cuda->tri_mask) { /* before anything is written: the fallback runs it */
        PyErr_Format(EmNoCudaKernel, "\"%s\" has no CUDA kernel in this backend", lower ? "tril" : "triu");
        return NULL;
    }
    if (c->inplace) {
        r = (EmTensor *)Py_NewRef(t);
    } else if (c->out) {
        bool same = c->out->ndim == t->ndim && !memcmp(c->out->sizes, t->sizes, t->ndim * sizeof(int64_t));
        if (!same && em_tensor_resize(c->out, t->ndim, t->sizes, true) < 0) return NULL;
        if (em_copy_(c->out, (PyObject *)t) < 0) return NULL;
        r = (EmTensor *)Py_NewRef(c->out);
    } else {
        r = em_clone_as(t, EM_CONTIGUOUS_FORMAT); /* as torch's tril/triu lay it out */
    }
    if (!r || r->numel == 0 || em_is_meta(r)) return (PyObject *)r; /* Note [meta device] */
    if (gpu) {
        if (em_cuda->tri_mask(em_device(r).index, r->dtype, em_data(r), r->ndim, r->sizes, r->strides, k, lower) < 0) {
            em_cuda_error(lower ? "tril" : "triu");
            Py_CLEAR(r);
        }
        return (PyObject *)r;
    }
    int nd = r->ndim, isz = em_itemsize(r->dtype);
    int64_t rows = r->sizes[nd - 2], cols = r->sizes[nd - 1];
    int64_t rs = r->strides[nd - 2] * isz, cs = r->strides[nd - 1] * isz;
    int64_t nbatch = r->numel / (rows * cols);
    for (int64_t b = 0; b < nbatch; b++) {
        char *base = em_data(r);
        int64_t rem = b;
        for (int d = nd - 3; d >= 0; d--) {
            base += (rem % r->sizes[d]) * r->strides[d] * isz;
            rem /= r->sizes[d];
        }
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) {
                bool keep = lower ? j - i <= k : j - i >= k;
                if (!keep) memset(base + i * rs + j * cs, 0, (size_t)isz);
            }
    }
    return (PyObject *)r;
}
static PyObject *tril_body(EmCall *c, bool gpu) { return triangle(c, true, gpu); }
static PyObject *triu_body(EmCall *c, bool gpu) { return triangle(c, false, gpu); }
EM_DEVICE_SLOTS(tril, tril_body)
EM_DEVICE_SLOTS(triu, triu_body)
