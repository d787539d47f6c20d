/* reduce.c — the reduce iterator (DESIGN.md §4), the reductions' counterpart
 * of iter.c. Given an input, the set of reduced dims and the outputs, it
 * splits the dims into kept and reduced groups, orders each innermost-first
 * by the input's strides and merges neighbours, then hands the op's kernels
 * (Note [reduce kernels] in ember.h) blocks of k outputs x n reduced
 * elements with byte strides. Outputs are produced a tile at a time: the
 * accumulators of a tile stay in cache while every reduced element is folded
 * in, then finish writes them through a small buffer that is cast to the
 * outputs' dtypes. Work is split across OpenMP threads over the tiles when
 * there are enough of them, else over the reduced elements (each thread
 * folds its share into its own accumulators; combine then merges them in
 * order, so "first index wins" rules hold).
 *
 * On a GPU input the same plan is described to the backend instead
 * (Note [CUDA reduce] in cuda_backend.h); the fake backend finds the CPU
 * kernel by the launch's name (Note [kernel registry]) and hands both to
 * em_reduce_run_prepared, which runs it on host memory.
 *
 * em_lines_run is the walker for scans and selections along one dim (CPU
 * only: scans on GPU tensors take Note [CUDA fallback]).
 */
#include "../ember.h"
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define TILE 1024 /* outputs per tile */

typedef struct {
    int64_t size;
    int64_t in;     /* byte strides: input, out[0], out[1], aux */
    int64_t o[3];
} Dim;

typedef struct {
    const EmReduceKernel *k;
    EmReduceParams p;
    const char *in;
    char *out[2];
    const char *aux;
    int8_t out_dtype[2]; /* the output tensors' dtypes */
    int nk, nr;
    Dim kept[EM_MAX_DIMS]; /* kept[0]: the dim a tile runs along */
    Dim red[EM_MAX_DIMS];  /* red[0]: the dim a step call runs along */
    int64_t M, R;          /* outputs, reduced elements per output */
    int64_t tile;          /* outputs per tile (at most TILE) */
    int64_t tiles_per_row, items;
    const EmStop *stop; /* Note [interrupts]: NULL when not armed */
} Plan;

/* --------------------------------------------------------------- masks */

