"""The README and docs/ name only what exists: every path in backticks or a link, every
`make` target, every `strom` command and every `python -m` module the README names, and every
relative link (with its #anchor) in README.md, docs/*.md and bench/JOURNAL.md."""
from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
README_MAX_LINES = 200
PAGES = [README, os.path.join(ROOT, "bench", "JOURNAL.md")] + sorted(
    os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md")) \
    if os.path.isdir(DOCS) else [README]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MODULE_SUFFIXES = ("", ".py", ".pyx")  # `ext/batch` names ext/batch.pyx


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def code_fragments(text: str) -> list[str]:
    """The lines of fenced code blocks and the contents of inline code spans."""
    fragments = [line for block in FENCE.findall(text) for line in block.splitlines()]
    prose = FENCE.sub("", text)
    return fragments + SPAN.findall(prose)


def named_paths(text: str) -> set[str]:
    """Repository paths in inline code spans (a token with a /; placeholders, globs, addresses
    and options left out). A bare file name is left out too: it is named beside its directory."""
    paths = set()
    for span in SPAN.findall(FENCE.sub("", text)):
        token = span.strip().split("::")[0]
        if " " in token or any(c in token for c in "<>*$=:@{}[]'\",%") or token.startswith(("-", ".[")):
            continue
        if "/" in token and re.fullmatch(r"[\w.][\w./-]*", token):
            paths.add(token)
    return paths


def make_targets_named(text: str) -> set[str]:
    return {m for fragment in code_fragments(text)
            for m in re.findall(r"(?:^|[\s;(])make\s+([a-z][\w-]*)", fragment)}


def strom_commands_named(text: str) -> set[tuple[str, ...]]:
    """(command,) or (command, action) for every `strom ...` / `python -m strom ...` named."""
    commands = set()
    for fragment in code_fragments(text):
        for m in re.finditer(r"(?:^|[\s;(])(?:python3? -m )?strom((?:\s+[a-z][\w-]*){1,2})", fragment):
            commands.add(tuple(m.group(1).split()))
    return commands


def modules_named(text: str) -> set[str]:
    return {m for fragment in code_fragments(text)
            for m in re.findall(r"python3? -m ((?:bench|tests|strom)(?:\.\w+)*)", fragment)}


def exists(path: str) -> bool:
    return any(os.path.exists(os.path.join(ROOT, path.rstrip("/") + suffix)) for suffix in MODULE_SUFFIXES)


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([a-zA-Z][\w-]*)\s*:(?!=)", read(os.path.join(ROOT, "Makefile")), re.M))


def strom_choices(*words: str) -> set[str]:
    """The sub-commands or actions ``strom *words --help`` offers (its {a,b,...} lists)."""
    from strom.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*words, "--help"])
    usage = out.getvalue().split("\n\n")[0]
    return {choice for group in re.findall(r"\{([^}]*)\}", usage) for choice in group.split(",")}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#{1,6}\s+(.+)$", FENCE.sub("", read(path)), re.M)}


def broken_links(page: str) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", read(page))):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) if file_part else page
        if not os.path.exists(resolved):
            broken.append(f"{target}: no {os.path.relpath(resolved, ROOT)}")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {os.path.relpath(resolved, ROOT)}")
    return broken


def _page_id(path):
    return os.path.relpath(path, ROOT)


def test_readme_is_short():
    assert len(read(README).splitlines()) <= README_MAX_LINES


def test_readme_keeps_the_two_commands_at_the_top():
    head = "\n".join(read(README).splitlines()[:15])
    assert "make run    # set everything up" in head and "make test   # set everything up" in head


def test_every_path_the_readme_names_exists():
    paths = named_paths(read(README))
    assert len(paths) >= 8, sorted(paths)  # the check sees the README's paths at all
    missing = sorted(p for p in paths if not exists(p))
    assert not missing, f"README.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", [p for p in PAGES if p != README], ids=_page_id)
def test_every_path_a_doc_names_exists(page):
    missing = sorted(p for p in named_paths(read(page)) if not exists(p))
    assert not missing, f"{_page_id(page)} names paths that do not exist: {missing}"


