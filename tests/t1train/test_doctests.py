"""The runnable examples in t1train's docstrings stay runnable."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "t1train.models",
        "t1train.tito",
        "t1train.actions",
        "t1train.engines.hf",
        "t1train.storage",
        "t1train.r3",
        "t1train.trainer",
        "t1train.sft",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