/* One dim value: a Python int (not bool) or an integer 0-d tensor. */
static int dim_value(PyObject *o, int64_t *v) {
    if (PyBool_Check(o) || PyFloat_Check(o) ||
        (em_is_tensor(o) && (((EmTensor *)o)->numel != 1 || !em_is_int(((EmTensor *)o)->dtype))) ||
        (!em_is_tensor(o) && !PyIndex_Check(o))) {
        PyErr_Format(PyExc_TypeError, "argument 'dim' must be int or tuple of ints, but found %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    PyObject *i = PyNumber_Index(o);
    if (!i) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (x == -1 && PyErr_Occurred()) return -1;
    *v = overflow ? (overflow > 0 ? INT64_MAX : INT64_MIN) : x; /* out of range: IndexError below */
    return 0;
}

int em_reduce_mask(PyObject *dim, int ndim, uint64_t *mask, bool *all) {
    int64_t vals[EM_MAX_DIMS];
    Py_ssize_t n = 0;
    *mask = 0;
    *all = false;
    if (dim == Py_None) {
        n = 0;
    } else if (PyTuple_Check(dim) || PyList_Check(dim)) {
        n = PySequence_Fast_GET_SIZE(dim);
        if (n > EM_MAX_DIMS) {
            PyErr_Format(PyExc_RuntimeError, "%zd dims given to a reduction; at most %d", n, EM_MAX_DIMS);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (dim_value(PySequence_Fast_ITEMS(dim)[i], &vals[i]) < 0) return -1;
    } else {
        if (dim_value(dim, &vals[0]) < 0) return -1;
        n = 1;
    }
    if (n == 0) { /* None or (): every dim */
        *all = true;
        *mask = ndim >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << ndim) - 1);
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int d;
        if (em_wrap_dim(vals[i], ndim, &d) < 0) return -1;
        uint64_t bit = (uint64_t)1 << d; /* a 0-d tensor: dim 0 or -1, bit 0 marks it */
        if (*mask & bit) {
            PyErr_Format(PyExc_RuntimeError, "dim %d appears multiple times in the list of dims", d);
            return -1;
        }
        *mask |= bit;
    }
    if (ndim == 0) *mask = 0; /* nothing to reduce */
    return 0;
}

int em_reduce_shape(const EmTensor *in, uint64_t mask, bool keepdim, int64_t *shape) {
    int n = 0;
    for (int d = 0; d < in->ndim; d++) {
        bool r = (mask >> d) & 1;
        if (!r)
            shape[n++] = in->sizes[d];
        else if (keepdim)
            shape[n++] = 1;
    }
    return n;
}

int64_t em_reduce_count(const EmTensor *in, uint64_t mask) {
    int64_t c = 1;
    for (int d = 0; d < in->ndim; d++)
        if ((mask >> d) & 1) c *= in->sizes[d];
    return c;
}

/* ---------------------------------------------------------------- plan */

/* Byte stride of output t along input dim d (0 for reduced dims). */
static int64_t out_stride(const EmTensor *t, const EmTensor *in, uint64_t mask, int d) {
    if (!t || ((mask >> d) & 1)) return 0;
    int od = d;
    if (t->ndim != in->ndim) { /* reduced dims removed */
        od = 0;
        for (int e = 0; e < d; e++) od += !((mask >> e) & 1);
    }
    return t->sizes[od] == 1 ? 0 : t->strides[od] * em_itemsize(t->dtype);
}

static void sort_dims(Dim *v, int n) {
    for (int i = 1; i < n; i++) {
        Dim x = v[i];
        int j = i;
        while (j > 0 && v[j - 1].in > x.in) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Merge neighbours that are contiguous for every operand; returns the count. */
static int merge_dims(Dim *v, int n, int nops) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0) {
            Dim *p = &v[m - 1];
            bool ok = v[i].in == p->size * p->in;
            for (int op = 0; op < nops && ok; op++) ok = v[i].o[op] == p->size * p->o[op];
            if (ok) {
                p->size *= v[i].size;
                continue;
            }
        }
        v[m++] = v[i];
    }
    return m;
}

static void set_tiles(Plan *pl, int64_t tile) {
    pl->tile = tile;
    pl->tiles_per_row = (pl->kept[0].size + tile - 1) / tile;
    pl->items = pl->M == 0 ? 0 : pl->M / pl->kept[0].size * pl->tiles_per_row;
}

static void build_plan(Plan *pl, const EmReduceConfig *cfg) {
    pl->stop = NULL;
    const EmTensor *in = cfg->in;
    int isz = em_itemsize(in->dtype);
    pl->k = cfg->kernel;
    pl->p = cfg->params;
    pl->in = em_data(in);
    for (int i = 0; i < 2; i++) {
        pl->out[i] = cfg->out[i] ? em_data(cfg->out[i]) : NULL;
        pl->out_dtype[i] = cfg->out[i] ? (int8_t)cfg->out[i]->dtype : 0;
    }
    pl->aux = cfg->aux ? em_data(cfg->aux) : NULL;
    pl->nk = pl->nr = 0;
    pl->M = pl->R = 1;
    for (int d = 0; d < in->ndim; d++) {
        int64_t size = in->sizes[d];
        bool reduced = (cfg->mask >> d) & 1;
        if (reduced)
            pl->R *= size;
        else
            pl->M *= size;
        if (size == 1) continue;
        Dim x = {size, in->strides[d] * isz, {0, 0, 0}};
        if (reduced) {
            pl->red[pl->nr++] = x;
        } else {
            x.o[0] = out_stride(cfg->out[0], in, cfg->mask, d);
            x.o[1] = out_stride(cfg->out[1], in, cfg->mask, d);
            x.o[2] = out_stride(cfg->aux, in, cfg->mask, d);
            pl->kept[pl->nk++] = x;
        }
    }
    sort_dims(pl->kept, pl->nk);
    sort_dims(pl->red, pl->nr);
    pl->nk = merge_dims(pl->kept, pl->nk, 3);
    pl->nr = merge_dims(pl->red, pl->nr, 0);
    if (pl->nk == 0) pl->kept[pl->nk++] = (Dim){1, 0, {0, 0, 0}};
    if (pl->nr == 0) pl->red[pl->nr++] = (Dim){1, 0, {0, 0, 0}};
    set_tiles(pl, TILE);
}

