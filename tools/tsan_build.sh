#!/bin/sh
# Build ember._C with ThreadSanitizer in a copy of the tree (the in-place
# build is untouched) and run tests against it: the data-race check of the
# distributed backends (each process group's progress thread against the
# Python side).
#
#   sh tools/tsan_build.sh [DIR] [pytest args...]     (DIR defaults to /tmp/ember-tsan)
#
# e.g. sh tools/tsan_build.sh /tmp/ember-tsan tests/test_distributed.py tests/test_distributed_mpi.py
# CPython and libmpi are not instrumented: TSan sees _C's own memory accesses
# and every pthread, socket and memcpy call (its interceptors), so a race
# between two threads inside _C is reported, with both stacks, in
# DIR/tsan.<pid>. Workers inherit the preload (the tests pass their
# environment on); OMP_NUM_THREADS=1, since libgomp's uninstrumented barriers
# would look like races. UCX's memory hooks (MPICH's wheel) crash under
# TSan's allocator: they are turned off.
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/tmp/ember-tsan}
[ $# -gt 0 ] && shift
PY=${PYTHON:-python}
mkdir -p "$DIR"
(cd "$SRC" && git ls-files -z -c -o --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\n" "$f"; done' sh \
    | tar cf - -T -) | (cd "$DIR" && tar xf -)
rm -f "$DIR"/python/ember/_C*.so
cd "$DIR"
EMBER_CUDA=0 CFLAGS="-fsanitize=thread -g -fno-omit-frame-pointer" LDFLAGS="-fsanitize=thread" \
    $PY setup.py build_ext --inplace -j2
[ $# -eq 0 ] && exit 0
rm -f "$DIR"/tsan.*
set +e
LD_PRELOAD=$(gcc -print-file-name=libtsan.so) \
TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 log_path=$DIR/tsan" \
UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no OMP_NUM_THREADS=1 \
PYTHONPATH="$DIR/python" $PY -m pytest -q -p no:cacheprovider "$@"
rc=$?
for f in "$DIR"/tsan.*; do
    [ -e "$f" ] || continue
    echo "==== $f"
    cat "$f"
    rc=1
done
exit $rc
