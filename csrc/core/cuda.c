/* cuda.c — the core's side of Note [CUDA backend] (csrc/cuda_backend.h):
 * loading ember._cuda at first use, device ordinals, CUDA storage memory,
 * copies that cross devices, and the `_C._cuda_*` functions ember.cuda is
 * written on. Nothing here links CUDA: every GPU call goes through `em_cuda`.
 */
#include "../ember.h"

const EmCudaBackend *em_cuda;
bool em_cuda_used;
static bool cuda_load_tried;
static int64_t live_cuda_storages; /* the backend may not change while any exist */

/* RuntimeError with the backend's message: "<what>: <message>". */
int em_cuda_error(const char *what) {
    const char *msg = em_cuda && em_cuda->last_error ? em_cuda->last_error() : "unknown error";
    PyErr_Format(PyExc_RuntimeError, "CUDA error: %s: %s", what, msg);
    return -1;
}

/* Take the backend table of module `from` (its capsule `<from>._backend`). */
static int install(const EmCudaBackend *b, const char *from) {
    if (!b || b->abi != EM_CUDA_ABI) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s was built for another version of ember (backend ABI %d, core %d); "
                     "rebuild ember", from, b ? b->abi : -1, EM_CUDA_ABI);
        return -1;
    }
    em_cuda = b;
    return 0;
}

/* Import ember._cuda once and take its backend. 0 when a backend is
 * installed, 1 when none can be (not built, or its CUDA libraries fail to
 * load: the ImportError is kept as the reason), -1 on other errors. */
static PyObject *load_failure; /* why ember._cuda could not be imported */
static int cuda_load(void) {
    if (em_cuda) return 0;
    if (cuda_load_tried) return 1;
    cuda_load_tried = true;
    PyObject *mod = PyImport_ImportModule("ember._cuda");
    if (!mod) {
        if (!PyErr_ExceptionMatches(PyExc_ImportError)) return -1;
        if (PyErr_ExceptionMatches(PyExc_ModuleNotFoundError)) { /* not built */
            PyErr_Clear();
            return 1;
        }
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        load_failure = v ? PyObject_Str(v) : NULL;
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(tb);
        PyErr_Clear();
        return 1;
    }
    const EmCudaBackend *b = PyCapsule_Import(EM_CUDA_CAPSULE, 0);
    Py_DECREF(mod);
    if (!b) return -1;
    return install(b, "ember._cuda");
}

int em_cuda_device_count(void) {
    int r = cuda_load();
    if (r < 0) return -1;
    return r == 0 ? em_cuda->device_count() : 0;
}

/* The backend, with at least one GPU; RuntimeError otherwise. */
const EmCudaBackend *em_cuda_get(void) {
    int n = em_cuda_device_count();
    if (n < 0) return NULL;
    if (n > 0) return em_cuda;
    if (!em_cuda) {
        if (load_failure)
            PyErr_Format(PyExc_RuntimeError,
                         "ember's CUDA backend could not be loaded (%U), so only 'cpu' tensors exist "
                         "(ember.cuda.is_available() is False)", load_failure);
        else
            PyErr_SetString(PyExc_RuntimeError,
                            "ember was built without CUDA support (nvcc was not found at build time), "
                            "so only 'cpu' tensors exist (ember.cuda.is_available() is False)");
    } else {
        PyErr_SetString(PyExc_RuntimeError,
                        "Found no NVIDIA driver or CUDA-capable GPU on this system, so only 'cpu' "
                        "tensors exist (ember.cuda.is_available() is False)");
    }
    return NULL;
}

/* Give 'cuda' its ordinal (the current device) and check it exists. */
int em_cuda_resolve(EmDevice *d) {
    if (d->type != EM_CUDA) return 0;
    const EmCudaBackend *b = em_cuda_get();
    if (!b) return -1;
    if (d->index < 0) d->index = (int8_t)b->current_device();
    int n = b->device_count();
    if (d->index >= n) {
        PyErr_Format(PyExc_RuntimeError,
                     "CUDA error: invalid device ordinal: cuda:%d requested, but %d CUDA device%s "
                     "available", d->index, n, n == 1 ? " is" : "s are");
        return -1;
    }
    return 0;
}

