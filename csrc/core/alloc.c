/* alloc.c — CPU memory for tensor data. 64-byte aligned so vector loads never
 * straddle cache lines. A caching layer (so big fresh outputs don't pay page
 * faults every step) belongs here, behind these two functions. */
#include "../ember.h"
#include <stdlib.h>

void *em_alloc_cpu(size_t nbytes) {
    if (nbytes == 0) nbytes = 1; /* a valid, unique pointer for empty tensors */
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL; /* overflow */
    return aligned_alloc(64, rounded);
}

void em_free_cpu(void *p, size_t nbytes) {
    (void)nbytes;
    free(p);
}
