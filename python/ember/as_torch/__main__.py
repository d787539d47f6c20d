"""python -m ember.as_torch SCRIPT [ARGS...] | -m MODULE [ARGS...] | -c CODE [ARGS...]

Runs a torch program with ember answering `import torch`, as `python SCRIPT`
would run it: sys.argv is [SCRIPT, ARGS...], the script runs as the __main__
module with its directory first on sys.path, and an uncaught exception goes to
sys.excepthook (Python's traceback, without this runner's frames) and exits
with status 1; SystemExit's status is the process's."""
import importlib.machinery
import os
import runpy
import signal
import sys
import types

USAGE = "usage: python -m ember.as_torch SCRIPT [ARGS...] | -m MODULE [ARGS...] | -c CODE [ARGS...]"
_HERE = os.path.dirname(os.path.abspath(__file__))


def _is_runner_frame(filename):
    if filename.startswith("<frozen runpy"):
        return True
    path = os.path.abspath(filename)
    return os.path.dirname(path) == _HERE or path == os.path.abspath(runpy.__file__)


def _report(exc):
    """Uncaught exception: what python does, from the program's first frame."""
    tb = exc.__traceback__
    while tb is not None and _is_runner_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    if tb is not None:
        exc = exc.with_traceback(tb)  # the default hook prints the exception's own traceback
    sys.excepthook(type(exc), exc, exc.__traceback__)


def _new_main(path):
    """A fresh __main__ module, as python makes for `python SCRIPT`."""
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    main.__spec__ = None
    if path is not None:
        main.__file__ = path
        main.__cached__ = None
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    return main


def _run(argv):
    mode = argv[0]
    if mode == "-m":
        sys.argv = [argv[1]] + argv[2:]  # runpy puts the module's file in argv[0]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif mode == "-c":
        sys.argv = ["-c"] + argv[2:]
        sys.path[0] = ""
        exec(compile(argv[1], "<string>", "exec"), _new_main(None).__dict__)
    else:
        target = argv[0]
        sys.argv = list(argv)
        if os.path.isdir(target) or target.endswith((".zip", ".pyz")):
            sys.path[0] = os.path.abspath(target)
            runpy.run_path(target, run_name="__main__")
            return
        sys.path[0] = os.path.dirname(os.path.abspath(target))
        with open(target, "rb") as f:
            source = f.read()
        exec(compile(source, target, "exec"), _new_main(target).__dict__)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] in ("-m", "-c") and len(argv) < 2:
        print(f"Argument expected for the {argv[0]} option\n{USAGE}", file=sys.stderr)
        return 2
    if argv[0] not in ("-m", "-c") and not os.path.exists(argv[0]):
        print(f"{sys.executable}: can't open file {os.path.abspath(argv[0])!r}: "
              "[Errno 2] No such file or directory", file=sys.stderr)
        return 2
    from . import install
    install()
    try:
        _run(argv)
    except SystemExit:
        raise
    except KeyboardInterrupt as exc:
        _report(exc)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # exit as python does: killed by SIGINT
        os.kill(os.getpid(), signal.SIGINT)
        return 130
    except BaseException as exc:
        _report(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
