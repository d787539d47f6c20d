/* return_types.c — the named tuples ops return, as torch's
 * torch.return_types.*: `values, indices = x.max(dim=1)` and `.values` both
 * work. One PyStructSequence type per name, made on first use and exposed
 * as ember.return_types.<name>. */
#include "../ember.h"

#define MAX_RETURN_TYPES 32
static struct {
    char name[32];
    PyTypeObject *type;
} types[MAX_RETURN_TYPES];
static int ntypes;
static PyObject *module_dict; /* ember._C.return_types namespace */

static PyTypeObject *return_type(const char *name, const char *f0, const char *f1) {
    for (int i = 0; i < ntypes; i++)
        if (!strcmp(types[i].name, name)) return types[i].type;
    if (ntypes == MAX_RETURN_TYPES) {
        PyErr_SetString(PyExc_SystemError, "ember: too many return types");
        return NULL;
    }
    char qual[64];
    snprintf(qual, sizeof qual, "ember.return_types.%s", name);
    /* PyStructSequence keeps pointers to these strings: give them static storage */
    char *qname = PyMem_Malloc(strlen(qual) + 1);
    PyStructSequence_Field *fields = PyMem_Calloc(3, sizeof(PyStructSequence_Field));
    PyStructSequence_Desc *desc = PyMem_Calloc(1, sizeof(PyStructSequence_Desc));
    if (!qname || !fields || !desc) {
        PyMem_Free(qname);
        PyMem_Free(fields);
        PyMem_Free(desc);
        PyErr_NoMemory();
        return NULL;
    }
    strcpy(qname, qual);
    fields[0].name = f0;
    fields[1].name = f1;
    *desc = (PyStructSequence_Desc){qname, NULL, fields, 2};
    PyTypeObject *t = PyStructSequence_NewType(desc);
    if (!t) return NULL;
    snprintf(types[ntypes].name, sizeof types[ntypes].name, "%s", name);
    types[ntypes++].type = t;
    if (module_dict) PyDict_SetItemString(module_dict, name, (PyObject *)t);
    return t;
}

PyObject *em_return_pair(const char *name, const char *f0, const char *f1, PyObject *a, PyObject *b) {
    if (!a || !b) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTypeObject *t = return_type(name, f0, f1);
    PyObject *r = t ? PyStructSequence_New(t) : NULL;
    if (!r) {
        Py_DECREF(a);
        Py_DECREF(b);
        return NULL;
    }
    PyStructSequence_SetItem(r, 0, a);
    PyStructSequence_SetItem(r, 1, b);
    return r;
}

int em_init_return_types(PyObject *m) {
    PyObject *ns = PyDict_New();
    if (!ns) return -1;
    module_dict = ns;
    return PyModule_AddObject(m, "_return_types", ns);
}
