"""
Suite-wide configuration: the hypothesis profiles.

``ci`` (the default) keeps the whole suite to seconds: few examples per property, no
deadline (the first example of a strategy pays for building it, which is not the code under
test).  ``thorough`` is for a nightly or a pre-release run: many examples, still no
deadline.  ``drill`` is the one ``tests/test_drill.py`` runs the event-touching modules
with on its drilled copy: the ``ci`` settings with five examples and no example database
(the copy is thrown away).  ``fuzz`` is the one ``nox -s fuzz`` loads for its long
hostile-input run.  Pick one with ``HYPOTHESIS_PROFILE=thorough``.

A test marked ``build_independent`` proves something the installed build cannot change
(the README's install from a checkout, codegen, mypy over a user's code, the drilled copy
imported from its own source): the compiled session (``AGUIKIT_BUILD=compiled``) deselects
it, since the pure session's run is the whole proof and repeating it would only cost CI
minutes.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("drill", settings.get_profile("ci"), max_examples=5, database=None)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) the ``build_independent`` tests when the compiled build is tested."""
    if os.environ.get("AGUIKIT_BUILD") != "compiled":
        return
    once = [item for item in items if item.get_closest_marker("build_independent")]
    if once:
        config.hook.pytest_deselected(items=once)
        items[:] = [item for item in items if not item.get_closest_marker("build_independent")]