int em_device_unavailable(EmDevice d) {
    EmDevice r = d;
    return em_cuda_resolve(&r) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- memory */

void *em_cuda_alloc(int dev, size_t nbytes) {
    void *p = em_cuda->alloc(dev, nbytes, em_cuda->current_stream(dev));
    if (!p) {
        const char *msg = em_cuda->last_error();
        PyErr_Format(PyExc_RuntimeError, "CUDA out of memory. Tried to allocate %zu bytes on cuda:%d (%s)",
                     nbytes, dev, msg ? msg : "");
        return NULL;
    }
    live_cuda_storages++;
    em_cuda_used = true;
    return p;
}

static const EmCudaBackend *retired; /* an installed backend, switched off while its storages lived */

void em_cuda_free(int dev, void *p, size_t nbytes) {
    const EmCudaBackend *b = em_cuda ? em_cuda : retired;
    b->free(dev, p, nbytes, b->current_stream(dev));
    live_cuda_storages--;
}

/* ------------------------------------------------------------- copies */

/* Strides of src seen with dst's shape: size-1 and missing leading dims
 * broadcast with stride 0. RuntimeError like torch when they don't fit. */
static int broadcast_strides(const EmTensor *dst, const EmTensor *src, int64_t *out) {
    if (src->ndim > dst->ndim) goto bad;
    int lead = dst->ndim - src->ndim;
    for (int i = 0; i < dst->ndim; i++) {
        if (i < lead) {
            out[i] = 0;
            continue;
        }
        int64_t s = src->sizes[i - lead];
        if (s == dst->sizes[i])
            out[i] = s == 1 ? 0 : src->strides[i - lead];
        else if (s == 1)
            out[i] = 0;
        else
            goto bad;
    }
    return 0;
bad:;
    char a[EM_SHAPE_BUF], b[EM_SHAPE_BUF];
    PyErr_Format(PyExc_RuntimeError,
                 "The size of tensor a (%s) must match the size of tensor b (%s) for copy_: src "
                 "cannot be broadcast to dst", em_shape_str(dst->ndim, dst->sizes, a, sizeof a),
                 em_shape_str(src->ndim, src->sizes, b, sizeof b));
    return -1;
}

static int device_of(const EmTensor *t) { return em_is_cpu(t) ? -1 : em_device(t).index; }

/* A contiguous copy of t on device `dev` (-1: the host) in t's own shape
 * and dtype: t itself when it already is one. New reference. */
static EmTensor *contiguous_on(EmTensor *t, int dev) {
    EmDevice target = dev < 0 ? em_cpu() : (EmDevice){EM_CUDA, (int8_t)dev};
    if (device_of(t) == dev && em_is_contiguous(t)) return (EmTensor *)Py_NewRef(t);
    EmTensor *c = em_contiguous(t); /* on t's device */
    if (!c || device_of(c) == dev) return c;
    EmTensor *r = em_empty(c->ndim, c->sizes, (EmDType)c->dtype, target);
    if (r && em_cuda->memcpy(em_data(r), dev, em_data(c), device_of(c),
                             (size_t)c->numel * em_itemsize(c->dtype), false) < 0) {
        em_cuda_error("copy between devices");
        Py_CLEAR(r);
    }
    Py_DECREF(c);
    return r;
}

/* dst <- src where at least one of them is on a GPU (copy_'s semantics:
 * src broadcasts to dst, dtype cast). The bytes cross devices contiguous and
 * in src's dtype; the cast and dst's strides are done on dst's device. */
int em_cuda_copy_(EmTensor *dst, EmTensor *src, bool non_blocking) {
    if (!em_cuda_get()) return -1;
    int64_t bstrides[EM_MAX_DIMS];
    if (broadcast_strides(dst, src, bstrides) < 0) return -1;
    if (dst->numel == 0) return 0;
    int dd = device_of(dst), sd = device_of(src);
    size_t nbytes = (size_t)dst->numel * em_itemsize(dst->dtype);
    bool same_shape = src->numel == dst->numel && src->ndim == dst->ndim;
    if (dd != sd && same_shape && src->dtype == dst->dtype && em_is_contiguous(src) &&
        em_is_contiguous(dst)) { /* the common case: one transfer, nothing else */
        if (em_cuda->memcpy(em_data(dst), dd, em_data(src), sd, nbytes, non_blocking) < 0)
            return em_cuda_error("copy between devices");
        return 0;
    }
    if (dd < 0) { /* to the host: bring src over, then the CPU copy does the rest */
        EmTensor *h = contiguous_on(src, -1);
        if (!h) return -1;
        int r = em_copy_(dst, (PyObject *)h);
        Py_DECREF(h);
        return r;
    }
    /* src's bytes on dst's device: itself, or a contiguous copy brought over */
    EmTensor *s = sd == dd ? (EmTensor *)Py_NewRef(src) : contiguous_on(src, dd);
    if (!s) return -1;
    int64_t sstrides[EM_MAX_DIMS];
    if (s != src) { /* s is contiguous in src's shape: broadcast it again */
        if (broadcast_strides(dst, s, sstrides) < 0) {
            Py_DECREF(s);
            return -1;
        }
    } else {
        memcpy(sstrides, bstrides, sizeof(int64_t) * (size_t)dst->ndim);
    }
    /* the same storage on both sides: read from a private copy first */
    EmTensor *tmp = NULL;
    if (s->storage == dst->storage) {
        tmp = em_empty(s->ndim, s->sizes, (EmDType)s->dtype, em_device(s));
        if (!tmp || em_cuda->copy_strided(dd, s->ndim, s->sizes, em_data(tmp), tmp->dtype, tmp->strides,
                                          em_data(s), s->dtype, s->strides) < 0) {
            if (tmp) em_cuda_error("copy_");
            Py_XDECREF(tmp);
            Py_DECREF(s);
            return -1;
        }
        Py_SETREF(s, tmp);
        broadcast_strides(dst, s, sstrides);
    }
    int r = em_cuda->copy_strided(dd, dst->ndim, dst->sizes, em_data(dst), dst->dtype, dst->strides,
                                  em_data(s), s->dtype, sstrides);
    Py_DECREF(s);
    return r < 0 ? em_cuda_error("copy_") : 0;
}

/* Every element of a GPU tensor set to one value: the value goes over once
 * and is broadcast by the strided copy (stride 0). */
int em_cuda_fill_(EmTensor *dst, EmScalar value) {
    EmTensor *one = em_scalar_tensor(value, (EmDType)dst->dtype, em_cpu());
    if (!one) return -1;
    int r = em_cuda_copy_(dst, one, false);
    Py_DECREF(one);
    return r;
}

/* A copy of t on `device` (new reference; t itself when already there). */
EmTensor *em_to_device(EmTensor *t, EmDevice device, bool non_blocking) {
    if (em_cuda_resolve(&device) < 0) return NULL;
    if (em_device_eq(em_device(t), device)) return (EmTensor *)Py_NewRef(t);
    EmTensor *r;
    if (em_is_non_overlapping_and_dense(t)) /* keep the memory layout, as torch does */
        r = em_empty_strided(t->ndim, t->sizes, t->strides, (EmDType)t->dtype, device);
    else
        r = em_empty(t->ndim, t->sizes, (EmDType)t->dtype, device);
    if (!r) return NULL;
    if (em_copy_device_(r, t, non_blocking) < 0) Py_CLEAR(r);
    return r;
}

int em_copy_device_(EmTensor *dst, EmTensor *src, bool non_blocking) {
    if (em_is_cpu(dst) && em_is_cpu(src)) return em_copy_(dst, (PyObject *)src);
    if (em_is_meta(dst) || em_is_meta(src)) return em_meta_copy_(dst, src);
    return em_cuda_copy_(dst, src, non_blocking);
}

/* ---------------------------------------------- _C._cuda_* for ember.cuda */

static int device_arg(PyObject *o, int *dev) {
    if (!em_cuda_get()) return -1;
    if (o == NULL || o == Py_None) {
        *dev = em_cuda->current_device();
        return 0;
    }
    EmDevice d;
    if (em_device_from_py(o, &d) < 0) return -1;
    if (d.type != EM_CUDA) {
        PyErr_Format(PyExc_ValueError, "Expected a cuda device, but got: %R", o);
        return -1;
    }
    if (em_cuda_resolve(&d) < 0) return -1;
    *dev = d.index;
    return 0;
}

static PyObject *py_device_count(PyObject *m, PyObject *u) {
    int n = em_cuda_device_count();
    if (n < 0) return NULL;
    return PyLong_FromLong(n);
}

static PyObject *py_backend_name(PyObject *m, PyObject *u) {
    if (cuda_load() < 0) return NULL;
    if (!em_cuda) return Py_NewRef(load_failure ? load_failure : Py_None);
    return PyUnicode_FromString(em_cuda->name);
}

static PyObject *py_current_device(PyObject *m, PyObject *u) {
    if (!em_cuda_get()) return NULL;
    return PyLong_FromLong(em_cuda->current_device());
}

static PyObject *py_set_device(PyObject *m, PyObject *o) {
    int dev;
    if (device_arg(o, &dev) < 0) return NULL;
    if (em_cuda->set_device(dev) < 0) return em_cuda_error("set_device"), NULL;
    Py_RETURN_NONE;
}

static PyObject *py_synchronize(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    int dev;
    if (device_arg(n ? a[0] : NULL, &dev) < 0) return NULL;
    if (em_cuda->synchronize(dev) < 0) return em_cuda_error("synchronize"), NULL;
    Py_RETURN_NONE;
}

static PyObject *py_device_props(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    int dev;
    if (device_arg(n ? a[0] : NULL, &dev) < 0) return NULL;
    EmCudaDeviceProps p;
    memset(&p, 0, sizeof p);
    if (em_cuda->device_props(dev, &p) < 0) return em_cuda_error("get_device_properties"), NULL;
    return Py_BuildValue("{s:s,s:L,s:i,s:i,s:i,s:L,s:i}", "name", p.name, "total_memory",
                         (long long)p.total_memory, "major", p.major, "minor", p.minor,
                         "multi_processor_count", p.multi_processor_count, "L2_cache_size",
                         (long long)p.l2_cache_size, "warp_size", p.warp_size);
}

static PyObject *py_memory_stats(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    int dev;
    if (device_arg(n ? a[0] : NULL, &dev) < 0) return NULL;
    EmCudaMemoryStats s;
    memset(&s, 0, sizeof s);
    em_cuda->memory_stats(dev, &s);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L}", "allocated_bytes.all.current",
                         (long long)s.allocated, "allocated_bytes.all.peak", (long long)s.max_allocated,
                         "reserved_bytes.all.current", (long long)s.reserved, "reserved_bytes.all.peak",
                         (long long)s.max_reserved, "num_alloc_retries", (long long)s.num_alloc_retries,
                         "num_ooms", (long long)s.num_ooms);
}

