/* rng.c — random number generation: a Mersenne Twister (MT19937) seeded the
 * way torch seeds its CPU generator, and the transformations torch applies
 * (24/53-bit uniforms, Box-Muller with a cached second normal), so a script
 * seeded with manual_seed draws the same numbers it draws under PyTorch.
 * `ember.Generator` wraps one state; a default generator serves calls
 * without generator=. Generator(device='cuda') holds instead the (seed,
 * offset) of a Philox stream, as torch's CUDA generator does (Note [GPU
 * random numbers], ops/random.c): its fills run on that device. */
#include "../ember.h"
#include <math.h>
#include <time.h>

#define MT_N 624
#define MT_M 397
#define EM_DEFAULT_SEED 67280421310721ULL /* torch's default CPU seed */

typedef struct {
    uint64_t seed;
    uint32_t mt[MT_N];
    int32_t index;
    int32_t has_next_normal;
    double next_normal;
} RngState;

struct EmGenerator {
    PyObject_HEAD
    RngState s;       /* a CPU generator's MT19937 state */
    EmDevice device;  /* cpu, or the GPU whose fills draw from the Philox stream: */
    uint64_t philox_seed, philox_offset;
};

EmDevice em_generator_device(const EmGenerator *g) { return g->device; }

void em_generator_philox_next(EmGenerator *g, uint64_t *seed, uint64_t *offset) {
    *seed = g->philox_seed;
    *offset = g->philox_offset++;
}

static bool on_gpu(const EmGenerator *g) { return g->device.type != EM_CPU; }

static void mt_seed(RngState *s, uint64_t seed) {
    s->seed = seed;
    s->mt[0] = (uint32_t)(seed & 0xffffffffu);
    for (int i = 1; i < MT_N; i++)
        s->mt[i] = 1812433253u * (s->mt[i - 1] ^ (s->mt[i - 1] >> 30)) + (uint32_t)i;
    s->index = MT_N;
    s->has_next_normal = 0;
    s->next_normal = 0;
}

static void mt_twist(RngState *s) {
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s->mt[i] & 0x80000000u) | (s->mt[(i + 1) % MT_N] & 0x7fffffffu);
        uint32_t v = s->mt[(i + MT_M) % MT_N] ^ (y >> 1);
        if (y & 1) v ^= 0x9908b0dfu;
        s->mt[i] = v;
    }
    s->index = 0;
}

uint32_t em_rng_u32(EmGenerator *g) {
    RngState *s = &g->s;
    if (s->index >= MT_N) mt_twist(s);
    uint32_t y = s->mt[s->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

void em_rng_fill_u32(EmGenerator *g, uint32_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = em_rng_u32(g);
}

uint64_t em_rng_u64(EmGenerator *g) {
    uint32_t hi = em_rng_u32(g), lo = em_rng_u32(g);
    return ((uint64_t)hi << 32) | lo;
}

/* uniform in [0, 1) from the low 24 (float) or 53 (double) bits */
float em_rng_uniform_f(EmGenerator *g) {
    return (float)((em_rng_u32(g) & ((1u << 24) - 1)) * (1.0 / (1u << 24)));
}
double em_rng_uniform_d(EmGenerator *g) {
    return (double)(em_rng_u64(g) & ((1ULL << 53) - 1)) * (1.0 / (double)(1ULL << 53));
}

/* Box-Muller producing two normals; the sine one is cached for the next call. */
double em_rng_normal_d(EmGenerator *g) {
    if (g->s.has_next_normal) {
        g->s.has_next_normal = 0;
        return g->s.next_normal;
    }
    double u1 = em_rng_uniform_d(g), u2 = em_rng_uniform_d(g);
    double r = sqrt(-2.0 * log1p(-u2));
    double theta = 2.0 * M_PI * u1;
    g->s.next_normal = r * sin(theta);
    g->s.has_next_normal = 1;
    return r * cos(theta);
}

void em_rng_seed(EmGenerator *g, uint64_t seed) { mt_seed(&g->s, seed); }

/* ------------------------------------------------------ Python type */

static EmGenerator *default_generator;

EmGenerator *em_default_generator(void) { return default_generator; }

EmGenerator *em_generator_arg(PyObject *o) {
    if (!o || o == Py_None) return default_generator;
    return (EmGenerator *)o;
}

static PyObject *gen_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"device", NULL};
    PyObject *dev = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Generator", kwlist, &dev)) return NULL;
    EmDevice d = em_cpu();
    if (dev && dev != Py_None) {
        if (em_device_from_py(dev, &d) < 0) return NULL;
        if (d.type != EM_CPU && em_cuda_resolve(&d) < 0) return NULL; /* cuda -> cuda:<current> */
    }
    EmGenerator *g = (EmGenerator *)type->tp_alloc(type, 0);
    if (!g) return NULL;
    mt_seed(&g->s, EM_DEFAULT_SEED);
    g->device = d;
    g->philox_seed = EM_DEFAULT_SEED; /* torch's default CUDA seed is the CPU one */
    g->philox_offset = 0;
    return (PyObject *)g;
}

