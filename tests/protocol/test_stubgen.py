"""protocol/messages.pyi, the message classes declared for the type checker: generated from the
schemas (python -m protocol.stubgen), so it must be what the generator gives now, declare exactly
the classes and fields the codec makes at run time, and let the type checker tell a field from a
typo."""
from __future__ import annotations

import ast
import os

import pytest

from protocol import messages, stubgen
from protocol.codec import KafkaStruct


def test_stub_is_up_to_date_with_the_schemas():
    with open(stubgen.STUB, encoding="utf-8") as f:
        assert f.read() == stubgen.render(), "run: python -m protocol.stubgen"


def _stub_classes() -> dict[str, ast.ClassDef]:
    with open(stubgen.STUB, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _check(node: ast.ClassDef, cls: type[KafkaStruct], where: str) -> None:
    fields = [n.target.id for n in node.body
              if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
              and not (isinstance(n.annotation, ast.Name) and n.annotation.id == "TypeAlias")]
    assert tuple(fields) == cls._fields, where
    init = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert [a.arg for a in init.args.kwonlyargs] == list(cls._fields), where
    nested = {k: v for k, v in vars(cls).items() if isinstance(v, type) and issubclass(v, KafkaStruct)}
    declared = {n.name: n for n in node.body if isinstance(n, ast.ClassDef)}
    aliases = {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)
               and isinstance(n.annotation, ast.Name) and n.annotation.id == "TypeAlias"}
    assert set(declared) | aliases == set(nested), where
    assert not set(declared) & aliases, where
    for name, child in declared.items():
        _check(child, nested[name], f"{where}.{name}")


def test_stub_declares_the_runtime_classes_and_fields():
    declared = _stub_classes()
    runtime = {name: value for name, value in vars(messages).items()
               if isinstance(value, type) and issubclass(value, KafkaStruct)}
    assert set(declared) == set(runtime)
    for name, node in declared.items():
        _check(node, runtime[name], name)


def test_type_checker_sees_fields_and_nested_structs(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    code = tmp_path / "use_messages.py"
    code.write_text(
        "from protocol import messages as M\n"
        "def first_offset(resp: M.FetchResponse) -> int:\n"
        "    return resp.responses[0].partitions[0].high_watermark\n"
        "p = M.FetchResponse.PartitionData(partition_index=0, high_watermark=5)\n"
        "M.ProduceRequest(acks=-1, timeout_ms='1000')\n"
        "def bad(resp: M.FetchResponse) -> int:\n"
        "    return resp.responses[0].partitions[0].high_water_mark\n"
    )
    monkeypatch.chdir(os.path.dirname(os.path.dirname(messages.__file__)))  # where protocol/ is
    out, _, status = api.run(["--no-incremental", "--follow-imports=silent", "--config-file=",
                              "--python-version=3.11", str(code)])
    errors = [line.split(": error: ")[1] for line in out.splitlines() if ": error: " in line]
    assert status == 1, out
    assert len(errors) == 2, out
    assert 'Argument "timeout_ms" to "ProduceRequest" has incompatible type "str"' in errors[0]
    assert '"PartitionData" has no attribute "high_water_mark"' in errors[1]
