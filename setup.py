"""Builds ember._C, the C core (C11, OpenMP when available, NumPy C API).

OpenBLAS for matrix multiply comes from the scipy-openblas32 wheel (a build
requirement), else from a system OpenBLAS found with pkg-config, else the
build goes on with ember's own loops and says so. CUDA (ember._cuda) is a
separate extension added by the CUDA work; nvcc being present or not does
not affect this build.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def warn(msg):
    print(f"ember setup: WARNING: {msg}", file=sys.stderr)


def compiler_accepts(flags, code="int main(void){return 0;}\n"):
    """True when the C compiler builds a test program with these flags."""
    cc = os.environ.get("CC", "cc").split()[0]
    if not shutil.which(cc):
        return False
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "t.c")
        with open(src, "w") as f:
            f.write(code)
        r = subprocess.run([cc, *flags, src, "-o", os.path.join(d, "t")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0


def find_blas():
    """(define_macros, include_dirs, library_dirs, libraries, extra_link_args)"""
    if os.environ.get("EMBER_BLAS", "").lower() not in ("0", "none", "off"):
        try:
            import scipy_openblas32 as sob
            lib = sob.get_library()
            return ([("EM_BLAS_SCIPY", "1")], [sob.get_include_dir()], [sob.get_lib_dir()], [lib],
                    # found next to ember/ in site-packages at run time
                    ["-Wl,-rpath,$ORIGIN/../scipy_openblas32/lib"])
        except ImportError:
            pass
        try:
            libs = subprocess.run(["pkg-config", "--libs", "openblas"], capture_output=True,
                                  text=True, check=True).stdout.split()
            cflags = subprocess.run(["pkg-config", "--cflags", "openblas"], capture_output=True,
                                    text=True, check=True).stdout.split()
            return ([("EM_BLAS_SYSTEM", "1")], [f[2:] for f in cflags if f.startswith("-I")],
                    [f[2:] for f in libs if f.startswith("-L")],
                    [f[2:] for f in libs if f.startswith("-l")], [])
        except (OSError, subprocess.CalledProcessError):
            pass
    warn("no OpenBLAS found (scipy-openblas32 or pkg-config openblas); "
         "matrix multiply uses ember's built-in loops, which are much slower")
    return [], [], [], [], []


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        import numpy
        macros, incs, libdirs, libs, links = find_blas()
        omp = ["-fopenmp"] if compiler_accepts(["-fopenmp"], "#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n") else []
        if not omp:
            warn("the C compiler has no OpenMP; ember runs single-threaded")
        for ext in self.extensions:
            ext.define_macros += macros
            ext.include_dirs += [numpy.get_include(), "csrc", *incs]
            ext.library_dirs += libdirs
            ext.libraries += libs + ["m"]
            ext.extra_compile_args += ["-std=c11", "-O3", "-fwrapv", "-fno-math-errno",
                                       "-Wall", "-Wno-unused-function",
                                       "-Wno-missing-field-initializers", *omp]
            ext.extra_link_args += links + omp
        super().build_extensions()

    def build_extension(self, ext):
        # Rebuild only the objects whose source or headers changed (gcc -MMD
        # writes each object's header list next to it): a one-file change in
        # a development checkout then recompiles one file, not all of them.
        compile_all = self.compiler.compile

        def compile_stale(sources, output_dir=None, extra_postargs=None, **kw):
            objects = self.compiler.object_filenames(sources, output_dir=output_dir)
            stale = [s for s, o in zip(sources, objects) if self.force or out_of_date(o)]
            if stale:
                compile_all(stale, output_dir=output_dir,
                            extra_postargs=list(extra_postargs or []) + ["-MMD"], **kw)
            return objects
        self.compiler.compile = compile_stale
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_all


def out_of_date(obj):
    """True when obj is missing or older than a file its .d list names."""
    dep = os.path.splitext(obj)[0] + ".d"
    if not (os.path.exists(obj) and os.path.exists(dep)):
        return True
    with open(dep) as f:
        names = f.read().replace("\\\n", " ").split(":", 1)[-1].split()
    built = os.path.getmtime(obj)
    return any(not os.path.exists(n) or os.path.getmtime(n) > built for n in names)


sources = sorted(glob.glob("csrc/**/*.c", recursive=True))
setup(
    ext_modules=[Extension("ember._C", sources=sources,
                           depends=glob.glob("csrc/**/*.h", recursive=True) +
                           glob.glob("csrc/**/*.def", recursive=True))],
    cmdclass={"build_ext": BuildExt},
)
