/* misc.h — the old name of randperm.h, kept only because
 * csrc/core/cuda_fake_more.h (the test double, moving to csrc/testing/)
 * still includes it; delete this file once that include says randperm.h. */
#include "randperm.h"
