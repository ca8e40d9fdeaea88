"""Where episodes' sandboxes run: in this process (the default) or on Ray workers across machines.

An **executor** makes envs: ``executor.make_env(**kwargs)`` returns an object with the Gymnasium API of
``T1Terminal-v0`` (``reset``, ``step``, ``close``), built from the same keyword arguments as
:class:`~t1env.env.TerminalEnv`. Both the rollout runner (``t1train``: ``rollout.executor``) and the evaluation
harness (``t1env eval --ray``) take their envs from one, so the policy stays where it is — the driver's engine or
an SGLang server — and the executor decides only where the shell and the verifier run.

- :class:`InProcessExecutor` builds a :class:`~t1env.env.TerminalEnv` here: today's behaviour.
- :class:`RayExecutor` keeps a pool of :class:`EnvWorker` Ray actors, each holding one unit of the custom resource
  ``sandbox`` (``ray start --resources='{"sandbox": 8}'`` on the nodes that may host sandboxes), so episodes land
  only on sandbox hosts. A worker owns one env (its sandbox lives on the worker's node); per turn only the action
  (a command string or ``{"submit": true}``) goes out and the observation, reward and info dict come back.

Fault tolerance: when a worker dies mid-episode (its process killed, its node lost), the episode is **restarted on
another worker**: ``reset`` with the same seed, then the actions taken so far are replayed, then the pending call is
made; the caller sees one continuous episode. At most ``max_retries`` restarts per episode; beyond that the call
raises :class:`~t1env.sandbox.SandboxError` (the harness records a ``sandbox_error``, the rollout runner an
``error`` episode). ``executor.metrics()`` counts ``workers_lost`` and ``episode_retries``. Each worker closes its
env when the executor closes it; a worker killed outright leaves at most its episode folder (bubblewrap runs with
``--die-with-parent``, Docker containers carry the owner's pid), which ``t1env gc`` on that node removes.

What is not covered: the replay assumes the task's sandbox behaves the same for the same actions (true for the
oracle and for most shell work, not for a command that reads the clock or the network).

Example:
    >>> ex = make_executor()  # in-process
    >>> env = ex.make_env(task="hello-file", prestart=False)
    >>> obs, info = env.reset(seed=0)
    >>> info["task_id"]
    'hello-file'
    >>> env.close(); ex.close()
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
from typing import Any

from t1env.env import TerminalEnv
from t1env.sandbox import SandboxError, local_zygote

EXECUTORS = ("inprocess", "ray")
SANDBOX_RESOURCE = "sandbox"


class InProcessExecutor:
    """Envs in this process: a :class:`~t1env.env.TerminalEnv` per ``make_env`` call."""

    name = "inprocess"

    def __init__(self) -> None:
        # one verifier zygote pool for all its envs (an env per episode would start a zygote per episode)
        self._zygotes = local_zygote.ZygotePool(max_idle=local_zygote.shared_max_idle())

    def make_env(self, **kwargs: Any):
        kwargs.setdefault("zygote_pool", self._zygotes)
        return TerminalEnv(**kwargs)

    def metrics(self) -> dict:
        return {"executor": self.name}

    def close(self) -> None:
        """End the envs' verifier zygotes (close the envs first)."""
        self._zygotes.close()


