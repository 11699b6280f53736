"""
``codegen/generate.py`` loaded as a module, for tests that call its functions directly.

It is a script, not a package module, so it is loaded from its path; its heavy dependency
(datamodel-code-generator) is imported only when models are rendered, so the bundler and
the schema lint work without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

GENERATE = Path(__file__).resolve().parent.parent / "codegen" / "generate.py"


def load_generator(name: str = "aguikit_codegen_generate") -> Any:
    """A fresh module object for ``codegen/generate.py``."""
    spec = importlib.util.spec_from_file_location(name, GENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
