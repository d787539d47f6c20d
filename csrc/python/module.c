/* module.c — PyInit__C: readies every type, registers the op table's
 * functions and methods and the factories, and adds the module-level
 * helpers that are not ops (dtype promotion queries, default dtype,
 * threads). */
#include "../ember.h"
#include "../cpu/blas.h"
#include "../cpu/lowp_gemm.h"
#include "../host_api.h"
#ifdef _OPENMP
#include <omp.h>
#endif

PyObject *em_op_names(PyObject *self, PyObject *unused);
PyObject *em_op_info(PyObject *self, PyObject *name);
PyObject *em_set_helpers(PyObject *mod, PyObject *d);
PyObject *em_add_attrs(PyObject *mod, PyObject *args);
PyObject *em_from_bytes(PyObject *m, PyObject *args);
int em_init_factories(PyObject *m);
int em_init_random(PyObject *m);
int em_init_lapack(PyObject *m); /* ops/lapack.c */
int em_init_return_types(PyObject *m);
int em_init_distributed(PyObject *m); /* distributed/collectives.c */
int em_init_mpi(PyObject *m);         /* distributed/mpi.c */

static PyObject *get_default_dtype(PyObject *m, PyObject *u) {
    return Py_NewRef(em_dtype_object(em_default_float));
}

static PyObject *set_default_dtype(PyObject *m, PyObject *arg) {
    EmDType d;
    if (em_dtype_from_py(arg, &d) < 0) return NULL;
    if (!em_is_float(d)) {
        PyErr_SetString(PyExc_TypeError, "only floating-point types are supported as the default type");
        return NULL;
    }
    em_default_float = d;
    Py_RETURN_NONE;
}

static PyObject *promote_types(PyObject *m, PyObject *args) {
    PyObject *a, *b;
    EmDType x, y;
    if (!PyArg_ParseTuple(args, "OO:promote_types", &a, &b) || em_dtype_from_py(a, &x) < 0 ||
        em_dtype_from_py(b, &y) < 0)
        return NULL;
    EmDType r = em_promote_types(x, y);
    return r == EM_DTYPE_ERROR ? NULL : Py_NewRef(em_dtype_object(r));
}

static PyObject *can_cast(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"from_", "to", NULL};
    PyObject *a, *b;
    EmDType x, y;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:can_cast", kwlist, &a, &b) ||
        em_dtype_from_py(a, &x) < 0 || em_dtype_from_py(b, &y) < 0)
        return NULL;
    return PyBool_FromLong(em_can_cast(x, y));
}

static PyObject *result_type(PyObject *m, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"tensor1", "tensor2", NULL};
    PyObject *a, *b;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:result_type", kwlist, &a, &b)) return NULL;
    EmOperand ops[2];
    PyObject *in[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        int r = em_to_operand(in[i], &ops[i]);
        if (r < 0) return NULL;
        if (r > 0) {
            PyErr_Format(PyExc_TypeError, "result_type(): argument %d must be a Tensor or Number, not %.100s",
                         i + 1, Py_TYPE(in[i])->tp_name);
            return NULL;
        }
    }
    EmDType r = em_result_type(2, ops);
    return r == EM_DTYPE_ERROR ? NULL : Py_NewRef(em_dtype_object(r));
}

static PyObject *set_num_threads(PyObject *m, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_RuntimeError, "set_num_threads expects a positive integer");
        return NULL;
    }
    em_num_threads = (int)n;
#ifdef _OPENMP
    omp_set_num_threads((int)n);
#endif
    Py_RETURN_NONE;
}

static PyObject *get_num_threads(PyObject *m, PyObject *u) { return PyLong_FromLong(em_num_threads); }

static PyObject *build_info(PyObject *m, PyObject *u) {
#ifdef _OPENMP
    int omp = 1;
#else
    int omp = 0;
#endif
    /* the widest vector ISA ember's kernels pick at run time on this CPU */
    const char *isa = __builtin_cpu_supports("avx512f") ? "AVX512"
                      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "AVX2" : "DEFAULT";
    return Py_BuildValue("{s:s,s:O,s:s}", "blas", em_blas_name, "openmp", omp ? Py_True : Py_False,
                         "cpu_capability", isa);
}

/* Note [low-precision GEMM]: which path bfloat16 / float16 products take, and why */
static PyObject *lowp_gemm_info(PyObject *m, PyObject *u) {
    if (em_lowp_gemm_load_now() < 0) return NULL;
    EmLowpStatus s;
    em_lowp_gemm_status(&s);
    static const char *modes[] = {"auto", "library", "convert"};
    PyObject *dt = Py_BuildValue("{s:{s:O,s:O,s:s},s:{s:O,s:O,s:s}}", "bfloat16", "supported",
                                 s.dtype_ok[0] ? Py_True : Py_False, "fast", s.fast[0] ? Py_True : Py_False, "impl",
                                 s.impl[0], "float16", "supported", s.dtype_ok[1] ? Py_True : Py_False, "fast",
                                 s.fast[1] ? Py_True : Py_False, "impl", s.impl[1]);
    if (!dt) return NULL;
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:s,s:s,s:N,s:L}", "mode", modes[s.mode < 0 ? 0 : s.mode], "library",
                         "oneDNN", "loaded", s.loaded == 1 ? Py_True : Py_False, "path", s.path, "version", s.version,
                         "error", s.error, "dtypes", dt, "calls", s.calls);
}