# ------------------------------------------------------------------------------------------------ Ray side
class EnvWorker:
    """A Ray actor that owns one env at a time; its sandbox lives on the worker's node. Created by RayExecutor."""

    def __init__(self):
        self.env = None
        self._zygotes = None  # ended at the worker's exit (local_zygote's exit handler)
        atexit.register(self.close_env)  # a worker that exits normally leaves no sandbox behind

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        import ray  # the optional ray extra: only the Ray executor needs it

        return ray.get_runtime_context().get_node_id()

    def open(self, kwargs: dict) -> None:
        self.close_env()
        if self._zygotes is None:  # one pool for the worker's envs: an env per episode, the zygotes kept between
            self._zygotes = local_zygote.ZygotePool(max_idle=2)
        self.env = TerminalEnv(**{**kwargs, "zygote_pool": self._zygotes})

    def reset(self, seed, options, replay: list) -> tuple:
        out = self.env.reset(seed=seed, options=options)
        for action in replay:  # a restarted episode: bring the sandbox back to where the lost worker was
            self.env.step(action)
        return out

    def step(self, action) -> tuple:
        return self.env.step(action)

    def close_env(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            env.close()


class RemoteEnv:
    """The driver's handle on an env held by an :class:`EnvWorker`; same API as ``T1Terminal-v0``."""

    def __init__(self, executor: RayExecutor, kwargs: dict):
        self._ex, self._kwargs = executor, dict(kwargs)
        self._kwargs.setdefault("prestart", False)
        self._worker = None
        self._seed = self._options = None
        self._actions: list = []
        self._retries = 0
        self._closed = False
        self._call(lambda w: w.open.remote(self._kwargs), restart=False)

    def _call(self, remote, restart: bool = True):
        import ray  # the optional ray extra: only the Ray executor needs it
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError  # the optional ray extra

        while True:
            if self._worker is None:
                self._worker = self._ex._acquire()
                if restart:  # on a fresh worker: rebuild the episode so far
                    ray.get(self._worker.open.remote(self._kwargs))
                    if self._seed is not None or self._actions:
                        ray.get(self._worker.reset.remote(self._seed, self._options, list(self._actions)))
            try:
                return ray.get(remote(self._worker))
            except (RayActorError, ActorDiedError, ActorUnavailableError) as e:
                self._ex._lost(self._worker)
                self._worker = None
                if self._retries >= self._ex.max_retries:
                    raise SandboxError(
                        f"the Ray worker running this episode died {self._retries + 1} time(s) "
                        f"(max_retries={self._ex.max_retries}): {type(e).__name__}"
                    ) from e
                self._retries += 1
                self._ex._count("episode_retries")
                restart = True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._seed, self._options, self._actions = seed, options, []
        obs, info = self._call(lambda w: w.reset.remote(seed, options, []), restart=False)
        return obs, info

    def step(self, action):
        out = self._call(lambda w: w.step.remote(action))
        self._actions.append(action)
        if self._retries:
            out[4]["executor_retries"] = self._retries
        return out

    @property
    def worker(self):
        """The actor holding this env now (tests kill its process)."""
        return self._worker

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is None:
            return
        import ray  # the optional ray extra: only the Ray executor needs it

        try:
            ray.get(worker.close_env.remote())
        except Exception:  # noqa: BLE001 - a dead worker: the executor replaces it, `t1env gc` cleans its node
            self._ex._lost(worker)
            return
        self._ex._release(worker)


class RayExecutor:
    """Envs on Ray actors that hold one ``sandbox`` resource each. See the module docstring.

    Args:
        address: the cluster to join (``"auto"``: the one ``ray start`` made on this machine; ``None``: the driver
            is already connected, or a local Ray instance is started).
        workers: actors kept in the pool (default: the cluster's total ``sandbox`` resource).
        max_retries: restarts of one episode on another worker after its worker died.
        resource: the custom resource a worker holds one unit of.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = "auto",
        workers: int | None = None,
        max_retries: int = 2,
        resource: str = SANDBOX_RESOURCE,
    ):
        try:
            import ray  # the optional ray extra: only the Ray executor needs it
        except ImportError:
            raise ImportError("the Ray executor needs Ray: pip install 't1[ray]'") from None
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        total = int(ray.cluster_resources().get(resource, 0))
        if total < 1:
            raise ValueError(
                f"no node of the Ray cluster has the {resource!r} resource: start sandbox hosts with "
                f"ray start ... --resources='{{\"{resource}\": N}}'"
            )
        self.workers = workers or total
        self.max_retries = max_retries
        self._actor = ray.remote(EnvWorker).options(num_cpus=0, resources={resource: 1}, max_restarts=0)
        self._idle: queue.Queue = queue.Queue()
        self._all: set = set()
        self._lock = threading.Lock()
        self._stats = {"workers_lost": 0, "episode_retries": 0}
        for _ in range(self.workers):
            self._spawn()

    def _spawn(self) -> None:
        w = self._actor.remote()
        with self._lock:
            self._all.add(w)
        self._idle.put(w)

    def _acquire(self):
        return self._idle.get()

    def _release(self, worker) -> None:
        self._idle.put(worker)

    def _lost(self, worker) -> None:
        """A worker died: count it and start a replacement (Ray places it on a node with a free sandbox slot)."""
        import ray  # the optional ray extra: only the Ray executor needs it

        with self._lock:
            if worker not in self._all:
                return
            self._all.discard(worker)
            self._stats["workers_lost"] += 1
        try:
            ray.kill(worker)
        except Exception:  # noqa: BLE001, S110 - already gone
            pass
        self._spawn()

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def make_env(self, **kwargs: Any) -> RemoteEnv:
        return RemoteEnv(self, kwargs)

    def metrics(self) -> dict:
        with self._lock:
            return {"executor": self.name, "workers": self.workers, **self._stats}

    def close(self) -> None:
        """Close every worker's env, then end the workers."""
        import ray  # the optional ray extra: only the Ray executor needs it

        with self._lock:
            workers, self._all = list(self._all), set()
        for w in workers:
            try:
                ray.get(w.close_env.remote())
            except Exception:  # noqa: BLE001, S110 - a dead worker has nothing left to close
                pass
            ray.kill(w)


def make_executor(kind: str = "inprocess", address: str | None = "auto", **kwargs: Any):
    """``inprocess`` (default) or ``ray`` (``address``: the cluster, ``"auto"`` for the local ``ray start`` one)."""
    if kind == "inprocess":
        return InProcessExecutor()
    if kind == "ray":
        return RayExecutor(address, **kwargs)
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {kind!r}")
