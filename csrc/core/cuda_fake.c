/* cuda_fake.c — Note [fake CUDA]: a test double of the CUDA backend whose
 * two "devices" are ordinary host memory. Tests switch it on with
 * `_C._cuda_use_fake_backend(True)` to exercise everything above the
 * kernels on a machine without a GPU: device bookkeeping, copies between
 * devices, the CPU fallback of Note [CUDA fallback], autograd across
 * devices, modules and optimizers on 'cuda', memory statistics, streams and
 * events. It never runs unless a test asks for it, and its kernels are the
 * CPU ones, so it says nothing about ember._cuda's own kernels: those are
 * checked on a real GPU.
 *
 * Memory of a fake device is filled with a garbage pattern on allocation
 * and on free, so a path that reads device memory before writing it, or
 * after freeing it, shows up as wrong numbers. And the pointers it hands
 * out are tagged with a high bit that makes them non-canonical addresses:
 * host code that dereferences "device" memory directly (which would crash
 * on a real GPU) crashes here too, instead of silently working. The fake's
 * own entry points remove the tag before touching the bytes. */
#include "../ember.h"
#include <time.h>

#define FAKE_DEVICES 2
#define FAKE_TAG ((uintptr_t)1 << 62)
static void *untag(const void *p) { return (void *)((uintptr_t)p - FAKE_TAG); }
static void *dev_ptr(const void *p, int dev) { return dev >= 0 ? untag(p) : (void *)p; }

static int current = 0;
static EmCudaMemoryStats stats[FAKE_DEVICES];
static char error_buf[256];

static const char *fake_last_error(void) { return error_buf; }
static int fake_fail(const char *msg) {
    snprintf(error_buf, sizeof error_buf, "%s", msg);
    return -1;
}

static int fake_device_count(void) { return FAKE_DEVICES; }
static int fake_current_device(void) { return current; }
static int fake_set_device(int dev) {
    if (dev < 0 || dev >= FAKE_DEVICES) return fake_fail("invalid device ordinal");
    current = dev;
    return 0;
}
static int fake_device_props(int dev, EmCudaDeviceProps *p) {
    snprintf(p->name, sizeof p->name, "ember fake CUDA device %d", dev);
    p->total_memory = (int64_t)1 << 30;
    p->major = 9;
    p->minor = 0;
    p->multi_processor_count = 1;
    p->l2_cache_size = 1 << 20;
    p->warp_size = 32;
    return 0;
}
static int fake_synchronize(int dev) { return 0; }

static void *fake_alloc(int dev, size_t nbytes, EmCudaStream s) {
    if (dev < 0 || dev >= FAKE_DEVICES) return fake_fail("invalid device ordinal"), NULL;
    if ((int64_t)nbytes > ((int64_t)1 << 30) - stats[dev].allocated) {
        stats[dev].num_ooms++;
        return fake_fail("the fake device holds at most 1 GiB"), NULL;
    }
    char *p = malloc(nbytes ? nbytes : 1);
    if (!p) return fake_fail("host malloc failed"), NULL;
    memset(p, 0xA5, nbytes);
    EmCudaMemoryStats *st = &stats[dev];
    st->allocated += (int64_t)nbytes;
    st->reserved += (int64_t)nbytes;
    if (st->allocated > st->max_allocated) st->max_allocated = st->allocated;
    if (st->reserved > st->max_reserved) st->max_reserved = st->reserved;
    return p + FAKE_TAG;
}
static void fake_free(int dev, void *tagged, size_t nbytes, EmCudaStream s) {
    void *p = untag(tagged);
    memset(p, 0x5A, nbytes);
    free(p);
    stats[dev].allocated -= (int64_t)nbytes;
    stats[dev].reserved -= (int64_t)nbytes;
}
static void fake_memory_stats(int dev, EmCudaMemoryStats *out) { *out = stats[dev]; }
static void fake_reset_peak(int dev) {
    stats[dev].max_allocated = stats[dev].allocated;
    stats[dev].max_reserved = stats[dev].reserved;
}
static int fake_empty_cache(void) { return 0; }
static void *fake_host_alloc(size_t n) { return malloc(n ? n : 1); }
static void fake_host_free(void *p) { free(p); }

static int fake_memcpy(void *dst, int dd, const void *src, int sd, size_t n, bool nb) {
    memmove(dev_ptr(dst, dd), dev_ptr(src, sd), n);
    return 0;
}

/* Streams are counters, events remember when they were recorded. */
static intptr_t next_handle = 1;
static int fake_stream_create(int dev, int prio, EmCudaStream *out) {
    *out = (EmCudaStream)next_handle++;
    return 0;
}
static void fake_stream_destroy(int dev, EmCudaStream s) {}
static int fake_stream_sync(int dev, EmCudaStream s) { return 0; }
static int fake_stream_query(int dev, EmCudaStream s) { return 1; }
static EmCudaStream current_streams[FAKE_DEVICES];
static EmCudaStream fake_current_stream(int dev) { return current_streams[dev]; }
static int fake_set_current_stream(int dev, EmCudaStream s) {
    current_streams[dev] = s;
    return 0;
}
static int fake_stream_wait_event(int dev, EmCudaStream s, EmCudaEvent e) { return 0; }

