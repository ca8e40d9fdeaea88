"""Static lint of a t1-format task's tests: no check may load the agent's code into its own process.

A check that imports the agent's module (``importlib`` on ``/app/x.py``, ``sys.path.insert(0, "/app")``
followed by an import, ``runpy``, ``exec`` of a file's text) runs code the agent wrote inside the process
that reports that check's result. At verification time t1 refuses such loads in t1-format tasks (the
agent-code guard in ``verifiers/run_checks.py``: the check fails, ``info["tamper"]`` says
``agent_code_in_check``); this lint says so before a task ships, naming the file, the line and the fix:
call the agent's code through ``t1check`` (a child process; ``docs/authoring.md``, "Checks that call the
agent's code"). ``t1env validate`` runs it on every t1-format task.

What it flags, in every ``.py`` file under ``tests/`` (found by reading, never by importing):

* ``sys.path`` changes (``insert``, ``append``, ``extend``, assignment, ``+=``) and ``site.addsitedir``
  with a path not derived from ``__file__`` (the tests' own folder is fine);
* loading code from a path: ``importlib.util.spec_from_file_location``, the ``importlib.machinery``
  file loaders, ``runpy.run_path``/``run_module``, ``imp.load_source``, ``ctypes.CDLL`` — unless the
  path is derived from ``__file__``;
* ``exec``/``eval``/``compile`` of anything but a string literal, ``__import__`` and
  ``importlib.import_module`` of anything but a literal name;
* ``import X`` / ``from X import ...`` (also ``import_module("X")``) where ``X`` is a module the task's
  ``environment/`` ships (``X.py`` or a package ``X/``) and the tests do not.

Imported Terminal-Bench / Harbor tasks are not linted: their tests are upstream's, and t1 records at
run time which of their checks ran agent code (``info["checks_trusting_agent_code"]``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from t1env.task import Task

FIX = (
    "the agent's code would run in the check's process: call it in a child process with t1check "
    '(docs/authoring.md, "Checks that call the agent\'s code")'
)

_PATH_LOADERS = {
    "spec_from_file_location",
    "SourceFileLoader",
    "SourcelessFileLoader",
    "ExtensionFileLoader",
    "run_path",
    "run_module",
    "load_source",
    "load_compiled",
    "load_dynamic",
    "CDLL",
    "LoadLibrary",
    "addsitedir",
}
_CODE_RUNNERS = {"exec", "eval", "compile"}
_IMPORTERS = {"__import__", "import_module"}
_PATH_EDITS = {"insert", "append", "extend"}


def agent_code_problems(task: Task) -> list[str]:
    """One line per place in the task's tests that would load the agent's code in a check's process."""
    if task.origin is not None or not task.tests_dir.is_dir():
        return []
    shipped = _module_names(task.env_dir) - _module_names(task.tests_dir)
    problems: list[str] = []
    for f in sorted(task.tests_dir.rglob("*.py")):
        try:
            tree = ast.parse(f.read_bytes(), filename=str(f))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # declared_checks() and pytest report a test file that does not parse
        rel = f.relative_to(task.path).as_posix()
        problems += [f"{rel}:{line}: {what}: {FIX}" for line, what in _scan(tree, shipped)]
    return problems


def _module_names(folder: Path) -> set[str]:
    """Top-level module names a folder provides when it is on sys.path: ``x.py``, ``x/`` (a package)."""
    if not folder.is_dir():
        return set()
    names = {p.stem for p in folder.glob("*.py")} | {p.stem for p in folder.glob("*.so")}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    return names


def _scan(tree: ast.AST, shipped: set[str]) -> list[tuple[int, str]]:
    here = _file_derived_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in shipped:
                    found.append((node.lineno, f"import {alias.name} (a module of the task's environment/)"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in shipped:
                found.append((node.lineno, f"from {node.module} import ... (a module of the task's environment/)"))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)) for t in targets):
                if not _mentions_file(node.value, here):
                    found.append((node.lineno, "sys.path changed to a folder other than the tests'"))
        elif isinstance(node, ast.Call):
            what = _call_problem(node, shipped, here)
            if what:
                found.append((node.lineno, what))
    return sorted(set(found))


def _call_problem(node: ast.Call, shipped: set[str], here: set[str]) -> str | None:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    first = node.args[0] if node.args else None
    if isinstance(func, ast.Attribute) and name in _PATH_EDITS and _is_sys_path(func.value):
        if not any(_mentions_file(a, here) for a in node.args):
            return f"sys.path.{name}() of a folder other than the tests'"
        return None
    if name in ("CDLL", "LoadLibrary") and (
        first is None
        or _literal_str(first)
        and not first.value.startswith("/")
        or isinstance(first, ast.Constant)
        and first.value is None
    ):
        return None  # a library by name from the system's folders (or the process itself: CDLL(None))
    if name == "run_module" and first is not None and _literal_str(first) and first.value.split(".")[0] not in shipped:
        return None
    if name in _PATH_LOADERS:
        if not any(_mentions_file(a, here) for a in [*node.args, *(k.value for k in node.keywords)]):
            return f"{name}() loads code from a path that is not the tests' own"
        return None
    if name in _CODE_RUNNERS and isinstance(func, ast.Name):
        if first is not None and not _literal_str(first):
            return f"{name}() of code that is not a string literal"
        return None
    if name in _IMPORTERS:
        if first is None or not _literal_str(first):
            return f"{name}() of a module name that is not a literal"
        if first.value.split(".")[0] in shipped:
            return f"{name}({first.value!r}) (a module of the task's environment/)"
    return None


def _is_sys_path(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def _mentions_file(node: ast.AST, here: set[str]) -> bool:
    """Whether an expression is built from ``__file__`` (a path of the tests' own folder), directly or
    through a name assigned from it (``HERE = Path(__file__).parent``)."""
    return any(isinstance(n, ast.Name) and (n.id == "__file__" or n.id in here) for n in ast.walk(node))


def _file_derived_names(tree: ast.AST) -> set[str]:
    """Names assigned (anywhere in the file) from an expression built from ``__file__``, to a fixed point."""
    assigns = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
    names: set[str] = set()
    while True:
        more = {
            t.id
            for a in assigns
            if _mentions_file(a.value, names)
            for t in (a.targets if isinstance(a, ast.Assign) else [a.target])
            if isinstance(t, ast.Name)
        }
        if more <= names:
            return names
        names |= more


def _literal_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)
