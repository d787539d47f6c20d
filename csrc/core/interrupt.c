/* interrupt.c — Ctrl-C inside long ops (Note [interrupts] in ember.h).
 *
 * CPython's SIGINT handler only marks the signal; Python raises
 * KeyboardInterrupt at its next bytecode, which for a long kernel is after
 * the kernel ends. ember chains a handler of its own in front of CPython's:
 * it counts the signal, then calls CPython's, so Python's bookkeeping is as
 * before. A long loop armed with em_stop_arm polls the count at its block
 * boundaries and stops; its driver then raises KeyboardInterrupt through
 * Python's own handler (PyErr_CheckSignals), so the signal is seen once. */
#include "../ember.h"

#include <signal.h>
#include <string.h>

volatile sig_atomic_t em_sigint_count;

static struct sigaction chained; /* the handler ember stands in front of (CPython's) */
static unsigned long main_thread;
static PyObject *getsignal, *default_handler; /* signal.getsignal, signal.default_int_handler */

static void on_sigint(int sig, siginfo_t *info, void *uc) {
    em_sigint_count++;
    if (chained.sa_flags & SA_SIGINFO)
        chained.sa_sigaction(sig, info, uc);
    else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
        chained.sa_handler(sig);
}

static bool hooked(const struct sigaction *cur) {
    return (cur->sa_flags & SA_SIGINFO) && cur->sa_sigaction == on_sigint;
}

/* Whether Python's SIGINT handler is the one that raises KeyboardInterrupt:
 * a handler of the user's own may choose to carry on, which a stopped op
 * could not honour, so then ops run to their end as in torch. */
static bool python_default(void) {
    if (!getsignal) {
        PyObject *mod = PyImport_ImportModule("signal");
        if (!mod) goto fail;
        getsignal = PyObject_GetAttrString(mod, "getsignal");
        default_handler = PyObject_GetAttrString(mod, "default_int_handler");
        Py_DECREF(mod);
        if (!getsignal || !default_handler) goto fail;
    }
    PyObject *h = PyObject_CallFunction(getsignal, "i", SIGINT);
    if (!h) goto fail;
    bool same = h == default_handler;
    Py_DECREF(h);
    return same;
fail:
    PyErr_Clear(); /* no interrupts then; never an error of its own */
    return false;
}

EmStop em_stop_arm(void) {
    EmStop s = {false, em_sigint_count};
    if (!main_thread || PyThread_get_thread_ident() != main_thread) return s; /* Python handles signals there only */
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0) return s;
    /* Python replaces the process handler whenever signal.signal(SIGINT, ...)
     * runs, so finding ember's hook means Python's handler is still the
     * default one it was installed in front of. */
    if (!hooked(&cur)) {
        if (!(cur.sa_flags & SA_SIGINFO) && (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN)) return s;
        if (!python_default()) return s;
        chained = cur;
        struct sigaction mine = cur;
        mine.sa_flags |= SA_SIGINFO;
        mine.sa_sigaction = on_sigint;
        if (sigaction(SIGINT, &mine, NULL) != 0) return s;
    }
    s.on = true;
    return s;
}

int em_stop_check(const EmStop *s) {
    if (!em_stop_now(s)) return 0;
    if (PyErr_CheckSignals() < 0) return -1;
    PyErr_SetNone(PyExc_KeyboardInterrupt); /* Python saw it already (it cannot, on this thread, but be sure) */
    return -1;
}

int em_init_interrupts(void) {
    main_thread = PyThread_get_thread_ident(); /* ember is imported on the main thread in practice */
    return 0;
}
_Thread_local const EmStop *em_stop_current;
