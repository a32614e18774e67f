"""What a module imports, for the purity tests of the pure cores (raft, replication, controller
managers): STYLE.md point 1."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IO_CLOCK_RANDOMNESS = {"asyncio", "socket", "os", "time", "random", "threading", "select", "selectors"}


def imports(package: str, module: str) -> set[str]:
    """Absolute imports of ``package/module.py``: each module name, and for ``from m import n``
    also ``m.n``."""
    with open(os.path.join(ROOT, package, module + ".py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}
