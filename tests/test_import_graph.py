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


# The dashboard's four layers, lowest first: a module imports from its own layer or the ones below, never above
# (cfl_ui/__init__.py's map). Modules outside the layers (the package itself, `serve`: the launcher) sit on top.
LAYERS = ("jobs", "charts", "form", "views")
NO_STREAMLIT = ("jobs",)  # the jobs service runs without a page (the CLI, tests, benchmarks drive it)


def layer_of(module: str, package: str = "cfl_ui", layers=LAYERS) -> int | None:
    parts = module.split(".")
    if parts[0] == package and len(parts) > 1 and parts[1] in layers:
        return layers.index(parts[1])
    return None


def upward_imports(graph: dict[str, set[str]], package: str = "cfl_ui", layers=LAYERS) -> list[tuple[str, str]]:
    """(importer, imported) for every import by a layer's module of a higher layer's module or of a module on top
    of the layers (the package's own modules outside them)."""
    found = []
    for module, deps in sorted(graph.items()):
        here = layer_of(module, package, layers)
        if here is None:
            continue
        for dep in sorted(deps):
            if dep.split(".")[0] != package:
                continue
            there = layer_of(dep, package, layers)
            if there is None or there > here:
                found.append((module, dep))
    return found


def streamlit_importers(root: Path, package: str, layer: str) -> list[str]:
    """Modules of one layer that import streamlit (at module level or in a function)."""
    found = []
    for module, path in project_modules(root, (package,)).items():
        if layer_of(module, package, (layer,)) is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "streamlit" or n.startswith("streamlit.") for n in names):
                found.append(module)
                break
    return sorted(set(found))


def test_the_dashboards_layers_import_only_downward():
    graph = import_graph(ROOT)
    layered = [m for m in graph if layer_of(m) is not None]
    assert {layer_of(m) for m in layered} == {0, 1, 2, 3} and len(layered) > 40  # every layer was read
    assert "cfl_ui.form.controls" in graph["cfl_ui.views.playground_view"]  # relative imports resolved across layers
    assert upward_imports(graph) == []
    # no module of the dashboard outside the four layers but its entry points
    assert sorted(m for m in graph if m.startswith("cfl_ui") and layer_of(m) is None
                  and m not in {f"cfl_ui.{layer}" for layer in LAYERS}) == ["cfl_ui", "cfl_ui.serve"]


def test_the_jobs_layer_and_the_core_never_import_streamlit():
    for layer in NO_STREAMLIT:
        assert streamlit_importers(ROOT, "cfl_ui", layer) == []
    core = [m for m, path in project_modules(ROOT, ("cfl_core",)).items() if "streamlit" in path.read_text()]
    assert core == []


def test_an_upward_import_is_found_even_inside_a_function(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/serve.py": "from app.views import page\n",
        "app/jobs/__init__.py": "",
        "app/jobs/store.py": "def late():\n    from ..form import presets\n",  # up two layers, in a function
        "app/charts/__init__.py": "",
        "app/charts/figures.py": "from ..jobs import store\nfrom app import serve\n",  # down; and onto the top
        "app/form/__init__.py": "",
        "app/form/presets.py": "from ..charts.figures import x\n",
        "app/views/__init__.py": "",
        "app/views/page.py": "from ..form.presets import p\nfrom ..jobs.store import s\n",
        "app/jobs/streamy.py": "import streamlit as st\n",
    })
    graph = import_graph(tmp_path, ("app",))
    assert upward_imports(graph, "app") == [("app.charts.figures", "app.serve"),
                                            ("app.jobs.store", "app.form"), ("app.jobs.store", "app.form.presets")]
    assert streamlit_importers(tmp_path, "app", "jobs") == ["app.jobs.streamy"]
    assert streamlit_importers(tmp_path, "app", "views") == []
