"""Builds ember._C, the C core (C11, OpenMP when available, NumPy C API).

OpenBLAS for matrix multiply comes from the scipy-openblas32 wheel (a build
requirement), else from a system OpenBLAS found with pkg-config, else the
build goes on with ember's own loops and says so.

ember._cuda, the CUDA backend (csrc/cuda), is a second extension built when
nvcc is found (see "CUDA" below); ember._C never links CUDA, so a machine
without nvcc builds and imports ember exactly as before.

ember._cuda_fake, the CUDA test double the tests run the GPU code paths on
without a GPU (csrc/testing, Note [fake CUDA]), is a third, plain C one,
always built; ember._C holds nothing of it.

Every extension is compiled with -fvisibility=hidden: each exports only its
PyInit_ function, and they reach each other through capsules only.
"""
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from distutils.errors import CCompilerError


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


C_FLAGS = ["-std=c11", "-O3", "-fwrapv", "-fno-math-errno", "-fvisibility=hidden",
           "-Wall", "-Wno-unused-function", "-Wno-missing-field-initializers"]


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
            if ext.name == "ember._C":
                ext.define_macros += macros
                ext.include_dirs += [numpy.get_include(), "csrc", *incs]
                ext.library_dirs += libdirs
                ext.libraries += libs + ["m"]
                ext.extra_compile_args += C_FLAGS + omp
                # PyInit__C is the one exported symbol (also hides the linker's __start_/__stop_ ones)
                ext.extra_link_args += links + omp + [
                    "-Wl,--version-script=" + os.path.abspath("csrc/python/exports.map")]
            elif ext.name == "ember._cuda_fake":  # the CPU kernels it runs are _C's (Note [host API])
                ext.include_dirs += ["csrc"]
                ext.libraries += ["m"]
                ext.extra_compile_args += C_FLAGS
            # ember._cuda: its flags are set in cuda_extension()
        # One pool of compile jobs for all extensions (setuptools builds the
        # extensions in parallel threads, but compiles each one's sources one
        # after another: ember._C's ~90 files would take one core). Each job
        # is one compiler process; .cu files go through it too.
        self.jobs = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(self.parallel or 1)))
        # Rebuild only the objects whose source or headers changed (gcc -MMD
        # writes each object's header list next to it): a one-file change in
        # a development checkout then recompiles one file, not all of them.
        compile_all = self.compiler.compile

        def compile_stale(sources, output_dir=None, extra_postargs=None, **kw):
            objects = self.compiler.object_filenames(sources, output_dir=output_dir)
            stale = [s for s, o in zip(sources, objects) if self.force or out_of_date(o)]
            post = list(extra_postargs or []) + ["-MMD"]
            jobs = [self.jobs.submit(compile_all, [s], output_dir=output_dir, extra_postargs=post, **kw)
                    for s in stale]
            for j in jobs:
                j.result()  # the first failure raises
            return objects
        self.compiler.compile = compile_stale
        try:
            super().build_extensions()
        finally:
            self.compiler.compile = compile_all
            self.jobs.shutdown()

    def build_extension(self, ext):
        if ext.name != "ember._cuda":
            return super().build_extension(ext)
        try:
            ext.extra_objects = compile_cuda_sources(self.build_temp, self.force, self.jobs)
            ext.depends = ext.depends + ext.extra_objects  # a fresh kernel object relinks
            super().build_extension(ext)
        except (subprocess.CalledProcessError, CCompilerError) as e:
            if os.environ.get("EMBER_CUDA", "").strip().lower() in ("1", "on", "yes", "true"):
                raise
            warn(f"ember._cuda failed to build ({e}); ember is built without CUDA "
                 "(EMBER_CUDA=1 makes this an error)")


def out_of_date(obj):
    """True when obj is missing or older than a file its .d list names."""
    dep = os.path.splitext(obj)[0] + ".d"
    if not (os.path.exists(obj) and os.path.exists(dep)):
        return True
    with open(dep) as f:
        names = f.read().replace("\\\n", " ").split(":", 1)[-1].split()
    built = os.path.getmtime(obj)
    return any(not os.path.exists(n) or os.path.getmtime(n) > built for n in names)


# ------------------------------------------------------------------ CUDA
# ember._cuda: .cu files go through nvcc, the host C++ (.cpp) through the
# normal compiler. cudart is linked statically (libcudart_static.a): the
# module then needs no libcudart.so of the toolkit's version at run time,
# only the driver, and imports cleanly (device_count() 0) where there is
# none. cuBLAS / cuBLASLt have no static form here and are linked
# dynamically, found through an rpath to the toolkit found at build time and
# to pip's nvidia-cublas wheel next to ember in site-packages.
# EMBER_CUDA=0 skips the extension, EMBER_CUDA=1 makes a missing nvcc an
# error; EMBER_CUDA_ARCH (default "90") lists the GPUs to build machine code
# for (sm_XX each), EMBER_CUDA_PTX (default "80") the PTX the driver compiles
# on other GPUs (Ampere and later).


