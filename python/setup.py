"""setup.py — `pip install python/` copies the libtg.so this tree built (TG_LIB, else
../$TG_BUILD/libtg.so, TG_BUILD default "build") and the headers cffi reads into the package,
so the installed package uses the library it was built with (docs/python.md)."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class BuildWithLib(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("TG_LIB") or os.path.join(REPO, os.environ.get("TG_BUILD", "build"), "libtg.so")
        if not os.path.isfile(lib):
            raise SystemExit("tg: %s not found: run `make` first (or set TG_LIB or TG_BUILD)" % lib)
        dst = os.path.join(self.build_lib, "tg")
        shutil.copy2(lib, os.path.join(dst, "libtg.so"))
        os.makedirs(os.path.join(dst, "include"), exist_ok=True)
        for h in ("tg.h", "tg_nn.h"):
            shutil.copy2(os.path.join(REPO, "include", h), os.path.join(dst, "include", h))


setup(cmdclass={"build_py": BuildWithLib})
