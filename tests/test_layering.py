"""Imports point one way (DESIGN.md): a package imports only the packages below it."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROJECT = {
    "ext", "engine", "protocol", "metadata", "raft", "controller", "replication", "broker", "spark",
    "strom",
}
ALLOWED = {
    "ext": set(),
    "engine": {"ext"},
    "protocol": {"ext"},
    "metadata": {"protocol", "ext"},
    "raft": {"engine", "protocol", "ext"},
    "controller": {"raft", "metadata", "protocol", "engine", "ext"},
    "replication": {"engine", "metadata", "protocol", "ext"},
    "broker": {"replication", "metadata", "engine", "protocol", "raft", "ext"},
    "spark": {"engine", "ext"},
    "strom": PROJECT - {"strom"},
}


def imported_packages(path: str) -> set[str]:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    if path.endswith((".pyx", ".pxd")):
        names = set()
        for line in source.splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "cimport", "from"):
                names.add(words[1].split(".")[0])
        return names & PROJECT
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & PROJECT


def sources():
    for package in sorted(ALLOWED):
        top = os.path.join(ROOT, package)
        if not os.path.isdir(top):
            continue
        for dirpath, _, files in os.walk(top):
            for name in files:
                if name.endswith((".py", ".pyx", ".pxd", ".pyi")):
                    yield package, os.path.join(dirpath, name)


def _id(value):
    return os.path.relpath(value, ROOT) if isinstance(value, str) and os.sep in value else value


@pytest.mark.parametrize("package,path", list(sources()), ids=_id)
def test_imports_point_down(package, path):
    bad = imported_packages(path) - ALLOWED[package] - {package}
    assert not bad, f"{os.path.relpath(path, ROOT)} imports {sorted(bad)}"


def test_layering_test_sees_the_storage_packages():
    found = {package for package, _ in sources()}
    assert {"ext", "engine"} <= found
