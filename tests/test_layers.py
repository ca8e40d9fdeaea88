"""t1env and t1train import one way: the layer order of docs/architecture.md, checked without importing anything.

An AST scan of every ``import`` in ``t1env/`` and ``t1train/`` (module level, inside functions, under
``if TYPE_CHECKING:`` alike; relative imports resolved) builds the import graph. ``from pkg import name``
is an edge to ``pkg.name`` when that is a module, else to ``pkg``; importing ``a.b`` does not count as
importing ``a`` (a package's ``__init__`` is its face, not its children's base). Each test fails with one
line per offence, naming the file and the modules.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("t1env", "t1train")
DOC = ROOT / "docs" / "architecture.md"
_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    path: str  # its file, relative to the repository
    line: int
    target: str  # the imported t1 module
    in_function: bool
    commented: bool  # a comment on the import's line or on the line above


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _function_nodes(tree: ast.AST) -> set[int]:
    inside = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@cache
def imports() -> tuple[Import, ...]:
    modules = _modules()
    found = []
    for module, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        in_fn = _function_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            above = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
            commented = "#" in lines[node.end_lineno - 1] or "#" in lines[node.lineno - 1] or above.startswith("#")
            rel = path.relative_to(ROOT).as_posix()
            if isinstance(node, ast.Import):
                targets = [_owner(alias.name, modules) for alias in node.names]
            else:
                base = _absolute(module, path.name == "__init__.py", node)
                targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                if len(targets) < len(node.names):  # names defined by the module `base` itself
                    targets.append(_owner(base, modules))
            found += [
                Import(module, rel, node.lineno, t, id(node) in in_fn, commented)
                for t in dict.fromkeys(targets)
                if t is not None and t != module
            ]
    return tuple(found)


@cache
def layers() -> list[tuple[int, str, list[str]]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows.append((int(m.group(1)), m.group(2), re.findall(r"`([\w.*]+)`", m.group(3))))
    assert rows, f"{DOC}: no layer table (rows '| N | name | `module`, ... |')"
    return rows


def layer_of(module: str) -> tuple[int, str] | None:
    """The layer of ``module``: an exact entry, else the longest ``pkg.*`` that contains it."""
    best, best_len = None, -1
    for number, name, entries in layers():
        for entry in entries:
            if entry == module:
                return number, name
            if entry.endswith(".*") and module.startswith(entry[:-1]) and len(entry) > best_len:
                best, best_len = (number, name), len(entry)
    return best


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_scan_sees_the_imports_it_must():
    """The scanner is not blind: imports at module level, in functions and relative ones are all edges."""
    edges = {(i.source, i.target, i.in_function) for i in imports()}
    assert ("t1env.task", "t1env.formats.harbor", False) in edges
    assert ("t1env.sandbox", "t1env.sandbox.docker", True) in edges  # inside make_sandbox
    assert ("t1env.families", "t1env.families.logs", False) in edges  # `from t1env.families import logs`
    assert any(i.source == "t1train.__main__" and i.target == "t1train.cli" for i in imports())


def test_no_import_cycles():
    edges: dict[str, set[str]] = {m: set() for m in _modules()}
    for i in imports():
        edges[i.source].add(i.target)
    cycles = _cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_module_has_a_layer():
    missing = [
        f"{p.relative_to(ROOT)}: {m} is in no layer of docs/architecture.md (add it to the table)"
        for m, p in _modules().items()
        if layer_of(m) is None
    ]
    assert not missing, "\n".join(missing)


def test_no_module_imports_from_a_higher_layer():
    bad = []
    for i in imports():
        src, dst = layer_of(i.source), layer_of(i.target)
        if src is not None and dst is not None and dst[0] > src[0]:
            bad.append(
                f"{i.path}:{i.line} imports {i.target} (layer {dst[0]} '{dst[1]}' above layer {src[0]} '{src[1]}')"
            )
    assert not bad, "upward imports (docs/architecture.md has the order):\n" + "\n".join(bad)


def test_t1train_does_not_import_the_t1env_cli():
    bad = [
        f"{i.path}:{i.line} imports {i.target} (t1train uses t1env's library modules, never its CLI)"
        for i in imports()
        if i.source.startswith("t1train") and i.target in ("t1env.cli", "t1env.__main__")
    ]
    assert not bad, "\n".join(bad)


def test_imports_inside_functions_say_why():
    """A t1 module imported inside a function carries a comment: the heavy optional package it pulls in, or
    the plug-in it picks. An import there only to dodge a cycle is a layering bug: import at the top."""
    bad = [
        f"{i.path}:{i.line} imports {i.target} inside a function without a comment saying why (import it at "
        "the top, or say which heavy optional package it pulls in)"
        for i in imports()
        if i.in_function and not i.commented
    ]
    assert not bad, "\n".join(bad)


def _all_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
    return set()


def test_no_module_re_exports_a_private_name():
    bad = []
    for path in _modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used, exported = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}, _all_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                name = alias.asname or alias.name
                if name.startswith("_") and not name.startswith("__") and (name not in used or name in exported):
                    bad.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} re-exports {alias.name} from {node.module} "
                        f"(import it from {node.module} where it is used)"
                    )
    assert not bad, "\n".join(bad)
