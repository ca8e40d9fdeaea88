"""Tools over the environment: ``t1env validate`` and its gates (``validate``, ``exploits``, ``checks_lint``,
``setup_leftovers``), decontamination (``decontam``), export (``export``), the task catalogue page
(``catalog``) and the leak counters (``leaks``). Layer 7 in ``docs/architecture.md``, next to ``t1env.eval``."""
