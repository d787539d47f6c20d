/* device_dispatch.c — running an op call whose tensors live on a GPU.
 *
 * em_call_run (python/bindings.c) and the factory trampoline send a call
 * here once any CUDA storage exists (`em_cuda_used`). The call's tensors are
 * checked to share one device (torch's "Expected all tensors to be on the
 * same device" error; 0-d CPU tensors are allowed as scalars, CPU index
 * tensors in indexing), then one of three things happens:
 *
 *   - metadata ops (views, detach, copy_/fill_ which handle devices
 *     themselves) run their impl as is: they never touch element data, or
 *     only through em_copy_/em_fill_, which know about devices;
 *   - elementwise ops run their impl, whose iterator launches the
 *     backend's kernel (Note [CUDA elementwise]); a backend without that
 *     kernel makes the iterator raise EmNoCudaKernel before anything is
 *     written, and the call takes the fallback instead; reductions alike
 *     through the reduce iterator (Note [CUDA reduce]);
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

/* ---------------------------------------------------------------- tables */

enum { RUN_FALLBACK = 0, RUN_AS_IS = 1, RUN_NATIVE_OR_FALLBACK = 2 };
static uint8_t how_to_run[EM_NUM_OPS];
static bool writes_args[EM_NUM_OPS];  /* copy every argument storage back after the fallback */
static bool cpu_indices_ok[EM_NUM_OPS]; /* CPU index tensors may index a GPU tensor */
static bool any_devices[EM_NUM_OPS];    /* copy_: its tensors may live anywhere */
static bool builds_on_device[EM_NUM_OPS]; /* new_*: device= says where, the input may be on the CPU */
/* {op name: calls that took the fallback}: _C._cuda_fallback_counts()
 * shows which ops of a program still lack a GPU kernel */
static PyObject *fallback_calls;

