/* dispatch_device.c — running an op call whose tensors live on a GPU.
 *
 * em_call_run (ops/dispatch.c) and the factory trampoline send a call
 * here once any CUDA storage exists (`em_cuda_used`). The call's tensors are
 * checked to share one device (torch's "Expected all tensors to be on the
 * same device" error; 0-d CPU tensors are allowed as scalars, CPU index
 * tensors in indexing), then one of three things happens:
 *
 *   - metadata ops (views, detach, copy_/fill_ which handle devices
 *     themselves) run their impl as is: they never touch element data, or
 *     only through em_copy_/em_fill_, which know about devices;
 *   - ops with a CUDA column run their CUDA front-end: the row's slot
 *     em_impl_<impl>_cuda where the column says CUDA_IMPL (Note [device
 *     slot]), else the one front-end, as elementwise ops do, whose iterator
 *     launches the backend's kernel (Note [CUDA elementwise]); a backend
 *     without the kernel makes the front-end or the iterator raise
 *     EmNoCudaKernel before anything is written, and the call takes the
 *     fallback instead; reductions alike through the reduce iterator (Note
 *     [CUDA reduce]);
 *   - every other op takes Note [CUDA fallback].
 *
 * Note [CUDA fallback]: the op runs on the CPU on host copies of its GPU
 * arguments and its results go back to the device. Each GPU *storage* an
 * argument views crosses once, and the host twins view the host copy with
 * the same geometry, so arguments that alias each other still alias. A
 * result viewing one of those host storages becomes the same view of the
 * GPU storage; an argument handed back (in-place ops return self) is handed
 * back as the original. Ops that write into their arguments (out=, `op_`
 * names, batch norm's running statistics) copy the written storages back.
 * Autograd is untouched: it records around the impl, with the GPU tensors.
 * This is correct for every op and slow (two transfers per call); it is what
 * makes `device='cuda'` work for every op while CUDA kernels are added one
 * by one, and GPU tests compare each op against the CPU either way. */
#include "../ember.h"

/* {op name: calls that took the fallback}: _C._cuda_fallback_counts()
 * shows which ops of a program still lack a GPU kernel */
static PyObject *fallback_calls;

int em_device_dispatch_init(void) {
    EmNoCudaKernel = PyErr_NewException("ember._C._NoCudaKernel", PyExc_NotImplementedError, NULL);
    return EmNoCudaKernel ? 0 : -1;
}

/* --------------------------------------------------- the device check */

typedef struct {
    bool found;        /* a GPU tensor (or device='cuda') */
    EmDevice device;   /* its device */
    bool device_arg;   /* an explicit device= (factories, *_like): it says where results go */
    EmDevice target;
    EmTensor *cpu_arg; /* a CPU tensor of rank > 0 seen alongside */
    EmTensor *other;   /* a GPU tensor on another device */
    bool key_has_tensors; /* _index: the key holds tensors or sequences (advanced indexing) */
} Scan;

static void scan_tensor(Scan *s, PyObject *o) {
    if (!em_is_tensor(o)) return;
    EmTensor *t = (EmTensor *)o;
    if (em_is_cpu(t)) {
        if (t->ndim > 0 && !s->cpu_arg) s->cpu_arg = t;
    } else if (!s->found) {
        s->found = true;
        s->device = em_device(t);
    } else if (!em_device_eq(em_device(t), s->device) && !s->other) {
        s->other = t;
    }
}

/* Tensors in a tensor, or one level down in a list or tuple (TensorList,
 * indexing keys). */
static void scan_value(Scan *s, PyObject *o) {
    if (PyList_Check(o) || PyTuple_Check(o)) {
        PyObject *seq = o;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(seq); j++)
            scan_tensor(s, PySequence_Fast_ITEMS(seq)[j]);
    } else {
        scan_tensor(s, o);
    }
}

/* An indexing key with an advanced part (tensors, lists, bools), which reads
 * element data; ints, slices, None and Ellipsis only make views. */
static bool advanced_key(PyObject *k) {
    if (PyTuple_Check(k)) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(k); j++)
            if (advanced_key(PyTuple_GET_ITEM(k, j))) return true;
        return false;
    }
    return !(PyLong_CheckExact(k) || PySlice_Check(k) || k == Py_None || k == Py_Ellipsis);
}