/* torch accepts seeds in [-2**63, 2**64) and keeps them as uint64 */
static int seed_from_py(PyObject *arg, uint64_t *out) {
    PyObject *i = PyNumber_Index(arg);
    if (!i) return -1;
    int overflow;
    long long sv = PyLong_AsLongLongAndOverflow(i, &overflow);
    int r = 0;
    if (overflow == 0) {
        *out = (uint64_t)sv;
    } else if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(i);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) r = -1;
        *out = u;
    } else {
        r = -1;
    }
    Py_DECREF(i);
    if (r < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_RuntimeError,
                        "Overflow when unpacking long: seed must be within the range "
                        "[-0x8000_0000_0000_0000, 0xffff_ffff_ffff_ffff]");
    }
    return r;
}

static PyObject *gen_manual_seed(EmGenerator *g, PyObject *arg) {
    uint64_t seed;
    if (seed_from_py(arg, &seed) < 0) return NULL;
    mt_seed(&g->s, seed);
    g->philox_seed = seed, g->philox_offset = 0;
    return Py_NewRef(g);
}

static PyObject *gen_seed(EmGenerator *g, PyObject *unused) {
    /* a non-deterministic seed, like torch's Generator.seed() */
    uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20) ^ (uint64_t)(uintptr_t)g;
    s ^= s >> 33;
    s *= 0xff51afd7ed558ccdULL;
    s ^= s >> 33;
    mt_seed(&g->s, s);
    g->philox_seed = s, g->philox_offset = 0;
    return PyLong_FromUnsignedLongLong(s);
}

static PyObject *gen_initial_seed(EmGenerator *g, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(on_gpu(g) ? g->philox_seed : g->s.seed);
}

/* the state's bytes: MT19937's for a CPU generator, (seed, offset) for a
 * CUDA one (torch's 16-byte CUDA state) */
static size_t state_size(const EmGenerator *g) { return on_gpu(g) ? 2 * sizeof(uint64_t) : sizeof(RngState); }

static PyObject *gen_get_state(EmGenerator *g, PyObject *unused) {
    int64_t n = (int64_t)state_size(g);
    EmTensor *t = em_empty(1, &n, EM_UINT8, em_cpu());
    if (!t) return NULL;
    if (on_gpu(g)) {
        memcpy(em_data(t), &g->philox_seed, sizeof(uint64_t));
        memcpy(em_data(t) + sizeof(uint64_t), &g->philox_offset, sizeof(uint64_t));
    } else {
        memcpy(em_data(t), &g->s, sizeof(RngState));
    }
    return (PyObject *)t;
}

