/* error.c — raising errors whose messages need printf formats that
 * PyErr_Format lacks (%g for the float values torch's messages show). */
#include "../ember.h"
#include <stdarg.h>
#include <stdio.h>

void em_error(PyObject *exc, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    PyErr_SetString(exc, buf);
}