/* (free, total) bytes of a device, as torch.cuda.mem_get_info */
static PyObject *py_mem_get_info(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    int dev;
    if (device_arg(n ? a[0] : NULL, &dev) < 0) return NULL;
    int64_t free_bytes = 0, total_bytes = 0;
    if (em_cuda->mem_get_info(dev, &free_bytes, &total_bytes) < 0) {
        em_cuda_error("mem_get_info");
        return NULL;
    }
    return Py_BuildValue("(LL)", (long long)free_bytes, (long long)total_bytes);
}

static PyObject *py_reset_peak(PyObject *m, PyObject *const *a, Py_ssize_t n) {
    int dev;
    if (device_arg(n ? a[0] : NULL, &dev) < 0) return NULL;
    em_cuda->reset_peak_stats(dev);
    Py_RETURN_NONE;
}

static PyObject *py_empty_cache(PyObject *m, PyObject *u) {
    if (!em_cuda) Py_RETURN_NONE; /* nothing was ever cached */
    if (em_cuda->empty_cache() < 0) return em_cuda_error("empty_cache"), NULL;
    Py_RETURN_NONE;
}

/* Streams and events travel to Python as integers (their handles). */
static int handle_arg(PyObject *o, void **h) {
    *h = o == Py_None ? NULL : PyLong_AsVoidPtr(o);
    return *h == NULL && PyErr_Occurred() ? -1 : 0;
}