static PyObject *gen_set_state(EmGenerator *g, PyObject *arg) {
    if (!em_is_tensor(arg)) {
        PyErr_Format(PyExc_TypeError, "expected an ember.ByteTensor, but got %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    EmTensor *t = (EmTensor *)arg;
    if (t->dtype != EM_UINT8) {
        PyErr_Format(PyExc_TypeError, "expected an ember.ByteTensor as the RNG state, but got dtype %s",
                     em_dtype_info[t->dtype].name);
        return NULL;
    }
    if (t->numel != (int64_t)state_size(g)) {
        PyErr_Format(PyExc_RuntimeError, "RNG state is wrong size: expected %zu bytes, got %lld",
                     state_size(g), (long long)t->numel);
        return NULL;
    }
    EmTensor *c = em_contiguous(t);
    if (!c) return NULL;
    if (on_gpu(g)) {
        memcpy(&g->philox_seed, em_data(c), sizeof(uint64_t));
        memcpy(&g->philox_offset, em_data(c) + sizeof(uint64_t), sizeof(uint64_t));
        Py_DECREF(c);
        return Py_NewRef(g);
    }
    RngState s;
    memcpy(&s, em_data(c), sizeof s);
    Py_DECREF(c);
    if (s.index < 0 || s.index > MT_N) {
        PyErr_SetString(PyExc_RuntimeError, "Invalid mt19937 state: index out of range");
        return NULL;
    }
    g->s = s;
    return Py_NewRef(g);
}

static PyObject *gen_device(EmGenerator *g, void *c) { return em_device_object(g->device); }

static PyObject *gen_reduce(EmGenerator *g, PyObject *unused) {
    PyObject *state = gen_get_state(g, NULL);
    PyObject *dev = state ? em_device_object(g->device) : NULL;
    if (!dev) {
        Py_XDECREF(state);
        return NULL;
    }
    return Py_BuildValue("(O(N)N)", (PyObject *)Py_TYPE(g), dev, state);
}
static PyObject *gen_setstate(EmGenerator *g, PyObject *state) {
    PyObject *r = gen_set_state(g, state);
    if (!r) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyMethodDef gen_methods[] = {
    {"manual_seed", (PyCFunction)gen_manual_seed, METH_O, "Seed the generator; returns it."},
    {"seed", (PyCFunction)gen_seed, METH_NOARGS, "Seed from a non-deterministic source; returns the seed."},
    {"initial_seed", (PyCFunction)gen_initial_seed, METH_NOARGS, "The seed last set."},
    {"get_state", (PyCFunction)gen_get_state, METH_NOARGS, "The state as a uint8 tensor."},
    {"set_state", (PyCFunction)gen_set_state, METH_O, "Restore a state from get_state()."},
    {"__reduce__", (PyCFunction)gen_reduce, METH_NOARGS, NULL},
    {"__setstate__", (PyCFunction)gen_setstate, METH_O, NULL},
    {NULL},
};
static PyGetSetDef gen_getset[] = {
    {"device", (getter)gen_device, NULL, NULL, NULL},
    {NULL},
};

PyTypeObject EmGeneratorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember.Generator",
    .tp_basicsize = sizeof(EmGenerator),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = gen_new,
    .tp_methods = gen_methods,
    .tp_getset = gen_getset,
    .tp_doc = "Generator(device='cpu'): the state of a pseudo-random number stream.",
};

int em_init_generator(PyObject *m) {
    if (PyType_Ready(&EmGeneratorType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Generator", (PyObject *)&EmGeneratorType) < 0) return -1;
    default_generator = PyObject_New(EmGenerator, &EmGeneratorType);
    if (!default_generator) return -1;
    mt_seed(&default_generator->s, EM_DEFAULT_SEED);
    default_generator->device = em_cpu(); /* PyObject_New leaves the fields unset */
    default_generator->philox_seed = EM_DEFAULT_SEED;
    default_generator->philox_offset = 0;
    return PyModule_AddObject(m, "default_generator", (PyObject *)default_generator);
}