static PyObject *set_lowp_gemm(PyObject *m, PyObject *arg) {
    const char *mode = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!mode) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_set_lowp_gemm expects 'auto', 'library' or 'convert'");
        return NULL;
    }
    if (em_lowp_gemm_set_mode(mode) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *lowp_gemm_refuse(PyObject *m, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    em_lowp_gemm_refuse_for_tests(on);
    Py_RETURN_NONE;
}

static PyObject *cpu_cache_info(PyObject *m, PyObject *u) {
    int64_t s[3];
    em_cpu_cache_stats(s);
    return Py_BuildValue("{s:L,s:L,s:L}", "cached_bytes", (long long)s[0], "hits", (long long)s[1],
                         "misses", (long long)s[2]);
}

static PyObject *cpu_cache_clear(PyObject *m, PyObject *u) {
    em_cpu_cache_clear();
    Py_RETURN_NONE;
}

static int expect_tensor(PyObject *t, const char *fn) {
    if (em_is_tensor(t)) return 0;
    PyErr_Format(PyExc_TypeError, "%s expects a Tensor, not %.100s", fn, Py_TYPE(t)->tp_name);
    return -1;
}

/* torch's Tensor.suggest_memory_format (Python-composed ops keep a channels-last layout by it) */
static PyObject *suggest_memory_format(PyObject *m, PyObject *t) {
    if (expect_tensor(t, "_suggest_memory_format") < 0) return NULL;
    return Py_NewRef(em_memory_format_object(em_suggest_memory_format((EmTensor *)t)));
}

/* whether t's elements fill its memory without gaps or overlaps, in some dim order */
static PyObject *is_non_overlapping_and_dense(PyObject *m, PyObject *t) {
    if (expect_tensor(t, "_is_non_overlapping_and_dense") < 0) return NULL;
    return PyBool_FromLong(em_is_non_overlapping_and_dense((EmTensor *)t));
}

static PyMethodDef module_methods[] = {
    {"_suggest_memory_format", suggest_memory_format, METH_O,
     "The memory format a tensor's strides suggest (contiguous_format or channels_last(_3d))."},
    {"_is_non_overlapping_and_dense", is_non_overlapping_and_dense, METH_O,
     "Whether a tensor's elements fill its memory without gaps or overlaps."},
    {"_cpu_cache_info", cpu_cache_info, METH_NOARGS, "The CPU block cache's counters (Note [CPU block cache])."},
    {"_cpu_cache_clear", cpu_cache_clear, METH_NOARGS, "Return the CPU block cache's blocks to the system."},
    {"_op_names", em_op_names, METH_NOARGS, "Names of every op in the op table."},
    {"_op_info", em_op_info, METH_O, "The op table's columns for one op (devices, tags, autocast)."},
    {"_cuda_fallback_counts", em_cuda_fallback_counts, METH_O,
     "{op: calls that took Note [CUDA fallback]} so far; cleared when the argument is true."},
    {"_profiler_start", em_profiler_start, METH_O, "Start recording op and autograd events (Note [profiler])."},
    {"_profiler_stop", em_profiler_stop, METH_NOARGS, "Stop recording; the events since the start."},
    {"_set_helpers", em_set_helpers, METH_O, "Register Python helpers (repr, ...)."},
    {"_from_bytes", em_from_bytes, METH_VARARGS, "A tensor from raw bytes (unpickling)."},
    {"_add_attrs", em_add_attrs, METH_VARARGS, "Add Python-defined attributes to Tensor or Node."},
    {"get_default_dtype", get_default_dtype, METH_NOARGS, "The default floating point dtype."},
    {"set_default_dtype", set_default_dtype, METH_O, "Set the default floating point dtype."},
    {"promote_types", promote_types, METH_VARARGS, "The smallest dtype both dtypes cast to."},
    {"can_cast", (PyCFunction)(void (*)(void))can_cast, METH_VARARGS | METH_KEYWORDS,
     "Whether a cast is allowed under torch's casting rules."},
    {"result_type", (PyCFunction)(void (*)(void))result_type, METH_VARARGS | METH_KEYWORDS,
     "The dtype an elementwise op on the two arguments produces."},
    {"set_num_threads", set_num_threads, METH_O, "Threads used for intra-op parallelism."},
    {"get_num_threads", get_num_threads, METH_NOARGS, "Threads used for intra-op parallelism."},
    {"_build_info", build_info, METH_NOARGS, "What the extension was built with."},
    {"_lowp_gemm_info", lowp_gemm_info, METH_NOARGS,
     "Which path bfloat16/float16 CPU matrix products take (Note [low-precision GEMM])."},
    {"_set_lowp_gemm", set_lowp_gemm, METH_O, "Set the low-precision GEMM path: 'auto', 'library' or 'convert'."},
    {"_lowp_gemm_refuse_for_tests", lowp_gemm_refuse, METH_O,
     "Tests: the library refuses every shape (its fallback by conversion runs instead)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._C", "ember's C core: tensors, the op table, kernels.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
#ifdef _OPENMP
    em_num_threads = omp_get_max_threads();
#endif
    em_blas_init();
    if (em_device_dispatch_init() < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (em_init_interrupts() < 0 || em_init_dtypes(m) < 0 || em_init_devices(m) < 0 || em_init_storage(m) < 0 ||
        em_init_size(m) < 0 || em_init_generator(m) < 0 || em_init_tensor_type(m) < 0 ||
        em_init_factories(m) < 0 || em_init_random(m) < 0 || em_init_return_types(m) < 0 ||
        em_init_lapack(m) < 0 || em_init_autograd(m) < 0 || em_init_cuda(m) < 0 || em_init_autocast(m) < 0 ||
        em_init_memory_formats(m) < 0 || em_init_distributed(m) < 0 || em_init_mpi(m) < 0 || em_init_host_api(m) < 0 || em_init_torch_function(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