static void scan_call(Scan *s, EmCall *c) {
    const EmSignature *sig = &c->def->sig;
    for (int i = 0; i < sig->nparams; i++) {
        PyObject *a = c->args[i];
        EmArgType ty = sig->params[i].type;
        if (ty == EM_ARG_DEVICE && a != Py_None) {
            EmDevice d;
            if (em_device_from_py(a, &d) == 0) {
                s->device_arg = true;
                s->target = d;
            }
            PyErr_Clear(); /* the impl reports a bad device itself */
        } else if (ty == EM_ARG_TENSOR || ty == EM_ARG_TENSOR_OR_NUMBER || ty == EM_ARG_TENSOR_LIST ||
                   ty == EM_ARG_OBJECT) {
            scan_value(s, a);
            if (ty == EM_ARG_OBJECT) s->key_has_tensors |= advanced_key(a);
        }
    }
    if (c->out) scan_tensor(s, (PyObject *)c->out);
    if (s->device_arg && s->target.type != EM_CPU && !s->found) {
        s->found = true;
        s->device = s->target;
    }
}

static int device_error(Scan *s) {
    char a[32], b[32];
    EmTensor *x = s->other ? s->other : s->cpu_arg;
    PyErr_Format(PyExc_RuntimeError,
                 "Expected all tensors to be on the same device, but found at least two devices, "
                 "%s and %s!", em_device_str(s->device, a, sizeof a),
                 em_device_str(em_device(x), b, sizeof b));
    return -1;
}

/* ------------------------------------------------------- the fallback */

typedef struct {
    EmTensor *gpu; /* a GPU argument viewing the storage (borrowed) */
    EmStorage *host;
} Twin;

typedef struct {
    Twin *twins;
    int n, cap;
    PyObject *to_release; /* a list owning every host object made */
    PyObject *memo;       /* id(GPU tensor) -> its twin: one twin per argument object */
} Fallback;

static EmStorage *host_storage_for(Fallback *f, EmTensor *t) {
    for (int i = 0; i < f->n; i++)
        if (f->twins[i].gpu->storage == t->storage) return f->twins[i].host;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        Twin *tw = PyMem_Realloc(f->twins, (size_t)cap * sizeof(Twin));
        if (!tw) return PyErr_NoMemory(), NULL;
        f->twins = tw;
        f->cap = cap;
    }
    EmStorage *h = em_storage_new(t->storage->nbytes, em_cpu());
    if (!h) return NULL;
    if (t->storage->nbytes &&
        em_cuda->memcpy(h->data, -1, t->storage->data, t->storage->device.index,
                        (size_t)t->storage->nbytes, false) < 0) {
        Py_DECREF(h);
        return em_cuda_error("copy to the host"), NULL;
    }
    int r = PyList_Append(f->to_release, (PyObject *)h);
    Py_DECREF(h);
    if (r < 0) return NULL;
    f->twins[f->n++] = (Twin){t, h};
    return h;
}

/* The host twin of a GPU tensor (borrowed: owned by to_release), or o. */
static PyObject *twin_of(Fallback *f, PyObject *o) {
    if (!em_is_tensor(o) || em_is_cpu((EmTensor *)o)) return o;
    EmTensor *t = (EmTensor *)o;
    PyObject *key = PyLong_FromVoidPtr(t);
    if (!key) return NULL;
    PyObject *known = PyDict_GetItemWithError(f->memo, key);
    if (known || PyErr_Occurred()) {
        Py_DECREF(key);
        return known;
    }
    EmStorage *h = host_storage_for(f, t);
    EmTensor *tw = h ? em_tensor_alloc(&EmTensorType, h, t->offset, t->ndim, t->sizes, t->strides,
                                       (EmDType)t->dtype) : NULL;
    if (!tw) {
        Py_DECREF(key);
        return NULL;
    }
    tw->requires_grad = t->requires_grad; /* impls may look at it; nothing records on twins */
    int r = PyDict_SetItem(f->memo, key, (PyObject *)tw);
    Py_DECREF(key);
    Py_DECREF(tw);
    return r < 0 ? NULL : (PyObject *)tw;
}

/* A list/tuple with GPU tensors replaced by twins (new, owned by to_release). */
static PyObject *twin_value(Fallback *f, PyObject *o) {
    if (!(PyList_Check(o) || PyTuple_Check(o))) return twin_of(f, o);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject *r = PyList_Check(o) ? PyList_New(n) : PyTuple_New(n);
    if (!r) return NULL;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *x = twin_of(f, PySequence_Fast_ITEMS(o)[j]);
        if (!x) {
            Py_DECREF(r);
            return NULL;
        }
        if (PyList_Check(r))
            PyList_SET_ITEM(r, j, Py_NewRef(x));
        else
            PyTuple_SET_ITEM(r, j, Py_NewRef(x));
    }
    int rc = PyList_Append(f->to_release, r);
    Py_DECREF(r);
    return rc < 0 ? NULL : r;
}

