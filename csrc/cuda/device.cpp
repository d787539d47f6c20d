/* device.cpp — devices (count, current, properties, synchronize), streams
 * and events of the EmCudaBackend table.
 *
 * Nothing runs at import: the device count is asked of CUDA at the first
 * call and cached (CUDA fixes it at initialisation anyway); without a driver
 * or GPU cudaGetDeviceCount fails and the count is 0, which is how
 * `ember.cuda.is_available()` becomes False.
 *
 * The current stream is kept per device (cuda_backend.h); NULL is the
 * device's default (legacy) stream. Streams made here are non-blocking with
 * respect to it, as torch's side streams are: order between them is only
 * what events and synchronize impose. */
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "runtime.h"

static std::once_flag count_once;
static int count_cached;
static std::atomic<void *> current_streams[EMC_MAX_DEVICES];
static std::atomic<int> multiprocessors[EMC_MAX_DEVICES];

int emc_device_count(void) {
    std::call_once(count_once, [] {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) { /* no driver / no GPU: 0, not an error */
            cudaGetLastError();
            n = 0;
        }
        count_cached = n < EMC_MAX_DEVICES ? n : EMC_MAX_DEVICES;
    });
    return count_cached;
}

int emc_valid_device(int dev) {
    int n = emc_device_count();
    if (dev < 0 || dev >= n)
        return emc_fail("invalid device ordinal %d (%d CUDA device%s)", dev, n, n == 1 ? "" : "s");
    return 0;
}

int emc_current_device(void) {
    int dev = 0;
    if (emc_device_count() == 0 || cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return dev;
}

int emc_set_device(int dev) {
    if (emc_valid_device(dev) < 0) return -1;
    return EMC_CHECK(cudaSetDevice(dev));
}

int emc_device_props(int dev, EmCudaDeviceProps *out) {
    if (emc_valid_device(dev) < 0) return -1;
    cudaDeviceProp p;
    if (EMC_CHECK(cudaGetDeviceProperties(&p, dev)) < 0) return -1;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->total_memory = (int64_t)p.totalGlobalMem;
    out->major = p.major;
    out->minor = p.minor;
    out->multi_processor_count = p.multiProcessorCount;
    out->l2_cache_size = p.l2CacheSize;
    out->warp_size = p.warpSize;
    return 0;
}

int emc_multiprocessors(int dev) {
    int n = multiprocessors[dev].load(std::memory_order_relaxed);
    if (n > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        cudaGetLastError();
        return 1;
    }
    multiprocessors[dev].store(n, std::memory_order_relaxed);
    return n;
}

int emc_synchronize(int dev) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaDeviceSynchronize());
}

/* ------------------------------------------------------------- streams */

/* priority as torch takes it: 0 is the default, lower numbers run first;
 * clamped to what the device offers. */
int emc_mem_get_info(int dev, int64_t *free_bytes, int64_t *total_bytes) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    size_t f = 0, t = 0;
    if (EMC_CHECK(cudaMemGetInfo(&f, &t)) < 0) return -1;
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return 0;
}

int emc_stream_create(int dev, int priority, EmCudaStream *out) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    int least, greatest;
    if (EMC_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest)) < 0) return -1;
    if (priority > least) priority = least;
    if (priority < greatest) priority = greatest;
    cudaStream_t s;
    if (EMC_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority)) < 0) return -1;
    *out = s;
    return 0;
}

void emc_stream_destroy(int dev, EmCudaStream s) {
    if (!s) return; /* the default stream is not ours to destroy */
    EmcDeviceGuard g(dev);
    if (!g.ok) return;
    void *expected = s; /* a destroyed stream must not stay current */
    current_streams[dev].compare_exchange_strong(expected, nullptr);
    EMC_CHECK(cudaStreamDestroy((cudaStream_t)s));
}

int emc_stream_synchronize(int dev, EmCudaStream s) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaStreamSynchronize((cudaStream_t)s));
}

/* 1 done, 0 busy, -1 error: cudaErrorNotReady is an answer, not a failure. */
static int done_or_busy(cudaError_t err, const char *what) {
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        return 0;
    }
    return emc_check(err, what) < 0 ? -1 : 1;
}

int emc_stream_query(int dev, EmCudaStream s) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return done_or_busy(cudaStreamQuery((cudaStream_t)s), "cudaStreamQuery");
}

EmCudaStream emc_current_stream(int dev) {
    if (dev < 0 || dev >= EMC_MAX_DEVICES) return nullptr;
    return current_streams[dev].load(std::memory_order_relaxed);
}

int emc_set_current_stream(int dev, EmCudaStream s) {
    if (emc_valid_device(dev) < 0) return -1;
    current_streams[dev].store(s, std::memory_order_relaxed);
    return 0;
}

int emc_stream_wait_event(int dev, EmCudaStream s, EmCudaEvent e) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
}

/* -------------------------------------------------------------- events */

int emc_event_create(int dev, bool enable_timing, EmCudaEvent *out) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    cudaEvent_t e;
    unsigned flags = enable_timing ? cudaEventDefault : cudaEventDisableTiming;
    if (EMC_CHECK(cudaEventCreateWithFlags(&e, flags)) < 0) return -1;
    *out = e;
    return 0;
}

void emc_event_destroy(int dev, EmCudaEvent e) {
    if (!e) return;
    EmcDeviceGuard g(dev);
    if (g.ok) EMC_CHECK(cudaEventDestroy((cudaEvent_t)e));
}

int emc_event_record(int dev, EmCudaEvent e, EmCudaStream s) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
}

int emc_event_synchronize(int dev, EmCudaEvent e) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaEventSynchronize((cudaEvent_t)e));
}

int emc_event_query(int dev, EmCudaEvent e) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return done_or_busy(cudaEventQuery((cudaEvent_t)e), "cudaEventQuery");
}

int emc_event_elapsed_ms(int dev, EmCudaEvent start, EmCudaEvent end, float *ms) {
    EmcDeviceGuard g(dev);
    if (!g.ok) return -1;
    return EMC_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}
