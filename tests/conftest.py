"""
Suite-wide configuration: the hypothesis profiles.

``ci`` (the default) keeps the whole suite to seconds: few examples per property, no
deadline (the first example of a strategy pays for building it, which is not the code under
test).  ``thorough`` is for a nightly or a pre-release run: many examples, still no
deadline.  ``drill`` is the one ``tests/test_drill.py`` runs the event-touching modules
with on its drilled copy: the ``ci`` settings with five examples and no example database
(the copy is thrown away).  ``fuzz`` is the one ``nox -s fuzz`` loads for its long
hostile-input run.  Pick one with ``HYPOTHESIS_PROFILE=thorough``.
"""

from __future__ import annotations

import os

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