/* ------------------------------------------------------------- running */

typedef struct {
    const char *in;
    char *out[2];
    const char *aux;
    int64_t k;
} Tile;

static Tile tile_of(const Plan *pl, int64_t item) {
    Tile t;
    int64_t tile = item % pl->tiles_per_row, q = item / pl->tiles_per_row;
    int64_t first = tile * pl->tile;
    const Dim *k0 = &pl->kept[0];
    t.k = k0->size - first < pl->tile ? k0->size - first : pl->tile;
    int64_t off_in = first * k0->in, off[3] = {first * k0->o[0], first * k0->o[1], first * k0->o[2]};
    for (int d = 1; d < pl->nk; d++) {
        int64_t c = q % pl->kept[d].size;
        q /= pl->kept[d].size;
        off_in += c * pl->kept[d].in;
        for (int op = 0; op < 3; op++) off[op] += c * pl->kept[d].o[op];
    }
    t.in = pl->in + off_in;
    for (int i = 0; i < 2; i++) t.out[i] = pl->out[i] ? pl->out[i] + off[i] : NULL;
    t.aux = pl->aux ? pl->aux + off[2] : NULL;
    return t;
}

/* Fold the reduced elements [rb, re) (in iteration order) of a tile. */
static void fold(const Plan *pl, const Tile *t, void *acc, int64_t rb, int64_t re) {
    if (rb >= re) return; /* nothing (an empty reduction: sizes may be 0) */
    int64_t coord[EM_MAX_DIMS];
    const char *ptr = t->in;
    int64_t rem = rb;
    for (int d = 0; d < pl->nr; d++) {
        coord[d] = rem % pl->red[d].size;
        rem /= pl->red[d].size;
        ptr += coord[d] * pl->red[d].in;
    }
    const Dim *r0 = &pl->red[0];
    int64_t so = pl->kept[0].in;
    for (int64_t pos = rb; pos < re;) {
        int64_t n = r0->size - coord[0];
        if (n > re - pos) n = re - pos;
        pl->k->step(acc, t->k, ptr, so, n, r0->in, coord[0], &pl->p);
        pos += n;
        coord[0] += n;
        ptr += n * r0->in;
        for (int d = 0; d + 1 < pl->nr && coord[d] == pl->red[d].size; d++) {
            ptr += pl->red[d + 1].in - coord[d] * pl->red[d].in;
            coord[d] = 0;
            coord[d + 1]++;
        }
    }
}

/* finish a tile's accumulators and store them into the outputs */
static void store(const Plan *pl, const Tile *t, const void *acc) {
    _Alignas(64) char buf[2][TILE * 16]; /* int64, float64 or complex128 results */
    pl->k->finish(buf[0], buf[1], acc, t->k, &pl->p);
    for (int i = 0; i < 2; i++)
        if (t->out[i])
            em_cast_fns[pl->k->out_dtype[i]][pl->out_dtype[i]](buf[i], em_itemsize(pl->k->out_dtype[i]),
                                                                t->out[i], pl->kept[0].o[i], t->k);
}

static void run_items(const Plan *pl, int64_t b, int64_t e) {
    _Alignas(64) char acc[TILE * EM_REDUCE_ACC_MAX];
    for (int64_t item = b; item < e && !em_stop_now(pl->stop); item++) {
        Tile t = tile_of(pl, item);
        pl->k->init(acc, t.k, t.aux, pl->kept[0].o[2]);
        fold(pl, &t, acc, 0, pl->R);
        store(pl, &t, acc);
    }
}

