"""The runnable examples in t1env.eval's docstrings stay runnable (the harness's runs a real sandbox)."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "t1env.eval.results",
        "t1env.eval.recording",
        "t1env.eval.agents",
        "t1env.eval.openai_agent",
        "t1env.eval.harness",
    ],
)
def test_docstring_examples(module):
    if module == "t1env.eval.openai_agent":
        pytest.importorskip("openai")
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
