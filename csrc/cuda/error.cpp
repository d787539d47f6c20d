/* error.cpp — Note [CUDA errors]: no CUDA failure ever aborts. Every CUDA
 * call is checked; a failure writes "cudaXxx: <cudaGetErrorString>" into a
 * thread-local buffer (so two threads don't garble each other's message)
 * and the entry returns -1 / NULL; the core reads the buffer through
 * `last_error` and raises RuntimeError. */
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "runtime.h"

static thread_local char error_buf[512];

const char *emc_last_error(void) { return error_buf; }

int emc_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buf, sizeof error_buf, fmt, ap);
    va_end(ap);
    return -1;
}

/* "cudaMalloc(&p, n)" -> "cudaMalloc": the message names the API, not the
 * expression the macro saw. */
static void api_name(const char *what, char *out, size_t cap) {
    size_t n = strcspn(what, "(");
    if (n >= cap) n = cap - 1;
    memcpy(out, what, n);
    out[n] = 0;
}

int emc_check(cudaError_t err, const char *what) {
    if (err == cudaSuccess) return 0;
    cudaGetLastError(); /* clear a non-sticky error: it was reported here */
    char name[96];
    api_name(what, name, sizeof name);
    return emc_fail("%s: %s", name, cudaGetErrorString(err));
}
