"""Cython extensions only; everything else lives in pyproject.toml.

STROM_DEBUG=1    build with -O0 -g and Cython bounds/wraparound checks on.
STROM_ANNOTATE=1 write Cython's annotated HTML next to each .pyx.
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("STROM_DEBUG") == "1"
ANNOTATE = os.environ.get("STROM_ANNOTATE") == "1"

extensions = [
    Extension(
        os.path.splitext(path)[0].replace("/", "."),
        [path],
        extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3"],
    )
    for path in sorted(glob.glob("ext/*.pyx") + glob.glob("protocol/*.pyx"))
]

setup(
    ext_modules=cythonize(
        extensions,
        annotate=ANNOTATE,
        compiler_directives={
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "initializedcheck": DEBUG,
            "cdivision": True,
            "embedsignature": True,
        },
    )
)
