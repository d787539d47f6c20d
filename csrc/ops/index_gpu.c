/* index_gpu.c — the indexing loops on the device of the tensor they index
 * (index_gpu.h): cpu/index.c's loops for CPU tensors, the backend's
 * indexing entries (Note [CUDA indexing]) for GPU ones. The front-ends lay
 * out one loop description for both devices, so validation, error messages
 * and the order of checks stay the CPU's. */
#include "index_gpu.h"

static bool has_entries(void) {
    return em_cuda && em_cuda->index_offsets && em_cuda->index_gather && em_cuda->index_put &&
           em_cuda->scatter_gather && em_cuda->nonzero_scan && em_cuda->nonzero_fill;
}

int em_index_device_ok(const EmTensor *t, const char *opname) {
    if (em_is_cpu(t) || em_is_meta(t) || has_entries()) return 0; /* meta: the caller reads nothing */
    return em_check_cpu(t, opname);
}

static int64_t prod(int n, const int64_t *s) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

int64_t *em_index_offsets_alloc(EmDevice dev, int64_t n, EmTensor **hold) {
    *hold = NULL;
    if (dev.type == EM_CPU) {
        int64_t *p = n <= PY_SSIZE_T_MAX / 8 ? PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t)) : NULL;
        if (!p) PyErr_NoMemory();
        return p;
    }
    int64_t m = n > 0 ? n : 1;
    *hold = em_empty(1, &m, EM_INT64, dev);
    return *hold ? (int64_t *)em_data(*hold) : NULL;
}

void em_index_offsets_free(int64_t *off, EmTensor *hold) {
    if (hold)
        Py_DECREF(hold);
    else
        PyMem_Free(off);
}

int64_t *em_index_offsets_upload(EmDevice dev, const int64_t *host, int64_t n, EmTensor **hold) {
    int64_t *p = em_index_offsets_alloc(dev, n, hold);
    if (!p) return NULL;
    if (dev.type == EM_CPU) {
        memcpy(p, host, (size_t)n * sizeof(int64_t));
    } else if (n > 0 && em_cuda->memcpy(p, dev.index, host, -1, (size_t)n * sizeof(int64_t), false) < 0) {
        em_cuda_error("copy index offsets to the device");
        Py_CLEAR(*hold);
        return NULL;
    }
    return p;
}

int64_t em_index_offsets(EmDevice dev, int64_t *off, bool accumulate, EmTensor *idx, int nb,
                         const int64_t *bshape, int64_t size, int64_t stride, int wrap, int64_t *bad) {
    if (dev.type == EM_CPU) {
        if (em_check_cpu(idx, "index") < 0) return -2;
        return em_cpu_index_offsets(off, accumulate, idx, nb, bshape, size, stride, wrap, bad);
    }
    if (!has_entries()) {
        PyErr_SetString(EmNoCudaKernel, "ember: the CUDA backend has no indexing kernels");
        return -2;
    }
    if (prod(nb, bshape) == 0) return -1;
    EmTensor *di = em_to_device(idx, dev, false); /* CPU index tensors may index a GPU tensor */
    if (!di) return -2;
    int isz = em_itemsize(di->dtype), lead = nb - di->ndim;
    int64_t st[EM_MAX_DIMS], pos = -1, val = 0;
    for (int d = 0; d < nb; d++) {
        int td = d - lead;
        st[d] = (td < 0 || di->sizes[td] == 1) ? 0 : di->strides[td] * isz;
    }
    int r = em_cuda->index_offsets(dev.index, off, accumulate, em_data(di), di->dtype, nb, bshape, st, size, stride,
                                   wrap, &pos, &val);
    Py_DECREF(di);
    if (r < 0) return em_cuda_error("index offsets"), -2;
    if (r == 0) return -1;
    *bad = val;
    return pos;
}

int em_index_gather_on(EmDevice dev, const EmIndirect *g, int isz) {
    if (dev.type != EM_CPU) return em_cuda->index_gather(dev.index, g, isz) < 0 ? em_cuda_error("index gather") : 0;
    if (g->nj * prod(g->np, g->psize) * prod(g->na, g->asize) >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_index_gather(g, isz);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_index_gather(g, isz);
    }
    return 0;
}

int em_index_put_on(EmDevice dev, const EmIndirect *g, EmReduceOp op, EmDType dt, bool par) {
    if (dev.type != EM_CPU) return em_cuda->index_put(dev.index, g, op, dt) < 0 ? em_cuda_error("index put") : 0;
    if (g->nj * prod(g->np, g->psize) * prod(g->na, g->asize) >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_index_put(g, op, dt, par);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_index_put(g, op, dt, par);
    }
    return 0;
}

int em_scatter_on(EmDevice dev, const EmScatterLoop *g, EmReduceOp op, EmDType dt) {
    if (dev.type != EM_CPU)
        return em_cuda->scatter_gather(dev.index, g, op, dt, false) < 0 ? em_cuda_error("scatter") : 0;
    if (prod(g->nrow, g->rsize) * g->n >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_scatter(g, op, dt);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_scatter(g, op, dt);
    }
    return 0;
}

