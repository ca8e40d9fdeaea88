"""Sandbox backends. ``local`` (bubblewrap, the default, no Docker needed), ``docker``, and those installed
packages add (:mod:`t1env.sandbox.plugins`: the ``t1env.sandboxes`` entry-point group)."""

from __future__ import annotations

from t1env.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxError
from t1env.sandbox.local import LocalSandbox
from t1env.sandbox.plugins import BUILTIN, load_backend, plugin_names
from t1env.task import Task

BACKENDS = BUILTIN + plugin_names()


def make_sandbox(backend: str, task: Task, *, docker_host: str | None = None, **config_overrides) -> Sandbox:
    """A not-yet-started sandbox of kind ``backend`` configured for ``task``. ``docker_host``: the
    Docker engine's URL for ``backend="docker"`` (default ``$DOCKER_HOST``, else the local socket)."""
    if docker_host is not None and backend != "docker":
        raise ValueError(f"docker_host is for backend='docker', not {backend!r}")
    config = SandboxConfig.from_task(task, **config_overrides)
    if backend == "local" and task.origin is not None and task.origin.local_problem:
        raise SandboxError(task.origin.local_problem)  # an imported task that needs its image
    if backend == "local":
        return LocalSandbox(config)
    if backend == "docker":
        from t1env.sandbox.docker import DockerSandbox  # needs the docker extra (requests, the docker SDK)

        return DockerSandbox(config, task=task, docker_host=docker_host)
    if backend in BACKENDS:
        return load_backend(backend)(config, task=task)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


__all__ = ["BACKENDS", "ExecResult", "Sandbox", "SandboxConfig", "SandboxError", "make_sandbox"]
