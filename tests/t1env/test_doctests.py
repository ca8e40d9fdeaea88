"""The runnable examples in t1env's docstrings stay runnable (the families' build real task packages)."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "t1env.agent.reference",
        "t1env.argtypes",
        "t1env.families",
        "t1env.families.base",
        "t1env.families.chain",
        "t1env.options",
        "t1env.task",
        "t1env.task_model",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