static PyObject *py_stream_new(PyObject *m, PyObject *args) {
    PyObject *d;
    int prio, dev;
    if (!PyArg_ParseTuple(args, "Oi", &d, &prio) || device_arg(d, &dev) < 0) return NULL;
    EmCudaStream s;
    if (em_cuda->stream_create(dev, prio, &s) < 0) return em_cuda_error("Stream"), NULL;
    return PyLong_FromVoidPtr(s);
}

/* _C._cuda_stream(op, device, handle[, other]): the stream operations */
static PyObject *py_stream_op(PyObject *m, PyObject *args) {
    const char *op;
    PyObject *d, *h, *h2 = Py_None;
    int dev;
    void *s, *e;
    if (!PyArg_ParseTuple(args, "sOO|O", &op, &d, &h, &h2) || device_arg(d, &dev) < 0 ||
        handle_arg(h, &s) < 0 || handle_arg(h2, &e) < 0)
        return NULL;
    int r = 0;
    if (!strcmp(op, "destroy")) {
        if (s) em_cuda->stream_destroy(dev, s);
    } else if (!strcmp(op, "synchronize")) {
        r = em_cuda->stream_synchronize(dev, s);
    } else if (!strcmp(op, "query")) {
        r = em_cuda->stream_query(dev, s);
        if (r >= 0) return PyBool_FromLong(r);
    } else if (!strcmp(op, "current")) {
        return PyLong_FromVoidPtr(em_cuda->current_stream(dev));
    } else if (!strcmp(op, "set_current")) {
        r = em_cuda->set_current_stream(dev, s);
    } else if (!strcmp(op, "wait_event")) {
        r = em_cuda->stream_wait_event(dev, s, e);
    } else {
        PyErr_Format(PyExc_ValueError, "unknown stream operation '%s'", op);
        return NULL;
    }
    if (r < 0) return em_cuda_error(op), NULL;
    Py_RETURN_NONE;
}

