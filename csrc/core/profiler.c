/* profiler.c — Note [profiler]: the events behind ember.profiler.
 *
 * While a profile is open, every op call (em_call_run: the op table's one
 * entry, so ops that call other ops nest inside them) and every autograd
 * node the engine runs records one event: its name ("aten::<op>" as torch
 * names ops, "autograd::engine::evaluate_function: <Node>"), start and end
 * on the monotonic clock in nanoseconds (Python's time.perf_counter_ns reads
 * the same clock, so record_function's events, taken in Python, line up),
 * the thread, and optionally the shapes of the tensor arguments. The Python
 * side (python/ember/profiler/) turns them into self/total times and tables.
 *
 * Off, the cost is one predictable branch per op call. Events are appended
 * with the GIL held (op calls and node runs hold it at their edges), so the
 * list needs no lock of its own.
 */
#include "../ember.h"

#include <time.h>

bool em_profiler_on = false;
static bool record_shapes;
static PyObject *events; /* list of (name, t0, t1, thread, shapes or None) */

int64_t em_profiler_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* [[sizes of argument 0], [sizes of argument 1], ...]: [] for non-tensors */
static PyObject *shapes_of(const EmCall *c) {
    int n = c->def->sig.nparams;
    PyObject *all = PyList_New(n);
    if (!all) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *s;
        if (c->args[i] && em_is_tensor(c->args[i])) {
            const EmTensor *t = (const EmTensor *)c->args[i];
            s = PyList_New(t->ndim);
            for (int d = 0; s && d < t->ndim; d++) PyList_SET_ITEM(s, d, PyLong_FromLongLong(t->sizes[d]));
        } else {
            s = PyList_New(0);
        }
        if (!s) {
            Py_DECREF(all);
            return NULL;
        }
        PyList_SET_ITEM(all, i, s);
    }
    return all;
}

/* Appends one event. Keeps an exception that is already set (the op's own
 * error) and drops only its own failures: profiling never changes what a
 * call does. kind: 0 an op, 1 an autograd node (python/ember/profiler adds
 * the names' prefixes, once per distinct name). */
static void record(int kind, const char *name, int64_t t0, int64_t t1, const EmCall *c) {
    if (!events) return;
    PyObject *et, *ev_, *tb;
    PyErr_Fetch(&et, &ev_, &tb);
    PyObject *shapes = c && record_shapes ? shapes_of(c) : Py_NewRef(Py_None);
    PyObject *ev = shapes ? Py_BuildValue("(isLLkN)", kind, name, (long long)t0, (long long)t1,
                                          PyThread_get_thread_ident(), shapes)
                          : NULL;
    if (!ev || PyList_Append(events, ev) < 0) PyErr_Clear();
    Py_XDECREF(ev);
    PyErr_Restore(et, ev_, tb);
}

PyObject *em_profiler_call(EmCall *c, PyObject *(*run)(EmCall *)) {
    int64_t t0 = em_profiler_now();
    PyObject *r = run(c);
    record(0, c->def->name, t0, em_profiler_now(), c);
    return r;
}

void em_profiler_node(const char *name, int64_t t0) {
    record(1, name, t0, em_profiler_now(), NULL);
}

/* _C._profiler_start(record_shapes) */
PyObject *em_profiler_start(PyObject *m, PyObject *arg) {
    (void)m;
    int shapes = PyObject_IsTrue(arg);
    if (shapes < 0) return NULL;
    if (em_profiler_on) {
        PyErr_SetString(PyExc_RuntimeError, "Profiler is already enabled on this thread");
        return NULL;
    }
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    Py_XSETREF(events, list);
    record_shapes = shapes;
    em_profiler_on = true;
    Py_RETURN_NONE;
}

/* _C._profiler_stop() -> the events recorded since the start */
PyObject *em_profiler_stop(PyObject *m, PyObject *unused) {
    (void)m, (void)unused;
    em_profiler_on = false;
    PyObject *r = events ? events : PyList_New(0);
    events = NULL;
    return r;
}
