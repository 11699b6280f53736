"""
The protocol's typed shapes: every event, message, content part, outcome and input model.

Nothing here is written by hand.  The names, and ``__all__``, come from
``aguikit._generated.exports``, which codegen writes from the generated models and the
registry, so this module is the public, stable address of those classes while the
generated modules stay free to change layout, and a class the schema gains is public the
moment it is generated (``tests/test_models.py`` checks every generated class is here).
"""

from ._generated.exports import *  # noqa: F403  (the generated list is the point)
from ._generated.exports import __all__ as __all__