static PyObject *py_event_new(PyObject *m, PyObject *args) {
    PyObject *d;
    int timing, dev;
    if (!PyArg_ParseTuple(args, "Op", &d, &timing) || device_arg(d, &dev) < 0) return NULL;
    EmCudaEvent e;
    if (em_cuda->event_create(dev, timing, &e) < 0) return em_cuda_error("Event"), NULL;
    return PyLong_FromVoidPtr(e);
}

/* _C._cuda_event(op, device, handle[, other]) */
static PyObject *py_event_op(PyObject *m, PyObject *args) {
    const char *op;
    PyObject *d, *h, *h2 = Py_None;
    int dev;
    void *e, *x;
    if (!PyArg_ParseTuple(args, "sOO|O", &op, &d, &h, &h2) || device_arg(d, &dev) < 0 ||
        handle_arg(h, &e) < 0 || handle_arg(h2, &x) < 0)
        return NULL;
    int r = 0;
    if (!strcmp(op, "destroy")) {
        if (e) em_cuda->event_destroy(dev, e);
    } else if (!strcmp(op, "record")) {
        r = em_cuda->event_record(dev, e, x);
    } else if (!strcmp(op, "synchronize")) {
        r = em_cuda->event_synchronize(dev, e);
    } else if (!strcmp(op, "query")) {
        r = em_cuda->event_query(dev, e);
        if (r >= 0) return PyBool_FromLong(r);
    } else if (!strcmp(op, "elapsed")) {
        float ms = 0;
        r = em_cuda->event_elapsed_ms(dev, e, x, &ms);
        if (r >= 0) return PyFloat_FromDouble(ms);
    } else {
        PyErr_Format(PyExc_ValueError, "unknown event operation '%s'", op);
        return NULL;
    }
    if (r < 0) return em_cuda_error(op), NULL;
    Py_RETURN_NONE;
}

