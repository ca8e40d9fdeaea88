"""What an agent says and hears: :mod:`t1env.agent.protocol`, the one agent protocol of every harness (training
rollout, ``t1env eval`` agents, the TRL tool env, the human agent)."""

from t1env.agent.protocol import (
    PROTOCOL_FILE,
    PROTOCOLS,
    TOOLS,
    Action,
    Protocol,
    format_observation,
    parse_action,
    parse_tool_call,
)

__all__ = [
    "PROTOCOLS",
    "PROTOCOL_FILE",
    "TOOLS",
    "Action",
    "Protocol",
    "format_observation",
    "parse_action",
    "parse_tool_call",
]