def test_every_make_target_the_readme_names_exists():
    named = make_targets_named(read(README))
    assert {"run", "test", "setup"} <= named
    missing = sorted(named - makefile_targets())
    assert not missing, f"README.md names make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_strom_command_a_page_names_exists(page):
    from strom.cli import WORKER_COMMANDS  # run by the supervisor, left out of --help

    top = strom_choices() | set(WORKER_COMMANDS)
    missing = []
    for command in sorted(strom_commands_named(read(page))):
        if command[0] not in top:
            missing.append(" ".join(command))
        elif len(command) > 1:
            actions = strom_choices(command[0])
            if actions and command[1] not in actions:
                missing.append(" ".join(command))
    assert not missing, f"{_page_id(page)} names strom commands that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_python_module_a_page_runs_exists(page):
    missing = []
    for module in sorted(modules_named(read(page))):
        base = os.path.join(ROOT, *module.split("."))
        if not (os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__main__.py"))):
            missing.append(module)
    assert not missing, f"{_page_id(page)} runs modules that do not exist: {missing}"


def test_readme_test_ids_exist():
    for node in re.findall(r"(tests/[\w/]+\.py)::(\w+)", read(README)):
        path, name = node
        assert re.search(rf"^\s*(async )?def {name}\(", read(os.path.join(ROOT, path)), re.M), node


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_relative_links_resolve(page):
    assert not broken_links(page)


def test_the_docs_are_all_there():
    for name in ("architecture", "operations", "replication", "security", "monitoring", "spark", "testing",
                 "benchmarks"):
        assert os.path.isfile(os.path.join(DOCS, f"{name}.md")), name
        assert f"docs/{name}.md" in read(README), f"README.md does not link docs/{name}.md"


def section_test_names(text: str, heading: str) -> set[str]:
    """The test functions (`test_...` in code spans) a README section names."""
    start = text.find(heading + "\n")
    if start < 0:
        return set()
    end = text.find("\n## ", start + len(heading))
    section = text[start:end if end >= 0 else len(text)]
    return {span for span in SPAN.findall(section) if re.fullmatch(r"test_\w+", span)}


def defined_tests() -> set[str]:
    names = set()
    for directory, _dirs, files in os.walk(os.path.join(ROOT, "tests")):
        for name in files:
            if name.startswith("test_") and name.endswith(".py"):
                names.update(re.findall(r"^def (test_\w+)", read(os.path.join(directory, name)), re.M))
    return names


def test_every_test_the_authorization_table_names_exists():
    """The README's per-API table names a test for each row: each must be a test of the suite."""
    named = section_test_names(read(README), "## Authorization")
    assert len(named) > 30, named
    assert sorted(named - defined_tests()) == []


# The checks themselves: each finds what it is there to find.

def test_the_checks_find_a_missing_path_target_command_and_link(tmp_path):
    text = ("Run `make nosuchtarget`, then `python -m strom nosuchcommand` and "
            "`strom cluster down`; see `engine/nosuch.py` and [x](docs/nosuch.md).\n"
            "```sh\nmake run\npython -m bench.nosuch\n```\n")
    assert not exists("engine/nosuch.py") and exists("ext/batch") and exists("engine/log.py")
    assert named_paths(text) == {"engine/nosuch.py"}
    assert make_targets_named(text) == {"nosuchtarget", "run"}
    assert "nosuchtarget" not in makefile_targets()
    assert strom_commands_named(text) == {("nosuchcommand",), ("cluster", "down")}
    assert "nosuchcommand" not in strom_choices() and "down" not in strom_choices("cluster")
    assert modules_named(text) == {"strom", "bench.nosuch"}
    page = tmp_path / "page.md"
    page.write_text(text + "\n## A heading, here\n\n[y](#a-heading-here) [z](#nowhere)\n")
    assert [b.split(":")[0] for b in broken_links(str(page))] == ["docs/nosuch.md", "#nowhere"]


def test_placeholders_and_addresses_are_not_paths():
    text = "`DIR/<role>-<id>.log`, `127.0.0.1:9092`, `protocol/schemas/*.schema`, `--dir ./cluster`, `a b/c`"
    assert named_paths(text) == set()