def find_cuda():
    """The CUDA toolkit's root, or None (then ember._cuda is not built)."""
    want = os.environ.get("EMBER_CUDA", "").strip().lower()
    if want in ("0", "off", "no", "false"):
        return None
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc_on_path = shutil.which("nvcc")
    if nvcc_on_path:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc_on_path))))
    roots.append("/usr/local/cuda")
    for root in filter(None, roots):
        if os.path.exists(os.path.join(root, "bin", "nvcc")):
            return root
    if want in ("1", "on", "yes", "true"):
        sys.exit("ember setup: EMBER_CUDA=1 but nvcc was not found "
                 "(set CUDA_HOME, or put nvcc on PATH)")
    return None


def _arch_list(text):
    """"80;90", "8.0,9.0a", "sm_90" -> ["80", "90"]"""
    archs = [a.strip().replace(".", "").replace("sm_", "").replace("compute_", "")
             for a in text.replace(",", ";").split(";")]
    return [a for a in archs if a]


def cuda_archs():
    """EMBER_CUDA_ARCH: the GPUs to build machine code (SASS) for; default
    Hopper (sm_90), the GPUs ember is tuned on."""
    return _arch_list(os.environ.get("EMBER_CUDA_ARCH", "90"))


def cuda_arch_flags():
    """SASS for each of cuda_archs(), plus PTX for EMBER_CUDA_PTX (default
    compute_80), which the driver compiles at load time on any GPU from
    Ampere (sm_80) on that has no SASS here. One PTX target instead of a
    second SASS build keeps the kernels' compile time about half."""
    archs = cuda_archs()
    ptx = _arch_list(os.environ.get("EMBER_CUDA_PTX", "80")) or [min(archs, key=int)]
    flags = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    return flags + [f"-gencode=arch=compute_{p},code=compute_{p}" for p in ptx]


def cuda_extension(root):
    lib = os.path.join(root, "lib64")
    return Extension(
        "ember._cuda",
        sources=sorted(glob.glob("csrc/cuda/*.cpp")),
        # the .cu files too: a changed kernel must relink the module
        depends=glob.glob("csrc/cuda/*.h") + glob.glob("csrc/cuda/*.cu") + ["csrc/cuda_backend.h"],
        include_dirs=[os.path.join(root, "include")],
        library_dirs=[lib],
        libraries=["cudart_static", "cublas", "cublasLt", "dl", "rt", "pthread"],
        extra_compile_args=["-std=c++17", "-O3", "-fvisibility=hidden", "-Wall"],
        runtime_library_dirs=[lib],
        extra_link_args=["-Wl,-rpath,$ORIGIN/../nvidia/cublas/lib",
                         "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib",
                         # PyInit__cuda is the one exported symbol (static cudart's too are hidden)
                         "-Wl,--version-script=" + os.path.abspath("csrc/cuda/exports.map")],
        language="c++",
    )


def compile_cuda_sources(build_temp, force, jobs):
    """nvcc-compile csrc/cuda/*.cu into build_temp when stale, as jobs of the
    shared compile pool (one nvcc process each); their objects."""
    nvcc = os.path.join(CUDA_ROOT, "bin", "nvcc")
    objects, running = [], []
    for src in sorted(glob.glob("csrc/cuda/*.cu")):
        # objects per architecture list, so changing EMBER_CUDA_ARCH recompiles
        obj = os.path.join(build_temp, "sm_" + "_".join(cuda_archs()),
                           os.path.splitext(src)[0] + ".o")
        objects.append(obj)
        if not force and not out_of_date(obj):
            continue
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        cmd = [nvcc, "-O3", "-std=c++17", "--expt-relaxed-constexpr", "-Xcompiler", "-fPIC",
               "-Xcompiler", "-fvisibility=hidden", "-Icsrc", *cuda_arch_flags(), "--threads", "0",
               "-MD", "-MF", os.path.splitext(obj)[0] + ".d", "-c", src, "-o", obj]
        running.append(jobs.submit(run_logged, cmd))
    for r in running:
        r.result()  # the first failure raises CalledProcessError
    return objects


_print_lock = threading.Lock()


def run_logged(cmd):
    with _print_lock:
        print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def core_files(pattern):
    """csrc files of ember._C: everything but the CUDA backend's and the test double's."""
    return sorted(f for f in glob.glob(pattern, recursive=True)
                  if not f.startswith((os.path.join("csrc", "cuda", ""), os.path.join("csrc", "testing", ""))))


CUDA_ROOT = find_cuda()
extensions = [Extension("ember._C", sources=core_files("csrc/**/*.c"),
                        depends=core_files("csrc/**/*.h") + core_files("csrc/**/*.def")
                        + ["csrc/python/exports.map"]),
              # Note [fake CUDA]: plain C, so it builds (and the GPU tests run on it) without nvcc
              Extension("ember._cuda_fake", sources=sorted(glob.glob("csrc/testing/*.c")),
                        depends=glob.glob("csrc/testing/*.h") + core_files("csrc/**/*.h")
                        + glob.glob("csrc/cuda/*.h"))]
if CUDA_ROOT:  # first: its nvcc jobs, the longest, then start before the C ones
    extensions.insert(0, cuda_extension(CUDA_ROOT))
setup(
    ext_modules=extensions,
    cmdclass={"build_ext": BuildExt},
)