/* _C._cuda_use_backend(module): the EmCudaBackend of another extension's
 * capsule `<module>._backend` replaces ember._cuda (the tests install the
 * test double of Note [fake CUDA], ember._cuda_fake, this way); None goes
 * back to ember._cuda, loaded at the next CUDA request. While CUDA storages
 * are alive the backend may only be switched back from an installed one,
 * which stays on to free them ("retired"). */
static const EmCudaBackend *installed; /* em_cuda came from _cuda_use_backend */
static PyObject *py_use_backend(PyObject *m, PyObject *module) {
    if (module != Py_None && !PyUnicode_Check(module)) {
        PyErr_Format(PyExc_TypeError, "_cuda_use_backend(): expected a module name or None, got %s",
                     Py_TYPE(module)->tp_name);
        return NULL;
    }
    bool want = module != Py_None;
    if (live_cuda_storages > 0 && (want || !installed || em_cuda != installed)) {
        PyErr_Format(PyExc_RuntimeError,
                     "cannot switch the CUDA backend while %lld CUDA storages are alive",
                     (long long)live_cuda_storages);
        return NULL;
    }
    if (!want) {
        if (live_cuda_storages > 0) retired = em_cuda; /* it still frees what it made */
        em_cuda = installed = NULL;
        em_cuda_used = false;
        cuda_load_tried = false;
        Py_CLEAR(load_failure);
        Py_RETURN_NONE;
    }
    const char *name = PyUnicode_AsUTF8(module);
    if (!name) return NULL;
    char capsule[256];
    if (snprintf(capsule, sizeof capsule, "%s._backend", name) >= (int)sizeof capsule) {
        PyErr_SetString(PyExc_ValueError, "_cuda_use_backend(): module name too long");
        return NULL;
    }
    PyObject *mod = PyImport_ImportModule(name);
    if (!mod) return NULL;
    Py_DECREF(mod);
    const EmCudaBackend *b = PyCapsule_Import(capsule, 0);
    if (!b || install(b, name) < 0) return NULL;
    installed = b;
    em_cuda_used = true;
    Py_RETURN_NONE;
}

/* Note [GPU random numbers]: each device's generator is a seed and the
 * offset of its next launch (torch's Philox generator state). */
#define EM_CUDA_DEFAULT_SEED 67280421310721ULL /* torch's default seed */
static uint64_t gen_seed[128], gen_offset[128];
static bool gen_seeded[128];
/* what an unseeded device's generator starts from: ember.manual_seed sets
 * it without loading the backend (_C._cuda_seed_all_lazily), as torch defers
 * seeding the GPUs until CUDA is first used */
static uint64_t start_seed = EM_CUDA_DEFAULT_SEED;

static uint64_t seed_from(PyObject *seed, bool *ok) {
    /* torch keeps seeds in [-2**63, 2**64) as uint64 */
    PyObject *mask = PyLong_FromUnsignedLongLong(0xFFFFFFFFFFFFFFFFULL);
    PyObject *v = mask ? PyNumber_And(seed, mask) : NULL;
    Py_XDECREF(mask);
    uint64_t r = v ? PyLong_AsUnsignedLongLong(v) : 0;
    Py_XDECREF(v);
    *ok = !PyErr_Occurred();
    return r;
}

void em_cuda_generator_next(int dev, uint64_t *seed, uint64_t *offset) {
    if (!gen_seeded[dev]) {
        gen_seed[dev] = start_seed;
        gen_seeded[dev] = true;
    }
    *seed = gen_seed[dev];
    *offset = gen_offset[dev]++;
}

/* _C._cuda_seed_all_lazily(seed): every device's generator restarts from
 * seed at its next use; nothing is loaded. */
