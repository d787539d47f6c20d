/* registry.c — Note [kernel registry] (ember.h): the kernel tables found by
 * name. The linker gathers every table's EM_REGISTER_* entry into one
 * section and brackets it with __start_/__stop_ symbols (which
 * csrc/python/exports.map keeps out of ember._C's exports); a lookup walks it.
 * Only a backend running GPU launches on host memory asks (once per launch,
 * ~300 names), so a linear search is enough. */
#include "../ember.h"

extern const EmKernels *const __start_em_kernels[], *const __stop_em_kernels[];
extern const EmReduceKernels *const __start_em_reduce_kernels[], *const __stop_em_reduce_kernels[];

const EmKernels *em_kernels_find(const char *name) {
    for (const EmKernels *const *k = __start_em_kernels; k < __stop_em_kernels; k++)
        if (!strcmp((*k)->name, name)) return *k;
    return NULL;
}

/* a table's name is that of its kernels (RED_ENTRY), the same for every dtype */
static const char *reduce_name(const EmReduceKernels *t) {
    for (int d = 0; d < EM_NUM_DTYPES; d++)
        if (t->k[d].name) return t->k[d].name;
    return "";
}

const EmReduceKernels *em_reduce_find(const char *name) {
    for (const EmReduceKernels *const *t = __start_em_reduce_kernels; t < __stop_em_reduce_kernels; t++)
        if (!strcmp(reduce_name(*t), name)) return *t;
    return NULL;
}
