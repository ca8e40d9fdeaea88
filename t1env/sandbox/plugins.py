"""Sandbox backends from other packages: the ``t1env.sandboxes`` entry-point group.

A remote sandbox (a cloud provider's SDK, Kubernetes, a Docker engine elsewhere) installs as a package of its own
and names its backend in its packaging metadata::

    # the plug-in's pyproject.toml
    [project.entry-points."t1env.sandboxes"]
    mycloud = "t1_mycloud:CloudSandbox"

Then ``--backend mycloud`` (``t1env run``, ``t1env eval``), ``TerminalEnv(backend="mycloud")`` and
``env.backend: mycloud`` (t1train) use it. The entry point is called as ``factory(config, task=task)`` with the
episode's :class:`~t1env.sandbox.base.SandboxConfig` and :class:`~t1env.task.Task` and returns a not-yet-started
:class:`~t1env.sandbox.base.Sandbox`: subclass it and implement its abstract methods (the module docstring of
:mod:`t1env.sandbox.base` gives the lifecycle, ``run_verifier`` the verifier's contract). Built-in names
(``local``, ``docker``) cannot be taken over by a plug-in. Installed plug-ins are read once, when
:mod:`t1env.sandbox` is imported.
"""

from __future__ import annotations

from importlib.metadata import entry_points

GROUP = "t1env.sandboxes"
BUILTIN = ("local", "docker")


def plugin_names() -> tuple[str, ...]:
    """Backend names that installed packages add (sorted; built-in names excluded)."""
    return tuple(sorted({ep.name for ep in entry_points(group=GROUP)} - set(BUILTIN)))


def load_backend(name: str):
    """The factory an installed plug-in registered as ``name``."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            return ep.load()
    raise ValueError(
        f"no sandbox backend {name!r}: built in are {', '.join(BUILTIN)}; a plug-in package adds one "
        f"with an entry point in the {GROUP!r} group (docs/scaling.md)"
    )