static PyObject *py_seed_all_lazily(PyObject *m, PyObject *seed) {
    bool ok;
    uint64_t s = seed_from(seed, &ok);
    if (!ok) return NULL;
    start_seed = s;
    memset(gen_seeded, 0, sizeof gen_seeded);
    memset(gen_offset, 0, sizeof gen_offset);
    Py_RETURN_NONE;
}

/* _C._cuda_generator(device[, seed[, offset]]): (seed, offset); with seed,
 * reseed first (offset 0 unless given: set_rng_state) */
static PyObject *py_generator(PyObject *m, PyObject *args) {
    PyObject *d, *seed = NULL;
    unsigned long long offset = 0;
    int dev;
    if (!PyArg_ParseTuple(args, "O|OK", &d, &seed, &offset) || device_arg(d, &dev) < 0) return NULL;
    if (seed) {
        bool ok;
        uint64_t s = seed_from(seed, &ok);
        if (!ok) return NULL;
        gen_seed[dev] = s;
        gen_offset[dev] = offset;
        gen_seeded[dev] = true;
    } else if (!gen_seeded[dev]) {
        gen_seed[dev] = start_seed;
        gen_seeded[dev] = true;
    }
    return Py_BuildValue("(KK)", (unsigned long long)gen_seed[dev], (unsigned long long)gen_offset[dev]);
}

/* torch.backends.cuda.matmul.allow_tf32: float32 GPU products may use TF32 (Note [GPU gemm]) */
bool em_allow_tf32;

static PyObject *py_set_allow_tf32(PyObject *m, PyObject *on) {
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    em_allow_tf32 = v;
    Py_RETURN_NONE;
}
static PyObject *py_get_allow_tf32(PyObject *m, PyObject *u) { return PyBool_FromLong(em_allow_tf32); }

static PyObject *py_live_storages(PyObject *m, PyObject *u) {
    return PyLong_FromLongLong(live_cuda_storages);
}

static PyMethodDef cuda_methods[] = {
    {"_cuda_device_count", py_device_count, METH_NOARGS, NULL},
    {"_cuda_backend_name", py_backend_name, METH_NOARGS, NULL},
    {"_cuda_current_device", py_current_device, METH_NOARGS, NULL},
    {"_cuda_set_device", py_set_device, METH_O, NULL},
    {"_cuda_synchronize", (PyCFunction)(void (*)(void))py_synchronize, METH_FASTCALL, NULL},
    {"_cuda_device_properties", (PyCFunction)(void (*)(void))py_device_props, METH_FASTCALL, NULL},
    {"_cuda_memory_stats", (PyCFunction)(void (*)(void))py_memory_stats, METH_FASTCALL, NULL},
    {"_cuda_mem_get_info", (PyCFunction)(void (*)(void))py_mem_get_info, METH_FASTCALL, NULL},
    {"_cuda_reset_peak_memory_stats", (PyCFunction)(void (*)(void))py_reset_peak, METH_FASTCALL, NULL},
    {"_cuda_empty_cache", py_empty_cache, METH_NOARGS, NULL},
    {"_cuda_stream_new", py_stream_new, METH_VARARGS, NULL},
    {"_cuda_stream", py_stream_op, METH_VARARGS, NULL},
    {"_cuda_event_new", py_event_new, METH_VARARGS, NULL},
    {"_cuda_event", py_event_op, METH_VARARGS, NULL},
    {"_cuda_use_backend", py_use_backend, METH_O, NULL},
    {"_cuda_live_storages", py_live_storages, METH_NOARGS, NULL},
    {"_set_allow_tf32", py_set_allow_tf32, METH_O, NULL},
    {"_cuda_generator", py_generator, METH_VARARGS, NULL},
    {"_cuda_seed_all_lazily", py_seed_all_lazily, METH_O, NULL},
    {"_get_allow_tf32", py_get_allow_tf32, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

int em_init_cuda(PyObject *m) { return PyModule_AddFunctions(m, cuda_methods); }