int em_device_dispatch_init(void) {
    EmNoCudaKernel = PyErr_NewException("ember._C._NoCudaKernel", PyExc_NotImplementedError, NULL);
    if (!EmNoCudaKernel) return -1;
    static const char *as_is[] = {
        /* views and metadata: never read element data */
        "view", "view_as", "as_strided", "transpose", "swapaxes", "swapdims", "t", "permute",
        "expand", "expand_as", "squeeze", "unsqueeze", "select", "narrow", "split",
        "split_with_sizes", "chunk", "tensor_split", "unbind", "unflatten", "movedim", "moveaxis",
        "diagonal", "detach", "alias", "unfold", "real", "_unsafe_view",
        /* data only through em_copy_ / em_fill_ / em_empty, which handle devices */
        "copy_", "fill_", "zero_", "clone", "contiguous", "reshape", "flatten", "ravel",
        "_to_copy", "_to_device", "type_as", NULL};
    /* ops whose impls handle GPU tensors (Note [GPU gemm] in ops/linalg.c),
     * falling back where a path has no GPU kernel */
    static const char *native[] = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul",
                                   /* Note [GPU random numbers] */
                                   "uniform_", "normal_", "bernoulli_", "bernoulli", "random_", "exponential_", NULL};
    /* reductions: the reduce iterator launches the backend's kernel or raises
     * EmNoCudaKernel before writing (Note [CUDA reduce]) */
    static const char *reductions[] = {
        "sum", "nansum", "mean", "nanmean", "prod", "max", "min", "amax", "amin", "aminmax",
        "argmax", "argmin", "var", "std", "var_mean", "std_mean", "norm", "_linalg_vector_norm",
        "logsumexp", "all", "any", "count_nonzero", "sum_to_size", NULL};
    /* sorting, selection, scans and searches (cudasort; Note [CUDA sort] in
     * csrc/cuda/sort.h): EmNoCudaKernel when the backend lacks the entry */
    static const char *sorting[] = {"sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian",
                                    "mode", "cumsum", "cumprod", "cummax", "cummin", "searchsorted",
                                    "bucketize", "unique", "unique_consecutive", NULL};
    static const char *writers[] = {"_native_batch_norm", NULL};
    static const char *index_ops[] = {"_index", "index_put", "index_put_", "_index_put_", NULL};
    /* fused nn ops with a GPU branch that raises EmNoCudaKernel when the backend lacks the kernel */
    static const char *fused[] = {"softmax", "log_softmax", "_softmax_backward_data", "_native_layer_norm",
                                  "_native_layer_norm_backward", "_rms_norm", "_cross_entropy",
                                  "_cross_entropy_backward", "_fused_adam_", "_fused_adamw_", "embedding",
                                  /* cudaattn: ops/attention.c */
                                  "_scaled_dot_product_flash_attention",
                                  "_scaled_dot_product_flash_attention_backward",
                                  /* cudaattn2: ops/attention.c */
                                  "_scaled_dot_product_efficient_attention",
                                  "_scaled_dot_product_efficient_attention_backward", NULL};
    /* indexing (cudaindex): the loops run on the device through index_gpu.h, or the front-end
     * raises EmNoCudaKernel before writing when the backend lacks the entries */
    static const char *indexing[] = {"index_select", "gather", "scatter", "scatter_add", "scatter_reduce",
                                     "index_add", "index_copy", "index_fill", "_index", "index_put", "_index_put_",
                                     "masked_fill", "masked_select", "masked_scatter", "take", "take_along_dim",
                                     "nonzero", "argwhere", "_one_hot", NULL};
    /* shape, join and new_* ops (cudashape): copies into views of a result
     * on the inputs' device, or Note [CUDA shape kernels], which raise
     * EmNoCudaKernel before writing when the backend lacks them */
    static const char *shape_ops[] = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "row_stack",
                                      "dstack", "column_stack", "repeat", "tile", "repeat_interleave", "flip",
                                      "fliplr", "flipud", "roll", "rot90", "tril", "triu", "diff",
                                      "broadcast_tensors", "meshgrid", "new_zeros", "new_ones", "new_full",
                                      "new_empty", "new_tensor", NULL};
    /* cudann: nn front-ends with GPU branches (Note [CUDA nn more] in
     * csrc/cuda/nn_more.h); gelu runs through the elementwise iterator. Batch
     * norm stays in `writers` for its fallback; natively it writes the running
     * statistics on the device itself. */
    static const char *nn_more[] = {"_gelu", "_gelu_backward", "_native_dropout", "_pointwise_loss", "_nll_loss",
                                    "_nll_loss_backward", "_native_batch_norm", "_native_batch_norm_backward",
                                    "_native_group_norm", "_native_group_norm_backward", "_max_pool2d_with_indices",
                                    "_max_pool2d_backward", "_avg_pool2d", "_avg_pool2d_backward",
                                    "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", NULL};
    /* cudaconv: convolution through the backend's im2col / col2im and cuBLAS
     * (Note [CUDA im2col] in csrc/cuda/conv.h), upsampling; EmNoCudaKernel for
     * integer convolutions and when the backend lacks the entries */
    static const char *conv_ops[] = {"_im2col", "_col2im", "_convolution", "_convolution_backward",
                                     "_convolution_transpose", /* 1-d and 2-d (3-d: the fallback) */
                                     /* Note [CUDA upsample] (csrc/cuda/upsample.h) */
                                     "_upsample_nearest1d", "_upsample_nearest2d", "_upsample_nearest_exact1d",
                                     "_upsample_nearest_exact2d", "_upsample_linear1d", "_upsample_bilinear2d",
                                     "_upsample_bicubic2d", "_upsample_nearest1d_backward",
                                     "_upsample_nearest2d_backward", "_upsample_nearest_exact1d_backward",
                                     "_upsample_nearest_exact2d_backward", "_upsample_linear1d_backward",
                                     "_upsample_bilinear2d_backward", "_upsample_bicubic2d_backward", NULL};
    for (int id = 0; id < EM_NUM_OPS; id++) {
        const char *name = em_op_defs[id].name;
        for (int i = 0; shape_ops[i]; i++)
            if (!strcmp(name, shape_ops[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        builds_on_device[id] = !strncmp(name, "new_", 4);
        /* elementwise ops: the iterator launches the backend's kernel, or
         * raises EmNoCudaKernel before touching anything (Note [CUDA elementwise]) */
        if (em_op_defs[id].kernels && strcmp(em_op_defs[id].kernels->name, "none"))
            how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; reductions[i]; i++)
            if (!strcmp(name, reductions[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; as_is[i]; i++)
            if (!strcmp(name, as_is[i])) how_to_run[id] = RUN_AS_IS;
        for (int i = 0; native[i]; i++)
            if (!strcmp(name, native[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; fused[i]; i++)
            if (!strcmp(name, fused[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; indexing[i]; i++)
            if (!strcmp(name, indexing[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; sorting[i]; i++)
            if (!strcmp(name, sorting[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; nn_more[i]; i++)
            if (!strcmp(name, nn_more[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; conv_ops[i]; i++)
            if (!strcmp(name, conv_ops[i])) how_to_run[id] = RUN_NATIVE_OR_FALLBACK;
        for (int i = 0; writers[i]; i++)
            if (!strcmp(name, writers[i])) writes_args[id] = true;
        for (int i = 0; index_ops[i]; i++)
            if (!strcmp(name, index_ops[i])) cpu_indices_ok[id] = true;
        any_devices[id] = !strcmp(name, "copy_");
        size_t n = strlen(name);
        if (n > 1 && name[n - 1] == '_' && name[n - 2] != '_') writes_args[id] = true;
    }
    return 0;
}

/* Factories that build on the GPU themselves (em_factory_out allocates on
 * device= or takes a GPU out=, then em_fill_ or a random fill), falling back
 * like the ops. */
static bool native_factory(const EmOpDef *def) {
    static const char *names[] = {"zeros", "ones", "full", "empty", "rand", "randn", "randint",
                                  /* cudashape: Note [CUDA shape kernels]; _like on device= */
                                  "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like",
                                  "full_like", "empty_like", "rand_like", "randn_like", "randint_like", "empty_strided",
                                  /* cudamisc: host data + one copy (ops/factory.c), Note [GPU randperm] */
                                  "tensor", "as_tensor", "scalar_tensor", "tril_indices", "triu_indices", "randperm",
                                  NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(def->name, names[i])) return true;
    return false;
}

/* The op's row in the table, or -1 for functions outside it (factories). */
static int op_row(const EmOpDef *def) {
    return def >= em_op_defs && def < em_op_defs + EM_NUM_OPS ? (int)(def - em_op_defs) : -1;
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
    } else if (em_device(t).index != s->device.index && !s->other) {
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
    if (s->device_arg && s->target.type == EM_CUDA && !s->found) {
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
    int id = op_row(def);
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
    bool every = id >= 0 && writes_args[id] && !c->out;
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
    int id = op_row(c->def);
    bool as_is = id >= 0 && (how_to_run[id] == RUN_AS_IS || (id == EM_OP__index && !s.key_has_tensors));
    if (id >= 0 && any_devices[id]) return c->def->impl(c);
    /* zeros_like(cpu_tensor, device='cuda'): the input gives only a shape */
    if (s.device_arg && s.target.type == EM_CUDA && (id < 0 || builds_on_device[id])) s.cpu_arg = NULL;
    if (s.other || (s.cpu_arg && !as_is && !(id >= 0 && cpu_indices_ok[id])))
        return device_error(&s), NULL;
    if (em_cuda_resolve(&s.device) < 0) return NULL;
    if (as_is) return c->def->impl(c);
    if (s.device_arg && s.target.type == EM_CPU) /* zeros_like(gpu_tensor, device='cpu') */
        return run_on_host(c, s.target);
    if ((id >= 0 && how_to_run[id] == RUN_NATIVE_OR_FALLBACK) || (id < 0 && native_factory(c->def))) {
        PyObject *r = c->def->impl(c);
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
