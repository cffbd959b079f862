"""_lib.py — loads libtg.so through cffi (ABI mode) and declares its API from tg's own headers.

cffi reads the C declarations of include/tg.h and include/tg_nn.h at import, so the Python
side never keeps a second, hand-written copy of ~300 signatures that could drift from the
library. Where the library and headers come from (first found wins):
  1. TG_LIB: a path to libtg.so (its headers: TG_INCLUDE, else the repository's include/);
  2. libtg.so and include/ copied into this package by `pip install` (python/setup.py);
  3. the source tree this package sits in: <repo>/$TG_BUILD/libtg.so (TG_BUILD default "build")
     and <repo>/include.
Errors become Python exceptions here (check, error): the C API never aborts, it returns NULL or a
negative status and leaves a message in tg_last_error().
"""
import os
import re

from cffi import FFI

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))


def _candidates():
    env = os.environ.get("TG_LIB")
    if env:
        yield env, os.environ.get("TG_INCLUDE", os.path.join(_REPO, "include"))
    yield os.path.join(_HERE, "libtg.so"), os.path.join(_HERE, "include")
    build = os.environ.get("TG_BUILD", "build")
    yield os.path.join(_REPO, build, "libtg.so"), os.path.join(_REPO, "include")


def _find():
    tried = []
    for lib, inc in _candidates():
        if os.path.isfile(lib) and os.path.isfile(os.path.join(inc, "tg.h")):
            return lib, inc
        tried.append(lib)
    raise ImportError("tg: libtg.so not found (tried %s); build it with `make` or set TG_LIB" % ", ".join(tried))


def _declarations(path):
    """The header without comments, preprocessor lines and the extern "C" guards: what cdef reads."""
    with open(path) as f:
        src = f.read()
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    src = re.sub(r"#ifdef __cplusplus.*?#endif", "", src, flags=re.S)
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith("#"))


def _defines(path):
    with open(path) as f:
        return dict(re.findall(r"#define\s+(TG_\w+)\s+\((-?\d+)\)", f.read()))


LIB_PATH, INCLUDE_DIR = _find()
ffi = FFI()
ffi.cdef(_declarations(os.path.join(INCLUDE_DIR, "tg.h")))
ffi.cdef(_declarations(os.path.join(INCLUDE_DIR, "tg_nn.h")))
# Internal but exported: the status of the last failed call that returned NULL (runtime/helpers.h).
ffi.cdef("int tg_error_status(void);")
# RTLD_NODELETE: cffi dlcloses the library when `lib` is collected at interpreter exit, while tg's
# thread-pool workers still run code in it (a segfault at exit, issue 15); it must stay mapped.
lib = ffi.dlopen(LIB_PATH, ffi.RTLD_NOW | ffi.RTLD_NODELETE)
NULL = ffi.NULL

ALL_AXES = int(_defines(os.path.join(INCLUDE_DIR, "tg.h")).get("TG_ALL_AXES", -1000000))
SLICE_END = 2**63 - 1

try:
    _status = lib.tg_error_status
except AttributeError:  # a library without it: classify by message only
    _status = None

# tg_status → the Python exception it becomes (docs/python.md).
_EXC = {-1: ValueError, -2: MemoryError, -3: RuntimeError, -4: RuntimeError, -5: RuntimeError, -6: ValueError}


def last_error():
    return ffi.string(lib.tg_last_error()).decode("utf-8", "replace")


def error(status=None):
    """The exception for the last failure (status: what an int-returning call gave)."""
    if status is None and _status is not None:
        status = _status()
    msg = last_error() or "tg: unknown error"
    lib.tg_clear_error()
    return _EXC.get(status, ValueError)(msg)


def check(status):
    """Raise for a negative tg_status; return it otherwise."""
    if status < 0:
        raise error(status)
    return status