typedef struct {
    bool timing, recorded;
    double t;
} FakeEvent;
static int fake_event_create(int dev, bool timing, EmCudaEvent *out) {
    FakeEvent *e = calloc(1, sizeof(FakeEvent));
    if (!e) return fake_fail("out of host memory");
    e->timing = timing;
    *out = e;
    return 0;
}
static void fake_event_destroy(int dev, EmCudaEvent e) { free(e); }
static int fake_event_record(int dev, EmCudaEvent ev, EmCudaStream s) {
    FakeEvent *e = ev;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    e->recorded = true;
    return 0;
}
static int fake_event_sync(int dev, EmCudaEvent e) { return 0; }
static int fake_event_query(int dev, EmCudaEvent e) { return 1; }
static int fake_event_elapsed(int dev, EmCudaEvent a, EmCudaEvent b, float *ms) {
    FakeEvent *x = a, *y = b;
    if (!x->timing || !y->timing)
        return fake_fail("Both events must be created with argument 'enable_timing=True'.");
    if (!x->recorded || !y->recorded)
        return fake_fail("Both events must be recorded before calculating elapsed time.");
    *ms = (float)(y->t - x->t);
    return 0;
}

/* The strided copy-and-cast, done by the CPU copy on host views of the
 * fake device memory. */
static int fake_copy_strided(int dev, int ndim, const int64_t *sizes, void *dst, int dst_dtype,
                             const int64_t *dst_strides, const void *src, int src_dtype,
                             const int64_t *src_strides) {
    int64_t dext, sext;
    if (em_extent_checked(ndim, sizes, dst_strides, &dext) < 0 ||
        em_extent_checked(ndim, sizes, src_strides, &sext) < 0) {
        PyErr_Clear();
        return fake_fail("bad strides");
    }
    EmStorage *ds = em_storage_wrap(untag(dst), dext * em_itemsize(dst_dtype), em_cpu(), NULL);
    EmStorage *ss = em_storage_wrap(untag(src), sext * em_itemsize(src_dtype), em_cpu(), NULL);
    EmTensor *d = ds ? em_tensor_alloc(&EmTensorType, ds, 0, ndim, sizes, dst_strides, (EmDType)dst_dtype) : NULL;
    EmTensor *s = ss ? em_tensor_alloc(&EmTensorType, ss, 0, ndim, sizes, src_strides, (EmDType)src_dtype) : NULL;
    Py_XDECREF(ds);
    Py_XDECREF(ss);
    int r = d && s ? em_copy_(d, (PyObject *)s) : -1;
    Py_XDECREF(d);
    Py_XDECREF(s);
    if (r < 0) {
        PyErr_Clear();
        return fake_fail("strided copy failed");
    }
    return 0;
}

/* Note [CUDA elementwise] on the fake: the same launch description, run by
 * the CPU loops of the kernel table it names. */
static bool fake_has_elementwise(const char *kernel, int compute_dtype) { return true; }
static int fake_elementwise(int dev, const EmCudaElementwise *launch) {
    EmCudaElementwise e = *launch;
    for (int op = 0; op < e.nops; op++)
        if (e.data[op]) e.data[op] = untag(e.data[op]);
    return em_iter_run_prepared(&e) < 0 ? fake_fail("no CPU kernel") : 0;
}

/* cudared: Note [CUDA reduce] on the fake: the launch description, run by
 * the CPU kernel it carries, on untagged pointers. Launches are counted so
 * tests can tell the native path from Note [CUDA fallback]. */
static int64_t reduce_launches;
static bool fake_has_reduce(const char *op, int in_dtype) { return true; }
static int fake_reduce(int dev, const EmCudaReduce *launch) {
    EmCudaReduce r = *launch;
    r.in = untag(r.in);
    for (int i = 0; i < 2; i++)
        if (r.out[i]) r.out[i] = untag(r.out[i]);
    if (r.aux) r.aux = untag(r.aux);
    reduce_launches++;
    return em_reduce_run_prepared(&r) < 0 ? fake_fail("no CPU reduce kernel") : 0;
}

/* _C._cuda_fake_counters(): {"reduce": launches} since the fake was switched on. */
PyObject *em_cuda_fake_counters(PyObject *m, PyObject *unused) {
    return Py_BuildValue("{s:L}", "reduce", (long long)reduce_launches);
}

static const EmCudaBackend fake = {
    .abi = EM_CUDA_ABI,
    .name = "fake",
    .last_error = fake_last_error,
    .device_count = fake_device_count,
    .current_device = fake_current_device,
    .set_device = fake_set_device,
    .device_props = fake_device_props,
    .synchronize = fake_synchronize,
    .alloc = fake_alloc,
    .free = fake_free,
    .memory_stats = fake_memory_stats,
    .reset_peak_stats = fake_reset_peak,
    .empty_cache = fake_empty_cache,
    .host_alloc = fake_host_alloc,
    .host_free = fake_host_free,
    .memcpy = fake_memcpy,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_synchronize = fake_stream_sync,
    .stream_query = fake_stream_query,
    .current_stream = fake_current_stream,
    .set_current_stream = fake_set_current_stream,
    .stream_wait_event = fake_stream_wait_event,
    .event_create = fake_event_create,
    .event_destroy = fake_event_destroy,
    .event_record = fake_event_record,
    .event_synchronize = fake_event_sync,
    .event_query = fake_event_query,
    .event_elapsed_ms = fake_event_elapsed,
    .copy_strided = fake_copy_strided,
    .has_elementwise = fake_has_elementwise,
    .elementwise = fake_elementwise,
    .has_reduce = fake_has_reduce,
    .reduce = fake_reduce,
};

const EmCudaBackend *em_cuda_fake_backend(void) {
    current = 0;
    memset(stats, 0, sizeof stats);
    memset(current_streams, 0, sizeof current_streams);
    reduce_launches = 0;
    return &fake;
}