int em_gather_on(EmDevice dev, const EmScatterLoop *g, int isz) {
    bool ok;
    if (dev.type != EM_CPU) {
        /* the element dtype only sizes the copy: the unsigned type of that width */
        EmDType dt = isz == 1 ? EM_UINT8 : isz == 2 ? EM_INT16 : isz == 4 ? EM_INT32 : EM_INT64;
        int r = em_cuda->scatter_gather(dev.index, g, EM_RED_ASSIGN, dt, true);
        return r < 0 ? em_cuda_error("gather") : r == 0;
    }
    if (prod(g->nrow, g->rsize) * g->n >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        ok = em_cpu_gather(g, isz);
        Py_END_ALLOW_THREADS
    } else {
        ok = em_cpu_gather(g, isz);
    }
    return ok;
}

/* ------------------------------------------------------------ nonzero */

/* The running count of t's nonzero elements (a device tensor), *n the total. */
static EmTensor *nonzero_scan(EmTensor *t, int64_t *n) {
    int64_t m = t->numel > 0 ? t->numel : 1;
    EmTensor *scan = em_empty(1, &m, EM_INT64, em_device(t));
    if (!scan) return NULL;
    *n = 0;
    if (t->numel > 0 && em_cuda->nonzero_scan(em_device(t).index, em_data(t), t->dtype, t->ndim, t->sizes,
                                              t->strides, (int64_t *)em_data(scan), n) < 0) {
        Py_DECREF(scan);
        return em_cuda_error("nonzero"), NULL;
    }
    return scan;
}

static int64_t *nonzero_offsets_cpu(EmTensor *mask, const int64_t *ostrides, int64_t *n) {
    int nch = em_cpu_nonzero_chunks(mask);
    int64_t counts[256], total = 0;
    bool big = mask->numel >= 65536;
    if (big) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_nonzero_count(mask, nch, counts);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_nonzero_count(mask, nch, counts);
    }
    for (int c = 0; c < nch; c++) total += counts[c];
    EmTensor *none;
    int64_t *off = em_index_offsets_alloc(em_cpu(), total, &none);
    if (!off) return NULL;
    if (big) {
        Py_BEGIN_ALLOW_THREADS
        em_cpu_nonzero_fill(mask, nch, counts, NULL, off, ostrides);
        Py_END_ALLOW_THREADS
    } else {
        em_cpu_nonzero_fill(mask, nch, counts, NULL, off, ostrides);
    }
    *n = total;
    return off;
}

int em_index_meta_nonzero_error(void) {
    PyErr_SetString(PyExc_NotImplementedError,
                    "The register_meta function for torch.nonzero() raises unimplemented by default, as a correct "
                    "data-independent implementation does not exist. This implementation returns a fake value, "
                    "assuming all elements of the tensor are non-zero. To enable this registration, please set "
                    "'torch.fx.experimental._config.meta_nonzero_assume_all_nonzero' to True.");
    return -1;
}

int64_t *em_index_nonzero_offsets(EmTensor *t, const int64_t *ostrides, int64_t *n, EmTensor **hold) {
    *hold = NULL;
    if (em_is_meta(t)) return em_index_meta_nonzero_error(), NULL;
    if (em_is_cpu(t)) return nonzero_offsets_cpu(t, ostrides, n);
    if (em_index_device_ok(t, "nonzero") < 0) return NULL;
    EmTensor *scan = nonzero_scan(t, n);
    if (!scan) return NULL;
    int64_t *off = em_index_offsets_alloc(em_device(t), *n, hold);
    if (off && *n > 0 &&
        em_cuda->nonzero_fill(em_device(t).index, em_data(t), t->dtype, t->ndim, t->sizes, t->strides,
                              (const int64_t *)em_data(scan), NULL, off, ostrides) < 0) {
        em_cuda_error("nonzero");
        Py_CLEAR(*hold);
        off = NULL;
    }
    Py_DECREF(scan);
    return off;
}

EmTensor *em_index_nonzero_gpu(EmTensor *t) {
    int64_t n;
    EmTensor *scan = nonzero_scan(t, &n);
    if (!scan) return NULL;
    int64_t shape[2] = {n, t->ndim};
    EmTensor *r = em_empty(2, shape, EM_INT64, em_device(t));
    if (r && n > 0 && t->ndim > 0 &&
        em_cuda->nonzero_fill(em_device(t).index, em_data(t), t->dtype, t->ndim, t->sizes, t->strides,
                              (const int64_t *)em_data(scan), (int64_t *)em_data(r), NULL, NULL) < 0) {
        em_cuda_error("nonzero");
        Py_CLEAR(r);
    }
    Py_DECREF(scan);
    return r;
}
