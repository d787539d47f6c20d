/* device_slot.h — the front-end pair of an op whose CPU and CUDA paths share
 * one body (torch's checks, the result's shape): Note [device slot]. The
 * dispatcher picks em_impl_<impl> or em_impl_<impl>_cuda from the row; the
 * body takes `gpu` from the slot that called it, never from a tensor. */
#ifndef EMBER_OPS_DEVICE_SLOT_H
#define EMBER_OPS_DEVICE_SLOT_H

#include "../ember.h"

#define EM_DEVICE_SLOTS(impl, body)                                      \
    PyObject *em_impl_##impl(EmCall *c) { return body(c, false); }       \
    PyObject *em_impl_##impl##_cuda(EmCall *c) { return body(c, true); }

#endif
