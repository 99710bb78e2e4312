"""Property tests in two sizes, from one body: a few examples in the default run (README's
`python3 -m pytest`, which leaves out tests marked slow: pyproject.toml's addopts) and many in
the slow run (`python3 -m pytest -m slow`; `.ci/run` runs both).

    @quick_and_full(4, 40, st.data())
    def test_joint_equals_exhaustive(data): ...

defines `test_joint_equals_exhaustive` (4 examples) and, in the same module,
`test_joint_equals_exhaustive_full` (40, marked slow). Both draw from the same strategies, so
the default run checks every behaviour the full one does, on fewer draws. The quick one is
derandomized (the same draws every run: its time is steady and a failure repeats); the full
one draws afresh each run and keeps what fails in hypothesis's database.
"""
from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings


def quick_and_full(quick: int, full: int, *given_args, hypothesis_settings: dict | None = None, **given_kwargs):
    """`hypothesis_settings`: more settings for both (deadline None unless given). A
    `pytest.mark.parametrize` goes below this decorator (on the body), so both get it."""
    options = {"deadline": None, **(hypothesis_settings or {})}

    def decorate(body):
        def build(examples: int, derandomize: bool):
            chosen = {"derandomize": derandomize, **options}
            return settings(max_examples=examples, **chosen)(given(*given_args, **given_kwargs)(body))
        module = sys.modules[body.__module__]
        setattr(module, body.__name__ + "_full", pytest.mark.slow(build(full, derandomize=False)))
        return build(quick, derandomize=True)
    return decorate