#ifdef _OPENMP
/* Note [reduce split]: one tile's reduced elements are cut into nparts
 * pieces (a few per thread; long ones in whole 256-element blocks) that the
 * team takes in turn (dynamic schedule): on a busy machine a thread that is
 * held up leaves its remaining pieces to the others instead of holding up
 * the result. Each piece folds into its own accumulators; they are combined in
 * piece order afterwards, so the result depends on nparts alone, not on
 * which thread ran which piece. */
static void run_split(const Plan *pl, int64_t item, int nt, int nparts, char *parts) {
    Tile t = tile_of(pl, item);
    size_t stride = (size_t)TILE * EM_REDUCE_ACC_MAX;
    int64_t piece = (pl->R + nparts - 1) / nparts;
    if (piece >= 1024) piece = (piece + 255) & ~(int64_t)255; /* whole vector blocks for the kernels */
    nparts = (int)((pl->R + piece - 1) / piece); /* rounding up the pieces may leave fewer */
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int i = 0; i < nparts; i++) {
        int64_t b = i * piece, e = b + piece < pl->R ? b + piece : pl->R;
        char *acc = parts + i * stride;
        pl->k->init(acc, t.k, t.aux, pl->kept[0].o[2]);
        if (b < e && !em_stop_now(pl->stop)) fold(pl, &t, acc, b, e);
    }
    for (int i = 1; i < nparts; i++) pl->k->combine(parts, parts + i * stride, t.k);
    store(pl, &t, parts);
}
#endif

static int run_plan(Plan *pl) {
#ifdef _OPENMP
    int64_t work = pl->M * (pl->R > 0 ? pl->R : 1);
    int nt = em_num_threads;
    if (nt > 1 && work >= 2 * EM_GRAIN) {
        if ((int64_t)nt > work / EM_GRAIN) nt = (int)(work / EM_GRAIN);
        /* Fewer tiles than threads, but outputs enough for each thread to
         * have 64 of them: smaller tiles, so that the threads split the
         * outputs and each folds all of its outputs' elements (a split of
         * the reduced elements needs partial accumulators and a combine). */
        if (pl->items < nt && pl->kept[0].size >= 64 * (int64_t)nt)
            set_tiles(pl, ((pl->kept[0].size + nt - 1) / nt + 15) / 16 * 16);
        if (pl->items >= nt) {
#pragma omp parallel num_threads(nt)
            {
                int tid = omp_get_thread_num(), T = omp_get_num_threads();
                int64_t chunk = (pl->items + T - 1) / T;
                int64_t b = tid * chunk, e = b + chunk < pl->items ? b + chunk : pl->items;
                if (b < e) run_items(pl, b, e);
            }
            return 0;
        }
        /* Note [reduce split]: four pieces per thread, each of EM_GRAIN or more elements */
        int64_t most = work / (pl->items > 0 ? pl->items : 1) / EM_GRAIN;
        int nparts = most < 4 * (int64_t)nt ? (int)most : 4 * nt;
        if (nparts < nt) nparts = nt;
        /* long reductions in pieces of at most ~4M elements, so that an
         * interrupt is noticed between them (Note [interrupts]) */
        int64_t longest = work / (pl->items > 0 ? pl->items : 1) >> 22;
        if (nparts < longest) nparts = longest < 1024 ? (int)longest : 1024;
        char *parts = malloc((size_t)nparts * TILE * EM_REDUCE_ACC_MAX);
        if (parts) {
            for (int64_t item = 0; item < pl->items; item++) run_split(pl, item, nt, nparts, parts);
            free(parts);
            return 0;
        }
        /* out of memory for the partials: fall through to one thread */
    }
#endif
    run_items(pl, 0, pl->items);
    return 0;
}

/* ------------------------------------------------ Note [CUDA reduce] */

/* Describe the plan to the GPU backend and launch it; EmNoCudaKernel (before
 * anything is written) when the backend has no kernel, so the dispatcher
 * takes the CPU fallback. */
