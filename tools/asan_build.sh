#!/bin/sh
# Build ember._C with AddressSanitizer + UndefinedBehaviorSanitizer in a copy
# of the tree (the in-place build is untouched) and run tests against it.
#
#   sh tools/asan_build.sh [DIR] [pytest args...]     (DIR defaults to /tmp/ember-asan)
#
# e.g. sh tools/asan_build.sh /tmp/ember-asan tests/test_reliability.py tests/test_autograd_engine.py
# A report names the file and line; UBSan stops at the first finding
# (halt_on_error). Leak checking is off: CPython's own allocations would drown it.
# Run with -n 1 (pytest-xdist) so a report that aborts a worker ends one test,
# not the run; but a file whose tests fork (tests/test_data.py's DataLoader
# workers) runs without -n: gcc 12's libasan does not lock its allocator
# across fork, and a fork while a worker's I/O thread holds that lock leaves
# the child waiting on it forever.
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-/tmp/ember-asan}
[ $# -gt 0 ] && shift
PY=${PYTHON:-python}
mkdir -p "$DIR"
# the project's files, tracked or new, no build outputs (tests read packaging/,
# benchmarks/, examples/ too); outside git, the sources, package and tests
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$SRC" && git ls-files -z -c -o --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\n" "$f"; done' sh \
        | tar cf - -T -) | (cd "$DIR" && tar xf -)
else
    (cd "$SRC" && tar cf - setup.py pyproject.toml csrc python tests tools) | (cd "$DIR" && tar xf -)
fi
rm -f "$DIR"/python/ember/_C*.so
cd "$DIR"
SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
EMBER_CUDA=0 CFLAGS="$SAN -O1 -g" LDFLAGS="$SAN" $PY setup.py build_ext --inplace -j2
ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
[ $# -eq 0 ] && exit 0
# compilers the tests start (nvcc, the host builds of the CUDA kernels) run
# without the preloaded runtimes: nvcc's front end crashes under them
BIN="$DIR/.sanitizer-free-bin"
mkdir -p "$BIN"
for tool in nvcc gcc g++ cc c++; do
    real=$(command -v $tool || true)
    [ -n "$real" ] || continue
    printf '#!/bin/sh\nunset LD_PRELOAD\nexec %s "$@"\n' "$real" > "$BIN/$tool"
    chmod +x "$BIN/$tool"
done
# ASan reports go to files (DIR/sanitizer.<pid>): a pytest-xdist worker that
# one aborts takes its stderr with it. UBSan ignores log_path, so capture is
# sys-level only: a worker's C-level stderr, UBSan's reports with it, reaches
# the output (kept in DIR/pytest.out).
rm -f "$DIR"/sanitizer.* "$DIR"/pytest.out
LOG="$DIR/sanitizer"
set +e
{
    LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" \
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_segv=1:log_path=$LOG \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    PATH="$BIN:$PATH" PYTHONPATH="$DIR/python" EMBER_FUZZ_SECONDS=0 \
    $PY -m pytest -q -p no:randomly -p no:cacheprovider --capture=sys "$@"
    echo $? > "$DIR/pytest.rc"
} 2>&1 | tee "$DIR/pytest.out"
rc=$(cat "$DIR/pytest.rc")
# a report fails the run; a warning alone (a huge allocation refused, which
# allocator_may_return_null turns into MemoryError) does not
for f in "$DIR"/sanitizer.*; do
    [ -e "$f" ] || continue
    echo "==== sanitizer output $f"
    cat "$f"
    if grep -q -e "ERROR: AddressSanitizer" -e "^SUMMARY:" "$f"; then rc=1; fi
done
if grep -q "runtime error:" "$DIR/pytest.out"; then
    echo "==== UBSan reports:"
    grep -A12 "runtime error:" "$DIR/pytest.out"
    rc=1
fi
exit $rc
