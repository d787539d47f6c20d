#!/bin/sh
# Build ember._C with AddressSanitizer + UndefinedBehaviorSanitizer in a copy
# of the tree (the in-place build is untouched) and run tests against it.
#
#   sh tools/asan_build.sh [DIR] [pytest args...]     (DIR defaults to /tmp/ember-asan)
#
# e.g. sh tools/asan_build.sh /tmp/ember-asan tests/test_reliability.py tests/test_autograd_engine.py
# A report names the file and line; UBSan stops at the first finding
# (halt_on_error). Leak checking is off: CPython's own allocations would drown it.
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/tmp/ember-asan}
[ $# -gt 0 ] && shift
PY=${PYTHON:-python}
mkdir -p "$DIR"
# the sources, the Python package and the tests (no build outputs)
(cd "$SRC" && tar cf - setup.py pyproject.toml csrc python tests tools) | (cd "$DIR" && tar xf -)
rm -f "$DIR"/python/ember/_C*.so
cd "$DIR"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
EMBER_CUDA=0 CFLAGS="$SAN -O1 -g" LDFLAGS="$SAN" $PY setup.py build_ext --inplace -j2
ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
[ $# -eq 0 ] && exit 0
# reports go to files (DIR/sanitizer.<pid>), not stderr: a pytest-xdist worker
# that a report aborts takes its stderr with it, and the run goes on with a new one
rm -f "$DIR"/sanitizer.*
LOG="$DIR/sanitizer"
set +e
LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" \
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_segv=1:log_path=$LOG \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$LOG \
PYTHONPATH="$DIR/python" EMBER_FUZZ_SECONDS=0 $PY -m pytest -q -p no:randomly -p no:cacheprovider "$@"
rc=$?
for f in "$DIR"/sanitizer.*; do
    [ -e "$f" ] || continue
    echo "==== sanitizer report $f"
    cat "$f"
    rc=1
done
exit $rc