static int run_on_gpu(const EmReduceConfig *cfg) {
    const EmReduceKernel *k = cfg->kernel;
    const EmTensor *in = cfg->in;
    EmDevice dev = em_device(in);
    for (int i = 0; i < 3; i++) {
        const EmTensor *t = i < 2 ? cfg->out[i] : cfg->aux;
        if (t && (em_is_cpu(t) || em_device(t).index != dev.index)) {
            PyErr_SetString(PyExc_RuntimeError,
                            "ember: a GPU reduction's outputs must be on the input's device");
            return -1;
        }
    }
    if (!em_cuda || !em_cuda->has_reduce || !em_cuda->reduce || !k->name ||
        !em_cuda->has_reduce(k->name, in->dtype)) {
        PyErr_Format(EmNoCudaKernel, "reduction \"%s\" has no CUDA kernel for '%s'",
                     k->name ? k->name : "?", em_dtype_name((EmDType)in->dtype));
        return -1;
    }
    Plan *pl = PyMem_Malloc(sizeof(Plan));
    EmCudaReduce *r = PyMem_Malloc(sizeof(EmCudaReduce));
    int rc = 0;
    if (!pl || !r) {
        PyErr_NoMemory();
        rc = -1;
        goto done;
    }
    build_plan(pl, cfg);
    if (pl->M == 0) goto done; /* no outputs: nothing to launch */
    memset(r, 0, sizeof *r);
    r->op = k->name;
    r->in_dtype = in->dtype;
    for (int i = 0; i < 2; i++) {
        r->out_dtype[i] = cfg->out[i] ? cfg->out[i]->dtype : -1;
        r->result_dtype[i] = k->out_dtype[i];
        r->out[i] = pl->out[i];
    }
    r->nkept = pl->nk;
    r->nred = pl->nr;
    r->out_numel = pl->M;
    r->red_numel = pl->R;
    for (int d = 0; d < pl->nk; d++) {
        r->kept_shape[d] = pl->kept[d].size;
        r->kept_strides[d][0] = pl->kept[d].in;
        for (int op = 0; op < 3; op++) r->kept_strides[d][op + 1] = pl->kept[d].o[op];
    }
    for (int d = 0; d < pl->nr; d++) {
        r->red_shape[d] = pl->red[d].size;
        r->red_strides[d] = pl->red[d].in;
    }
    r->in = pl->in;
    r->aux = pl->aux;
    r->p = pl->p.p;
    r->divisor = pl->p.divisor;
    r->root = pl->p.root;
    if (em_cuda->reduce(dev.index, r) < 0) rc = em_cuda_error(k->name);
done:
    PyMem_Free(pl);
    PyMem_Free(r);
    return rc;
}

int em_reduce_run_prepared(const EmReduceKernel *k, const EmCudaReduce *r) {
    if (!k || !k->step || r->nkept < 1 || r->nred < 1) return -1;
    Plan *pl = PyMem_Malloc(sizeof(Plan));
    if (!pl) return -1;
    memset(pl, 0, sizeof *pl);
    pl->k = k;
    pl->p.p = r->p;
    pl->p.divisor = r->divisor;
    pl->p.root = r->root;
    pl->in = r->in;
    for (int i = 0; i < 2; i++) {
        pl->out[i] = r->out[i];
        pl->out_dtype[i] = (int8_t)(r->out[i] ? r->out_dtype[i] : 0);
    }
    pl->aux = r->aux;
    pl->nk = r->nkept;
    pl->nr = r->nred;
    for (int d = 0; d < pl->nk; d++) {
        pl->kept[d].size = r->kept_shape[d];
        pl->kept[d].in = r->kept_strides[d][0];
        for (int op = 0; op < 3; op++) pl->kept[d].o[op] = r->kept_strides[d][op + 1];
    }
    for (int d = 0; d < pl->nr; d++) pl->red[d] = (Dim){r->red_shape[d], r->red_strides[d], {0, 0, 0}};
    pl->M = r->out_numel;
    pl->R = r->red_numel;
    set_tiles(pl, TILE);
    if (pl->items > 0) run_plan(pl);
    PyMem_Free(pl);
    return 0;
}

/* ------------------------------------------------------------- entry */

