"""The project's own modules import each other without a cycle (graph read from the source with ast)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cfl_core", "cfl_ui")


def project_modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the packages (a package is its __init__)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Every dotted name an import statement may load: the module and, for `from X import n`, X.n."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    """module -> the project modules it imports, at module level or inside functions alike.

    A module's own parent packages are left out: Python has started importing them before the
    module runs, so a package that re-exports its submodules is no cycle."""
    modules = project_modules(root, packages)
    graph = {}
    for module, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(name for name in _imported(module, path, node) if name in modules)
        graph[module] = {d for d in deps if d != module and not module.startswith(d + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state = {}  # absent: unseen, 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_project_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert len(graph) > 50 and "cfl_core.engine.models" in graph and "cfl_ui.jobs.store" in graph  # it read the tree
    assert "cfl_core.engine.cnn" in graph["cfl_core.engine.models"]  # ... and resolved relative imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import A\n",
        "pkg/a.py": "from .b import B\nA = 1\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "def late():\n    from .. import a\n",
        "pkg/b.py": "import pkg.sub.c\nB = 2\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.sub.c"] == {"pkg.a"}  # `from .. import a` names the module pkg.a, not only pkg
    assert graph["pkg"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]


def test_a_package_that_re_exports_its_submodules_is_no_cycle(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from .a import A\nfrom .b import B\n",
        "pkg/a.py": "A = 1\n",
        "pkg/b.py": "from . import a\nfrom pkg import a as again\nB = a.A\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {"pkg": {"pkg.a", "pkg.b"}, "pkg.a": set(), "pkg.b": {"pkg.a"}}
    assert find_cycle(graph) is None
