"""DESIGN.md: "Imports go one way ...; no cycles, and no lazy import used to hide one."

The import graph of the package is read from the source (every ``import``, also the ones inside
functions) and must have no cycle.
"""
import ast
import graphlib
from pathlib import Path

import microtorch

PACKAGE = Path(microtorch.__file__).parent


def _modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its __init__)."""
    mods = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _imports(name: str, path: Path, mods: dict) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            # `from . import x` imports the submodule x when there is one, else a name of the package
            found |= {f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m in mods and m != name}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    mods = _modules(package)
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _cycle(graph: dict) -> list | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        return err.args[1][::-1]  # graphlib lists each module before the ones that import it
    return None


def test_the_package_has_no_import_cycle():
    cycle = _cycle(import_graph())
    assert cycle is None, ("an import cycle (each module imports the next): " + " -> ".join(cycle)
                           + "\nMove what both sides need into a module below them both.")


def test_the_graph_sees_lazy_imports_and_package_relative_names(tmp_path):
    """A cycle closed only by an import inside a function is found, and so is one through `from . import`."""
    pkg = tmp_path / "microtorch"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    graph = import_graph(pkg)
    assert graph["microtorch.a"] == {"microtorch.sub.b"} and graph["microtorch.sub.b"] == {"microtorch.a"}
    assert set(_cycle(graph)) == {"microtorch.a", "microtorch.sub.b"}
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert _cycle(import_graph(pkg)) is None
