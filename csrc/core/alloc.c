/* alloc.c — CPU memory for tensor data, 64-byte aligned so vector loads
 * never straddle cache lines.
 *
 * Note [CPU block cache]: big blocks come from mmap inside malloc, and each
 * fresh one costs a page fault per 4 KiB on first touch; a training step
 * frees and re-allocates the same activation sizes every iteration, so
 * those faults (and the kernel zeroing the pages) were a tenth of a GPT
 * step. Blocks of at least CACHE_MIN bytes are rounded up to a size class
 * (four per power of two, so at most 25% slack) and, when freed, kept in a
 * free list per class for the next allocation of that class, up to
 * CACHE_MAX bytes in all; beyond that they go back to the system. Smaller
 * blocks come from malloc's own heap, which already reuses them. */
#include "../ember.h"
#include <pthread.h>
#include <stdlib.h>

#define CACHE_MIN ((size_t)256 << 10)
#define CACHE_MAX ((size_t)1 << 30)
#define NBINS (4 * 64)

static void *bins[NBINS]; /* singly linked through each free block's first word */
static size_t cached_bytes;
static int64_t hits, misses;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A forked child (DataLoader workers) starts with the lock free even if
 * another thread held it at the fork. */
static void reset_lock_in_child(void) { pthread_mutex_init(&lock, NULL); }
__attribute__((constructor)) static void register_fork_handler(void) {
    pthread_atfork(NULL, NULL, reset_lock_in_child);
}

/* The size class of n >= CACHE_MIN: n rounded up to a quarter of its power
 * of two; *bin gets the class's free list. 0 on overflow. */
static size_t size_class(size_t n, int *bin) {
    int log2 = 63 - __builtin_clzll((unsigned long long)n);
    size_t step = ((size_t)1 << log2) / 4;
    size_t c = (n + step - 1) / step * step;
    if (c < n) return 0;
    int q = (int)(c / step) - 4; /* 0..4: c may reach the next power of two */
    *bin = 4 * log2 + q;
    return *bin < NBINS ? c : 0;
}

void *em_alloc_cpu(size_t nbytes) {
    if (nbytes == 0) nbytes = 1; /* a valid, unique pointer for empty tensors */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL; /* overflow */
    int bin;
    size_t c = rounded >= CACHE_MIN ? size_class(rounded, &bin) : 0;
    if (!c) return aligned_alloc(64, rounded);
    pthread_mutex_lock(&lock);
    void *p = bins[bin];
    if (p) {
        bins[bin] = *(void **)p;
        cached_bytes -= c;
        hits++;
    } else {
        misses++;
    }
    pthread_mutex_unlock(&lock);
    return p ? p : aligned_alloc(64, c);
}

void em_free_cpu(void *p, size_t nbytes) {
    if (!p) return;
    if (nbytes == 0) nbytes = 1;
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    int bin;
    size_t c = rounded >= CACHE_MIN ? size_class(rounded, &bin) : 0;
    if (c) {
        pthread_mutex_lock(&lock);
        bool keep = cached_bytes + c <= CACHE_MAX;
        if (keep) {
            *(void **)p = bins[bin];
            bins[bin] = p;
            cached_bytes += c;
        }
        pthread_mutex_unlock(&lock);
        if (keep) return;
    }
    free(p);
}

/* Give every cached block back to the system. */
void em_cpu_cache_clear(void) {
    pthread_mutex_lock(&lock);
    for (int b = 0; b < NBINS; b++) {
        while (bins[b]) {
            void *p = bins[b];
            bins[b] = *(void **)p;
            free(p);
        }
    }
    cached_bytes = 0;
    pthread_mutex_unlock(&lock);
}

/* (bytes cached now, allocations served from the cache, allocations that missed it) */
void em_cpu_cache_stats(int64_t out[3]) {
    pthread_mutex_lock(&lock);
    out[0] = (int64_t)cached_bytes;
    out[1] = hits;
    out[2] = misses;
    pthread_mutex_unlock(&lock);
}
