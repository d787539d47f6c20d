/* runtime.h — what the files of ember._cuda share: the error buffer, the
 * device guard, and each file's entries of the EmCudaBackend table
 * (csrc/cuda_backend.h). Included by host C++ (g++) and by .cu (nvcc).
 * Nothing here is exported: the module's one public symbol is PyInit__cuda
 * (a linker version script hides the rest, static cudart included). */
#ifndef EMBER_CUDA_RUNTIME_H
#define EMBER_CUDA_RUNTIME_H

#include <cuda_runtime_api.h>

#include "../cuda_backend.h"

/* EmDType codes (csrc/ember.h): the order the dtype tables here rely on. */
enum {
    DT_BOOL, DT_UINT8, DT_INT8, DT_INT16, DT_INT32, DT_INT64,
    DT_FLOAT16, DT_BFLOAT16, DT_FLOAT32, DT_FLOAT64, DT_COUNT
};

/* The most devices a process handles (per-device tables are this long). */
#define EMC_MAX_DEVICES 64

/* ---- errors (error.cpp): a thread-local message buffer, never an abort */
const char *emc_last_error(void);
int emc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* -1 */
/* -1 with "what: <cudaGetErrorString>" when err != cudaSuccess; 0 otherwise.
 * Clears the error so a later, unrelated call does not see it. */
int emc_check(cudaError_t err, const char *what);
#define EMC_CHECK(call) emc_check((call), #call)

/* ---- devices (device.cpp) */
int emc_device_count(void);
int emc_valid_device(int dev); /* 0, or -1 with a message */
int emc_multiprocessors(int dev); /* cached; >= 1 */

/* Makes `dev` current for a scope and restores the previous device: every
 * entry that takes a device works on that one, whatever the caller's is. */
struct EmcDeviceGuard {
    int prev = -1, ok = 0;
    explicit EmcDeviceGuard(int dev) {
        if (emc_valid_device(dev) < 0) return;
        if (emc_check(cudaGetDevice(&prev), "cudaGetDevice") < 0) return;
        if (prev != dev && emc_check(cudaSetDevice(dev), "cudaSetDevice") < 0) return;
        ok = 1;
    }
    ~EmcDeviceGuard() {
        int now;
        if (ok && cudaGetDevice(&now) == cudaSuccess && now != prev) cudaSetDevice(prev);
    }
    EmcDeviceGuard(const EmcDeviceGuard &) = delete;
    EmcDeviceGuard &operator=(const EmcDeviceGuard &) = delete;
};

/* Table entries, grouped by the file that defines them. */
int emc_current_device(void);
int emc_set_device(int dev);
int emc_device_props(int dev, EmCudaDeviceProps *out);
int emc_synchronize(int dev);
int emc_mem_get_info(int dev, int64_t *free_bytes, int64_t *total_bytes);

int emc_stream_create(int dev, int priority, EmCudaStream *out);
void emc_stream_destroy(int dev, EmCudaStream s);
int emc_stream_synchronize(int dev, EmCudaStream s);
int emc_stream_query(int dev, EmCudaStream s);
EmCudaStream emc_current_stream(int dev);
int emc_set_current_stream(int dev, EmCudaStream s);
int emc_stream_wait_event(int dev, EmCudaStream s, EmCudaEvent e);
int emc_event_create(int dev, bool enable_timing, EmCudaEvent *out);
void emc_event_destroy(int dev, EmCudaEvent e);
int emc_event_record(int dev, EmCudaEvent e, EmCudaStream s);
int emc_event_synchronize(int dev, EmCudaEvent e);
int emc_event_query(int dev, EmCudaEvent e);
int emc_event_elapsed_ms(int dev, EmCudaEvent start, EmCudaEvent end, float *ms);

void *emc_alloc(int dev, size_t nbytes, EmCudaStream stream);
void emc_free(int dev, void *ptr, size_t nbytes, EmCudaStream stream);
void emc_memory_stats(int dev, EmCudaMemoryStats *out);
void emc_reset_peak_stats(int dev);
int emc_empty_cache(void);
void *emc_host_alloc(size_t nbytes);
void emc_host_free(void *ptr);
/* Note [pinned host cache]: a non_blocking copy on `stream` reads or writes
 * host memory at ptr; a cached pinned block is not reused before it is done. */
void emc_host_record_use(const void *ptr, int dev, EmCudaStream stream);
int emc_record_stream(int dev, void *ptr, EmCudaStream stream); /* Note [record_stream] */

int emc_memcpy(void *dst, int dst_dev, const void *src, int src_dev, size_t nbytes,
               bool non_blocking);

int emc_copy_strided(int dev, int ndim, const int64_t *sizes, void *dst, int dst_dtype,
                     const int64_t *dst_strides, const void *src, int src_dtype,
                     const int64_t *src_strides);

int emc_gemm(int dev, int dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
             int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc, int64_t stride_c,
             int64_t batch, bool allow_tf32);

/* Note [GPU random numbers] (random.cu) */
int emc_random_fill(int dev, int kind, int dtype, void *out, int64_t numel, uint64_t seed,
                    uint64_t offset, double a, double b, int64_t from, uint64_t range);

/* Scratch device memory from the caching allocator for one entry's
 * duration, freed (stream-ordered) when it goes out of scope; at most 8
 * buffers. `who` names the entry in the error message. */
struct EmcScratch {
    int dev;
    cudaStream_t s;
    const char *who;
    void *ptr[8];
    size_t size[8];
    int n = 0;
    EmcScratch(int d, cudaStream_t st, const char *w = "scratch") : dev(d), s(st), who(w) {}
    void *get(size_t bytes) {
        if (n == 8) return emc_fail("%s: too many scratch buffers", who), nullptr;
        void *p = emc_alloc(dev, bytes ? bytes : 1, (EmCudaStream)s);
        if (!p) return nullptr; /* the allocator left its message */
        ptr[n] = p;
        size[n++] = bytes ? bytes : 1;
        return p;
    }
    ~EmcScratch() {
        while (n-- > 0) emc_free(dev, ptr[n], size[n], (EmCudaStream)s);
    }
    EmcScratch(const EmcScratch &) = delete;
    EmcScratch &operator=(const EmcScratch &) = delete;
};

#endif