/* One result of the CPU run, as it must look on the device. New reference. */
static PyObject *result_to_device(Fallback *f, EmCall *c, EmCall *hc, PyObject *r, EmDevice dev) {
    if (em_is_tensor(r)) {
        EmTensor *t = (EmTensor *)r;
        /* an argument handed back (in-place ops return self) */
        for (int i = 0; i < c->def->sig.nparams; i++)
            if (hc->args[i] == r && em_is_tensor(c->args[i])) return Py_NewRef(c->args[i]);
        if (hc->out == t && c->out) return Py_NewRef((PyObject *)c->out);
        for (int i = 0; i < f->n; i++) /* a view of an argument: the same view on the device */
            if (f->twins[i].host == t->storage)
                return (PyObject *)em_view_of(f->twins[i].gpu, t->ndim, t->sizes, t->strides, t->offset);
        EmTensor *d = em_to_device(t, dev, false);
        if (d && d != t && t->requires_grad && !t->grad_fn) d->requires_grad = true; /* factories */
        return (PyObject *)d;
    }
    if (PyTuple_Check(r) || PyList_Check(r)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(r);
        bool structseq = PyTuple_Check(r) && !PyTuple_CheckExact(r);
        PyObject *out = PyList_Check(r) ? PyList_New(n)
                        : structseq     ? PyStructSequence_New(Py_TYPE(r))
                                        : PyTuple_New(n);
        if (!out) return NULL;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *x = result_to_device(f, c, hc, PySequence_Fast_ITEMS(r)[j], dev);
            if (!x) {
                Py_DECREF(out);
                return NULL;
            }
            if (PyList_Check(out))
                PyList_SET_ITEM(out, j, x);
            else
                PyTuple_SET_ITEM(out, j, x);
        }
        return out;
    }
    return Py_NewRef(r);
}

/* After an op wrote into host twins: the written bytes go back. out= may
 * have been resized on the host (a new storage): the GPU out follows. */
static int write_back(Fallback *f, EmCall *c, EmCall *hc, bool every_argument) {
    if (c->out && hc->out && hc->out->storage != c->out->storage) {
        bool moved = true;
        for (int i = 0; i < f->n; i++) moved &= f->twins[i].host != hc->out->storage;
        if (moved) { /* resized: give the GPU tensor the new shape, then copy */
            if (em_tensor_resize(c->out, hc->out->ndim, hc->out->sizes, false) < 0) return -1;
            return em_copy_(c->out, (PyObject *)hc->out);
        }
    }
    EmTensor *written = c->out ? c->out : (EmTensor *)c->args[0];
    for (int i = 0; i < f->n; i++) {
        EmStorage *g = f->twins[i].gpu->storage, *h = f->twins[i].host;
        if (!every_argument && g != written->storage) continue;
        if (g->nbytes && em_cuda->memcpy(g->data, g->device.index, h->data, -1, (size_t)g->nbytes, false) < 0)
            return em_cuda_error("copy to the device");
    }
    return 0;
}

/* Some impls rebind their arguments for autograd to record (max(a, b)
 * moves b to `other`): the same rebinding is made on the GPU call, with the
 * GPU object a twin stands for. */
static void carry_back_rebinds(EmCall *c, EmCall *hc, PyObject *const *given) {
    PyObject *orig[EM_MAX_PARAMS];
    memcpy(orig, c->args, sizeof orig);
    for (int i = 0; i < c->def->sig.nparams; i++) {
        if (hc->args[i] == given[i]) continue;
        PyObject *v = hc->args[i];
        for (int j = 0; j < c->def->sig.nparams; j++)
            if (given[j] == hc->args[i]) v = orig[j];
        if (hc->owned_tensor && v == (PyObject *)hc->owned_tensor) { /* a number the impl wrapped */
            if (c->owned_tensor) continue; /* can't hand it over: keep the GPU call's own argument */
            c->owned_tensor = hc->owned_tensor; /* the GPU call releases it */
            hc->owned_tensor = NULL;
        }
        c->args[i] = v;
    }
}

