"""Cython extensions only; everything else lives in pyproject.toml.

STROM_DEBUG=1    build with -O0 -g and Cython bounds/wraparound checks on.
STROM_QUICK=1    build with -O0, nothing else changed: for a build whose speed nobody measures
                 (tests/package/test_wheel.py builds the wheel so, in a third of the time).
STROM_ANNOTATE=1 write Cython's annotated HTML next to each .pyx.

Cython runs when the extensions are built (build_ext), on every core, not when setup.py is
loaded: the sdist, which carries the .pyx and not the C, does not wait for it.

Extensions compile side by side, a job per core (``--parallel`` overrides). An in-place build
puts each .so in place by a rename, so a process starting meanwhile loads
either the old file or the new one, never a half-copied one (setuptools deletes and copies).
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("STROM_DEBUG") == "1"
QUICK = os.environ.get("STROM_QUICK") == "1"
ANNOTATE = os.environ.get("STROM_ANNOTATE") == "1"

extensions = [
    Extension(
        os.path.splitext(path)[0].replace("/", "."),
        [path],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O0"] if QUICK else ["-O3"],
    )
    for path in sorted(glob.glob("ext/*.pyx") + glob.glob("protocol/*.pyx"))
]

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
}


class InplaceByRename(build_ext):
    def finalize_options(self):
        jobs = int(self.parallel) if self.parallel else os.cpu_count() or 1
        # Only a build compiles: listing the sources (the sdist, which carries the .pyx and not
        # the C, and egg_info's SOURCES.txt) takes them as they are.
        if set(self.distribution.commands) - {"sdist", "egg_info", "dist_info"}:
            self.distribution.ext_modules = cythonize(self.distribution.ext_modules, annotate=ANNOTATE,
                                                      nthreads=jobs, compiler_directives=COMPILER_DIRECTIVES)
        super().finalize_options()
        self.parallel = jobs  # compile the extensions side by side, a job per core

    def copy_file(self, infile, outfile, *args, **kwargs):
        if not self.inplace or self.dry_run:
            return super().copy_file(infile, outfile, *args, **kwargs)
        part = f"{outfile}.{os.getpid()}.part"
        _, copied = super().copy_file(infile, part, *args, **kwargs)
        os.replace(part, outfile)
        return outfile, copied


setup(cmdclass={"build_ext": InplaceByRename}, ext_modules=extensions)
