"""What runs on a sandbox during an episode: the agent's shell session (``shell``), the verifier that turns
the work product into a reward (``verify``) and Harbor multi-step gating (``steps``). Layer 4 in
``docs/architecture.md``: imports only the task, catalogue and sandbox layers and the foundation."""