static PyObject *run_on_host(EmCall *c, EmDevice dev) {
    const EmOpDef *def = c->def;
    Fallback f = {NULL, 0, 0, PyList_New(0), PyDict_New()};
    PyObject *result = NULL, *r = NULL;
    if (!f.to_release || !f.memo) goto done;
    EmCall hc = *c;
    hc.owned_tensor = NULL;
    for (int i = 0; i < def->sig.nparams; i++) {
        EmArgType ty = def->sig.params[i].type;
        if (ty == EM_ARG_DEVICE && c->args[i] != Py_None) {
            hc.args[i] = Py_None; /* factories: build on the host, move after */
        } else if (ty == EM_ARG_TENSOR || ty == EM_ARG_TENSOR_OR_NUMBER || ty == EM_ARG_TENSOR_LIST ||
                   ty == EM_ARG_OBJECT) {
            if (!(hc.args[i] = twin_value(&f, c->args[i]))) goto done;
        }
    }
    if (c->out && !(hc.out = (EmTensor *)twin_of(&f, (PyObject *)c->out))) goto done;
    PyObject *given[EM_MAX_PARAMS];
    memcpy(given, hc.args, sizeof given);
    r = def->impl(&hc);
    if (!r || r == Py_NotImplemented) {
        result = r;
        r = NULL;
        goto done;
    }
    carry_back_rebinds(c, &hc, given);
    /* in-place ops and batch norm's running statistics: every argument storage goes back */
    bool every = (def->tags & (EM_TAG_INPLACE | EM_TAG_WRITES)) && !c->out;
    if ((c->out || def->writes_self || every) && write_back(&f, c, &hc, every) < 0) goto done;
    result = result_to_device(&f, c, &hc, r, dev);
done:
    Py_XDECREF(r);
    Py_XDECREF(hc.owned_tensor);
    Py_XDECREF(f.to_release);
    Py_XDECREF(f.memo);
    PyMem_Free(f.twins);
    return result;
}

/* ------------------------------------------------------------ entry */

static void count_fallback(const char *name) {
    if (!fallback_calls && !(fallback_calls = PyDict_New())) {
        PyErr_Clear();
        return;
    }
    PyObject *n = PyDict_GetItemString(fallback_calls, name);
    PyObject *next = PyLong_FromLongLong(n ? PyLong_AsLongLong(n) + 1 : 1);
    if (!next || PyDict_SetItemString(fallback_calls, name, next) < 0) PyErr_Clear();
    Py_XDECREF(next);
}

PyObject *em_device_dispatch(EmCall *c) {
    Scan s = {0};
    scan_call(&s, c);
    if (!s.found) return c->def->impl(c);
    const unsigned runs = c->def->devices;
    bool as_is = (runs & EM_RUNS_ANY) || ((runs & EM_RUNS_ANY_BASIC_KEY) && !s.key_has_tensors);
    if (runs & EM_RUNS_MIXED) return c->def->impl(c);
    /* zeros_like(cpu_tensor, device='cuda'): the input gives only a shape */
    if (s.device_arg && s.target.type != EM_CPU && (runs & EM_RUNS_DEVICE_ARG)) s.cpu_arg = NULL;
    if (s.other || (s.cpu_arg && !as_is && !(runs & EM_RUNS_CPU_INDEX)))
        return device_error(&s), NULL;
    if (s.device.type == EM_META) { /* Note [meta device] */
        if (as_is || (runs & EM_RUNS_META) || (s.device_arg && s.target.type != EM_META))
            return c->def->impl(c);
        PyErr_Format(PyExc_NotImplementedError, /* torch's words for an op without a meta kernel */
                     "aten::%s: attempted to run this operator with Meta tensors, but there was no fake "
                     "impl or Meta kernel registered.", c->def->name);
        return NULL;
    }
    if (em_cuda_resolve(&s.device) < 0) return NULL;
    if (as_is) return c->def->impl(c);
    if (s.device_arg && s.target.type == EM_CPU) /* zeros_like(gpu_tensor, device='cpu') */
        return run_on_host(c, s.target);
    if (runs & EM_RUNS_CUDA) { /* the op's CUDA front-end, or its one front-end (Note [device slot]) */
        PyObject *r = c->def->cuda_impl ? c->def->cuda_impl(c) : c->def->impl(c);
        if (r || !PyErr_ExceptionMatches(EmNoCudaKernel)) return r;
        PyErr_Clear();
    }
    count_fallback(c->def->name);
    return run_on_host(c, s.device);
}

/* _C._cuda_fallback_counts(reset): the counts so far, then cleared if reset. */
PyObject *em_cuda_fallback_counts(PyObject *m, PyObject *reset) {
    PyObject *d = fallback_calls ? PyDict_Copy(fallback_calls) : PyDict_New();
    if (d && PyObject_IsTrue(reset) && fallback_calls) PyDict_Clear(fallback_calls);
    return d;
}
