"""Moved: the action format and its parser are :mod:`t1env.agent.protocol` (one protocol for training, evaluation
and the TRL tool env; ``docs/protocol.md``). This module re-exports them for one release; import them from
``t1env.agent.protocol``.

Example:
    >>> parse_action("done\\nSUBMIT").kind
    'submit'
"""

from t1env.agent.protocol import COMMAND, FORMAT_HELP, NONE, SUBMIT, TRUNCATED_HELP, Action, parse_action

__all__ = ["COMMAND", "FORMAT_HELP", "NONE", "SUBMIT", "TRUNCATED_HELP", "Action", "parse_action"]