int em_reduce_run(const EmReduceConfig *cfg) {
    const EmReduceKernel *k = cfg->kernel;
    if (!k->step) {
        PyErr_SetString(PyExc_SystemError, "ember: reduction without a kernel for this dtype");
        return -1;
    }
    if (k->acc_size > EM_REDUCE_ACC_MAX) {
        PyErr_SetString(PyExc_SystemError, "ember: reduction accumulator too large");
        return -1;
    }
    if (em_is_meta(cfg->in)) return 0; /* Note [meta device]: the outputs' shapes are all there is */
    if (!em_is_cpu(cfg->in)) return run_on_gpu(cfg);
    if (em_check_cpu(cfg->in, "reduction") < 0) return -1;
    for (int i = 0; i < 2; i++)
        if (cfg->out[i] && em_check_cpu(cfg->out[i], "reduction") < 0) return -1;
    Plan *pl = PyMem_Malloc(sizeof(Plan));
    if (!pl) {
        PyErr_NoMemory();
        return -1;
    }
    build_plan(pl, cfg);
    EmStop stop = {false, 0};
    pl->stop = NULL;
    if (pl->items > 0) {
        if (pl->M * pl->R >= 65536) {
            if (pl->M * pl->R >= EM_STOP_WORK) {
                stop = em_stop_arm();
                pl->stop = &stop;
            }
            Py_BEGIN_ALLOW_THREADS
            run_plan(pl);
            Py_END_ALLOW_THREADS
        } else {
            run_plan(pl);
        }
    }
    PyMem_Free(pl);
    return em_stop_check(&stop);
}

/* ---------------------------------------------------------------- lines */

int em_lines_run(EmLineFn fn, EmTensor *in, int dim, EmTensor *out0, EmTensor *out1) {
    EmTensor *outs[2] = {out0, out1};
    int nd = in->ndim;
    int64_t n = nd ? in->sizes[dim] : 1;
    int64_t si = nd ? in->strides[dim] * em_itemsize(in->dtype) : 0;
    int64_t so[2] = {0, 0};
    int64_t sizes[EM_MAX_DIMS], st[3][EM_MAX_DIMS];
    int m = 0;
    for (int i = 0; i < 2; i++)
        if (outs[i] && outs[i]->ndim == nd && nd)
            so[i] = outs[i]->strides[dim] * em_itemsize(outs[i]->dtype);
    for (int d = 0; d < nd; d++) {
        if (d == dim || in->sizes[d] == 1) continue;
        sizes[m] = in->sizes[d];
        st[0][m] = in->strides[d] * em_itemsize(in->dtype);
        for (int i = 0; i < 2; i++) {
            EmTensor *o = outs[i];
            int od = o && o->ndim != nd && d > dim ? d - 1 : d;
            st[i + 1][m] = o ? o->strides[od] * em_itemsize(o->dtype) : 0;
        }
        m++;
    }
    int64_t lines = 1;
    for (int d = 0; d < m; d++) lines *= sizes[d];
    if (lines == 0) return 0;
    const char *base_in = em_data(in);
    char *base[2] = {out0 ? em_data(out0) : NULL, out1 ? em_data(out1) : NULL};
    int64_t work = lines * (n > 0 ? n : 1);
    bool nogil = work >= 65536;
    PyThreadState *ts = nogil ? PyEval_SaveThread() : NULL;
#ifdef _OPENMP
    int nt = 1;
    if (em_num_threads > 1 && work >= 2 * EM_GRAIN && lines > 1)
        nt = em_num_threads < lines ? em_num_threads : (int)lines;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t l = 0; l < lines; l++) {
        int64_t q = l, oi = 0, o[2] = {0, 0};
        for (int d = m - 1; d >= 0; d--) { /* last dim fastest: lines in memory order */
            int64_t c = q % sizes[d];
            q /= sizes[d];
            oi += c * st[0][d];
            o[0] += c * st[1][d];
            o[1] += c * st[2][d];
        }
        fn(base[0] ? base[0] + o[0] : NULL, so[0], base[1] ? base[1] + o[1] : NULL, so[1],
           base_in + oi, si, n);
    }
    if (ts) PyEval_RestoreThread(ts);
    return 0;
}
