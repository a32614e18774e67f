"""Imports point one way: a package imports only the packages its row of the table in
docs/architecture.md ("Packages and who imports whom") allows. The table is the rule; this test
reads it, so the two cannot drift."""
import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
HEADING = "## Packages and who imports whom"
# Top-level packages outside the layering: the tests and benchmarks may import anything.
EXEMPT = {"tests", "bench"}


def project_packages() -> set[str]:
    """The top-level packages of the checkout: directories with an __init__.py."""
    return {name for name in os.listdir(ROOT)
            if name not in EXEMPT and os.path.isfile(os.path.join(ROOT, name, "__init__.py"))}


def parse_allowed(text: str) -> dict[str, set[str]]:
    """The table under HEADING: ``| `package` | what | `a`, `b` |`` per row, ``—`` for none.
    Raises ValueError when the heading or its table is missing or a row does not parse."""
    start = text.find(HEADING + "\n")
    if start < 0:
        raise ValueError(f"no {HEADING!r} section")
    lines = text[start + len(HEADING) + 1:].splitlines()
    rows = []
    for line in lines:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the first table of the section ends here
    if len(rows) < 3 or rows[0][0] != "package" or rows[0][-1] != "may import":
        raise ValueError(f"no | package | ... | may import | table under {HEADING!r}")
    allowed: dict[str, set[str]] = {}
    for cells in rows[2:]:
        package = re.fullmatch(r"`(\w+)/?`", cells[0])
        if package is None:
            raise ValueError(f"a row of the table names no package: {cells}")
        arrows = cells[-1]
        names = set() if arrows in ("—", "-", "nothing") else set(re.findall(r"`(\w+)/?`", arrows))
        if arrows not in ("—", "-", "nothing") and not names:
            raise ValueError(f"row {package[1]}: cannot read {arrows!r}")
        allowed[package[1]] = names
    return allowed


def _read_table() -> dict[str, set[str]]:
    with open(ARCHITECTURE, encoding="utf-8") as f:
        return parse_allowed(f.read())


ALLOWED = _read_table() if os.path.exists(ARCHITECTURE) else {}
PROJECT = project_packages()


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
    for package in sorted(PROJECT):
        for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith((".py", ".pyx", ".pxd", ".pyi")):
                    yield package, os.path.join(dirpath, name)


def _id(value):
    return os.path.relpath(value, ROOT) if isinstance(value, str) and os.sep in value else value


def test_the_table_names_every_package_and_only_packages():
    table = _read_table()
    assert set(table) == PROJECT, (
        f"docs/architecture.md's table lacks {sorted(PROJECT - set(table))}, "
        f"names {sorted(set(table) - PROJECT)} that are not packages")
    for package, arrows in table.items():
        assert arrows <= PROJECT - {package}, f"{package} may import {sorted(arrows - PROJECT)}?"


@pytest.mark.parametrize("package,path", list(sources()), ids=_id)
def test_imports_point_down(package, path):
    bad = imported_packages(path) - ALLOWED.get(package, set()) - {package}
    assert not bad, f"{os.path.relpath(path, ROOT)} imports {sorted(bad)} (docs/architecture.md)"


def test_the_arrows_have_no_cycle():
    table = _read_table()
    done: set[str] = set()

    def visit(package, path):
        assert package not in path, f"import cycle in docs/architecture.md: {' -> '.join(path + [package])}"
        if package in done:
            return
        for below in table.get(package, ()):
            visit(below, path + [package])
        done.add(package)

    for package in table:
        visit(package, [])


def test_layering_test_sees_the_storage_packages():
    found = {package for package, _ in sources()}
    assert {"ext", "engine"} <= found


@pytest.mark.parametrize("broken", [
    "# Architecture\n\nNo table here.\n",
    f"{HEADING}\n\n| package | what |\n|---|---|\n| `ext` | kernels |\n",
    f"{HEADING}\n\n| package | what | may import |\n|---|---|---|\n| ext | kernels | — |\n",
])
def test_a_missing_or_malformed_table_is_an_error(broken):
    with pytest.raises(ValueError):
        parse_allowed(broken)


def test_the_parser_reads_arrows():
    text = (f"{HEADING}\n\nArrows:\n\n| package | what | may import |\n|---|---|---|\n"
            "| `ext/` | kernels | — |\n| `engine/` | logs | `ext` |\n| `raft/` | KRaft | `engine`, `ext` |\n"
            "\n| other | table |\n|---|---|\n| `x` | y |\n")
    assert parse_allowed(text) == {"ext": set(), "engine": {"ext"}, "raft": {"engine", "ext"}}
