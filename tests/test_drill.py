"""
The drill: add one event and one field the way ``schema/README.md`` says, to a copy of the
repository, and prove that the suite follows without another edit.

The copy gains ``TOOL_CALL_PROGRESS`` (legal only inside an open tool call, with a
``progress`` bounded to ``[0, 1]``) and an optional ``region`` on ``RUN_STARTED``.  On it:

* codegen refuses to run until ``schema/proto-ledger.txt`` numbers every new protobuf slot
  (the binary transport's field numbers are append-only), naming each;
* until their rows exist, the verifier's table, the chunk normalizer and the applier each
  refuse to import, naming the new event;
* with one verifier row and one ``STAND_ASIDE`` declaration, the new class is exported by
  ``aguikit.models``, validates, parses, round-trips, is checked in a stream, and the
  shared hypothesis strategies generate valid documents of it; the new field does the same
  on ``RUN_STARTED``;
* a consumer's exhaustive ``match`` written before the change stops type-checking, mypy
  naming the new class: the one failure the change must cause, asserted here;
* every test module that reads the event set runs on the copy and passes (below).

What is counted: every file of the copy that differs from the repository is either edited
by hand (counted: at most 4 for the event, 2 for the field) or written by one of the
recipe's commands (codegen, ``aguikit rules --markdown``); a file changed any other way
fails the drill.  A test module that needed an edit to pass would have to be edited here,
so the count holds for the whole suite, not for the recipe in isolation.

Which modules run on the copy (:func:`reads_the_event_set`): every ``tests/test_*.py``
whose source reads a place the set of events or a definition's members comes from, since a
module that reads none cannot see an event or a field appear (the first drill of the whole
suite, run by hand, failed only in modules this rule selects, and in ``test_readme``'s
wheel build, which needs a git checkout rather than an event):

* the registry iterated or measured (``EVENT_CLASSES``, ``DEPRECATED_EVENT_TYPES``,
  ``MESSAGE_CLASSES``, ``SINCE``, ``TAGS``, ``UNIONS``), the union's arms or the enum
  (``Event``, ``EventType``), a module of models listed (``vars(models)``), or the
  official SDK's set (``sdk.EventType``); looking one event up (``EVENT_CLASSES[kind]``)
  or naming ``Event`` in an annotation reads no set;
* the schema (``load_schema``, ``definitions``, a path into ``schema/`` or to the bundled
  ``schema.json``, the protobuf ledger) or the Node oracles (``tests/node``);
* a helper's name that reaches one of those: the fixpoint over ``tests/strategies.py`` and
  ``tests/support.py`` (:data:`HELPERS`) tells the schema-derived strategies
  (``instances``, ``events``...) from the hand-composed stream grammars (``legal_streams``,
  ``conversations``), and the representative tables count whole;
* or a hand-written list of the events: one literal collection or one import naming at
  least a third of the registry's event types or classes.

A module the rule selects runs unless :data:`EXCLUDED` names it with the reason; a test
fails on an exclusion of a module the rule does not select, so neither list goes stale, and
the selection is computed, never listed.  The modules run in one pytest process with the
``drill`` hypothesis profile (five examples), stopping at the first failure: about 150
CPU-seconds for the whole drill, paid by the pure session only (the copy is imported from
its own source in either build, so the compiled session skips it).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from tests import corpus
from tests.support import exhaustive_match

from aguikit._generated.registry import EVENT_CLASSES

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
GENERATE = REPO / "codegen" / "generate.py"

# ---- which modules read the event set ----------------------------------------------------

SET_NAMES: Final = frozenset(
    {
        "EVENT_CLASSES",
        "DEPRECATED_EVENT_TYPES",
        "MESSAGE_CLASSES",
        "SINCE",
        "TAGS",
        "UNIONS",
        "Event",
        "EventType",
    }
)
"""The event set, a definition's members, or the union and enum of every event: imported
from anywhere, or read as an attribute of anything (``registry.EVENT_CLASSES``, the SDK's
``ag_ui_core.EventType``)."""
SCHEMA_NAMES: Final = frozenset({"load_schema", "definitions"})
"""The bundled schema, imported from ``aguikit.validate``."""
TABLE_NAMES: Final = frozenset(
    {"FAMILIES", "representatives", "exhaustive_match", "ALL_MESSAGES", "FULL_RUN_INPUT"}
)
"""``tests.support``'s documents of every event, message role and input member."""
ENUMERATORS: Final = frozenset({"vars", "dir", "getmembers"})
"""Calls that list a module's members (``vars(models)``)."""
SDK: Final = "ag_ui"
"""The official Python SDK: its event set is read through its modules (``sdk.EventType``)."""
SOURCE_PATHS: Final = frozenset({"schema", "schema.json", "proto-ledger.txt", "node"})
"""Path components (``REPO / "schema"``, ``... / "node"``) that reach the schema, the
ledger or the official packages' oracles on disk."""
HAND_LIST: Final = max(2, len(EVENT_CLASSES) // 3)
"""One literal collection or import naming this many event types or classes is the event
set enumerated by hand."""

EXCLUDED: Final[dict[str, str]] = {
    "test_schema_official": "it compares schema/ with the official 1.1 schema.json: an event "
    "or field the official file lacks is an undeclared difference by design, and declaring it "
    "(one Difference row with its reason) is the deliberate extra step for departing from the "
    "normative schema; a protocol version that adds it comes with its own official file "
    "(h23-schema's reason, accepted by the lead)",
    "test_drill": "it is the drill: the copy is already drilled, so its recipe cannot run again",
    "test_prelude": "its hand list is one fixed stream naming most event types (EVERYTHING), "
    "cut after every event; its other streams are composed from named events too, so an "
    "event the schema gains never appears in them, and it is the costliest module here",
    "test_server_http": "it reads the SDK's union only to encode the frames its fixed "
    "handlers write (a text message, a tool call, state) and times real servers' grace "
    "windows, neither of which an added event or field reaches",
}
"""Modules the rule selects that do not run on the copy, each with the reason."""


def _event_names(node: ast.AST) -> set[str]:
    """The event types and event class names ``node`` spells out (literals and names)."""
    classes = {cls.__name__ for cls in EVENT_CLASSES.values()}
    out = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and child.value in EVENT_CLASSES:
            out.add(str(child.value))
        elif isinstance(child, ast.Name) and child.id in classes:
            out.add(child.id)
        elif isinstance(child, ast.Attribute) and child.attr in classes:
            out.add(child.attr)
    return out


def _model_modules(tree: ast.AST) -> set[str]:
    """The names ``tree`` binds to a module of models: aguikit's generated ones, its
    registry, or the official SDK's (``from aguikit._generated import models``,
    ``sdk = pytest.importorskip("ag_ui.core")``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("aguikit", "aguikit._generated"):
            names |= {a.asname or a.name for a in node.names if a.name in ("models", "registry")}
        elif isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name.startswith(SDK)}
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            first = node.value.args[0] if node.value.args else None
            if isinstance(first, ast.Constant) and str(first.value).startswith(SDK):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _annotations(node: ast.AST) -> Iterator[ast.AST]:
    """Every type annotation under ``node``: naming ``Event`` there reads no event."""
    for child in ast.walk(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) and child.returns:
            yield child.returns
        elif isinstance(child, ast.arg | ast.AnnAssign) and child.annotation is not None:
            yield child.annotation


def _reads(node: ast.AST, modules: set[str], imported: set[str]) -> set[str]:
    """What ``node`` reads of the event set without importing it: one of the set's names
    or a helper's that reaches it (``imported``), a module of models listed or read for
    the set (``vars(models)``, ``sdk.EventType``), a path into the schema, or a literal
    collection naming a good part of the events.  Looking one event up
    (``EVENT_CLASSES[kind]``) is not reading the set, and a name a function binds itself
    (a local ``events`` list) is not the helper of that name."""
    found: set[str] = set()
    looked_up = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Subscript)}
    looked_up |= {id(n) for a in _annotations(node) for n in ast.walk(a)}  # not reads
    local: set[str] = set()
    if isinstance(node, ast.FunctionDef):
        local = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        local |= {
            n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
    for child in ast.walk(node):
        if id(child) in looked_up:
            continue
        if isinstance(child, ast.Name) and child.id in imported - local - set(HELPERS):
            found.add(f"uses {child.id}")
        elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            if child.value.id in modules and child.attr in SET_NAMES | {"__dict__"}:
                found.add(f"reads {child.value.id}.{child.attr}")
            helper = HELPERS.get(child.value.id)
            if helper is not None and child.value.id in imported and child.attr in helper:
                found.add(f"uses {child.value.id}.{child.attr}")
        elif isinstance(child, ast.Call) and child.args and isinstance(child.args[0], ast.Name):
            func = child.func
            callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if callee in ENUMERATORS and child.args[0].id in modules:
                found.add(f"lists {child.args[0].id} with {callee}()")
        elif isinstance(child, ast.BinOp) and isinstance(child.op, ast.Div):
            right = child.right
            if isinstance(right, ast.Constant) and right.value in SOURCE_PATHS:
                found.add(f'reads / "{right.value}"')
        elif isinstance(child, ast.List | ast.Tuple | ast.Set | ast.Dict):
            named = _event_names(child)
            if len(named) >= HAND_LIST:
                found.add(f"lists {len(named)} events by hand")
    return found


def _imported(tree: ast.AST) -> set[str]:
    """The names ``tree`` imports that are the event set or reach it: the set's own names,
    the schema's, and each helper module's names that reach it (or the helper whole)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                bound = alias.asname or alias.name
                helper = HELPERS.get(node.module.removeprefix("tests.").removeprefix("tests"))
                of_the_set = alias.name in SET_NAMES | SCHEMA_NAMES
                if (of_the_set and node.module.startswith(("aguikit", "tests"))) or (
                    helper is not None and alias.name in helper
                ):
                    names.add(bound)
                elif node.module == "tests" and alias.name in HELPERS:
                    names.add(bound)  # the helper whole: its reaching names, read as attributes
    return names


def _reaching(path: Path) -> frozenset[str]:
    """The top-level names of a helper module that reach the event set, directly or through
    one another (a fixpoint), so a test using only what does not (a hand-composed stream
    strategy) is not selected for importing the helper."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bodies: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            bodies[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bodies |= {t.id: node for t in targets if isinstance(t, ast.Name)}
    modules = _model_modules(tree)
    reaching = {n for n in _imported(tree) if n in SET_NAMES | SCHEMA_NAMES}
    while True:
        more = {
            n for n, body in bodies.items() if n not in reaching and _reads(body, modules, reaching)
        }
        if not more:
            return frozenset(reaching & set(bodies))
        reaching |= more


HELPERS: dict[str, frozenset[str]] = {}
"""Per test helper module, its top-level names that reach the event set (computed)."""
HELPERS["strategies"] = _reaching(TESTS / "strategies.py")
HELPERS["support"] = _reaching(TESTS / "support.py") | TABLE_NAMES
HELPERS["generator"] = frozenset({"load_generator"})


def _sources(tree: ast.AST) -> set[str]:
    """What in ``tree`` reaches the event set, as short descriptions."""
    classes = {cls.__name__ for cls in EVENT_CLASSES.values()}
    imported = _imported(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            named = {alias.name for alias in node.names} & classes
            if len(named) >= HAND_LIST:
                found.add(f"imports {len(named)} event classes")
    return found | _reads(tree, _model_modules(tree), imported)


def reads_the_event_set(path: Path) -> set[str]:
    """What in the module at ``path`` reads the event set (empty: nothing does)."""
    return _sources(ast.parse(path.read_text(encoding="utf-8")))


def selected() -> dict[str, set[str]]:
    """Every test module the rule selects, with what selects it."""
    out = {}
    for path in sorted(TESTS.glob("test_*.py")):
        found = reads_the_event_set(path)
        if found:
            out[path.stem] = found
    return out


def run_on_the_copy() -> list[str]:
    """The modules the drill runs on its copy: the selected ones, less the exclusions."""
    return [name for name in selected() if name not in EXCLUDED]


def test_every_module_reading_the_event_set_runs_on_the_copy_or_is_excluded_with_a_reason() -> None:
    """The selection is computed; an exclusion names a selected module and says why."""
    chosen = selected()

    assert [] == [name for name in EXCLUDED if name not in chosen]
    assert [] == [name for name, why in EXCLUDED.items() if len(why.split()) < 5]
    assert set(chosen) == set(run_on_the_copy()) | set(EXCLUDED)


REGISTRY: Final = "from aguikit._generated.registry import EVENT_CLASSES\n"
SDK_CORE: Final = "import pytest\nsdk = pytest.importorskip('ag_ui.core')\n"
CLASS_NAMES: Final = [cls.__name__ for cls in EVENT_CLASSES.values()]


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        (REGISTRY + "TYPES = sorted(EVENT_CLASSES)", True),
        (REGISTRY + "cls = EVENT_CLASSES[kind]", False),
        ("from aguikit.models import Event\nARMS = typing.get_args(Event)", True),
        ("from aguikit.models import Event\ndef f(event: Event) -> Event: ...", False),
        ("from aguikit._generated import models\nNAMES = vars(models)", True),
        ("from aguikit._generated import models\nE = models.RunStartedEvent", False),
        (SDK_CORE + "TYPES = {member.value for member in sdk.EventType}", True),
        (SDK_CORE + "E = sdk.RunStartedEvent", False),
        ("from tests import strategies\nS = strategies.instances(C)", True),
        ("from tests.strategies import documents\nS = documents(C)", True),
        ("from tests.strategies import legal_streams\nS = legal_streams()", False),
        ("from tests.support import FAMILIES\nDOCS = list(FAMILIES)", True),
        ("from tests.support import run_started\nE = run_started()", False),
        ("from aguikit.validate import load_schema\nS = load_schema()", True),
        ("LEDGER = REPO / 'schema' / 'proto-ledger.txt'", True),
        ("from aguikit._generated.registry import PROTOCOL_VERSION\nV = PROTOCOL_VERSION", False),
        ("STREAM = [{'type': 'RUN_STARTED'}, {'type': 'RUN_FINISHED'}]", False),
        (f"ALL = {sorted(EVENT_CLASSES)!r}", True),
        (f"from aguikit.models import {', '.join(sorted(CLASS_NAMES))}", True),
    ],
)
def test_the_rule_selects_a_module_by_what_it_reads(source: str, reads: bool) -> None:
    """The registry iterated, the union's arms, a module of models listed, the SDK's event
    set, the schema-derived strategies, the tables, the schema on disk or a hand list select
    a module; one event looked up, an annotation, a hand-composed stream do not."""
    assert reads == bool(_sources(ast.parse(source)))


# ---- the drilled copy --------------------------------------------------------------------

PROGRESS = {
    "$anchor": "ToolCallProgressEvent",
    "description": "How far an open tool call has got, for a progress bar.",
    "type": "object",
    "allOf": [
        {"$ref": "base.json#/$defs/BaseEvent"},
        {"$ref": "base.json#/$defs/Attributable"},
    ],
    "properties": {
        "type": {
            "const": "TOOL_CALL_PROGRESS",
            "description": "Fixed discriminator naming this event; always TOOL_CALL_PROGRESS.",
        },
        "toolCallId": {"type": "string", "description": "The open call this reports on."},
        "progress": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "The fraction done, from 0 to 1.",
        },
    },
    "required": ["type", "toolCallId", "progress"],
    "unevaluatedProperties": False,
}
EVENT_SLOTS = ("base_event", "subagent_run_id", "tool_call_id", "progress")
"""The protobuf fields of ``ToolCallProgressEvent``, as codegen names them."""
REGION = {"type": "string", "description": "Where the run executes, for data residency."}

ROW = """    Row(
        E.TOOL_CALL_PROGRESS,
        effect=Effect.CONTINUES,
        family=Family.TOOL_CALL,
        key="tool_call_id",
        owner=Attribution.AGREE,
        bucket=Bucket.TOOL_CALL,
        rules={"not_open": "AGUI-V014", "owner": _OWN},
    ),
"""
ASIDE = "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {}"
ASIDE_NORMALIZER_ONLY = (
    "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {\n"
    '    "TOOL_CALL_PROGRESS": frozenset({"normalizer"}),\n'
    "}"
)
ASIDE_WITH_ROW = (
    "STAND_ASIDE: Final[Mapping[str, frozenset[Stage]]] = {\n"
    '    "TOOL_CALL_PROGRESS": frozenset({"normalizer", "applier"}),\n'
    "}"
)

COPIED_NOT: Final = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".nox",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "dist",
    "build",
    "results",
    "*.so",
    "*.pyd",
)
"""What a checkout holds that is not the repository's content (caches, environments)."""


CACHES: Final = frozenset(
    {"node_modules", "__pycache__", ".hypothesis", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
"""Directories a run leaves behind (and the linked Node packages): not the repository."""


def _digests(root: Path) -> dict[str, str]:
    """Each file under ``root`` by its content, :data:`CACHES` aside."""
    out = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in CACHES]
        for name in files:
            path = Path(folder, name)
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class Drill:
    """A copy of the repository, and every file of it changed, by hand or by a command."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(REPO, root, ignore=COPIED_NOT)
        modules = TESTS / "node" / "node_modules"
        if modules.is_dir():  # the official packages the Node oracles load, as installed
            (root / "tests" / "node" / "node_modules").symlink_to(modules)
        self.hand_edited: dict[str, set[str]] = {"event": set(), "field": set()}
        self.written_by_commands: set[str] = set()
        self._original = _digests(root)
        self._known = self._original

    def _hand(self, change: str, relative: str) -> None:
        self.hand_edited[change].add(relative)
        self._known = _digests(self.root)

    def edit_json(self, change: str, name: str, edit: Callable[[dict[str, Any]], None]) -> None:
        path = self.root / "schema" / name
        doc = json.loads(path.read_text(encoding="utf-8"))
        edit(doc)
        path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        self._hand(change, f"schema/{name}")

    def edit_source(self, change: str, name: str, old: str, new: str) -> None:
        path = self.root / "src" / "aguikit" / name
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{name} no longer has {old!r}: update the drill"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        self._hand(change, f"src/aguikit/{name}")

    def number(self, change: str, keys: list[str]) -> None:
        """Append each ledger key with the next free number of its message or enum."""
        path = self.root / "schema" / "proto-ledger.txt"
        text = path.read_text(encoding="utf-8")
        taken: dict[str, list[int]] = {}
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, rest = line.partition("=")
                taken.setdefault(key.strip().rpartition(".")[0], []).append(int(rest.split()[0]))
        for key in keys:
            scope = key.rpartition(".")[0]
            number = max(taken.get(scope, [0])) + 1
            taken.setdefault(scope, []).append(number)
            text += f"{key} = {number}\n"
        path.write_text(text, encoding="utf-8")
        self._hand(change, "schema/proto-ledger.txt")

    @property
    def env(self) -> dict[str, str]:
        """The environment in which Python (and mypy) import the copy's package."""
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(self.root / "src"), str(self.root)]),
        }

    def command(self, *args: str, stdout: Path | None = None) -> subprocess.CompletedProcess[str]:
        """One of the recipe's commands, run in the copy; what it writes is not a hand edit."""
        result = subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            env=self.env,
            cwd=self.root,
        )
        if stdout is not None and result.returncode == 0:
            stdout.write_text(result.stdout, encoding="utf-8")
        now = _digests(self.root)
        self.written_by_commands |= {k for k, v in now.items() if self._known.get(k) != v}
        self._known = now
        return result

    def codegen(self) -> subprocess.CompletedProcess[str]:
        """The one command: regenerate the package from the schema (``nox -s codegen``)."""
        return self.command(str(self.root / "codegen" / "generate.py"))

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a fresh interpreter that imports the copy's package."""
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=self.env,
            cwd=self.root,
        )

    def changed(self) -> set[str]:
        """Every file of the copy that differs from the repository's, or is new in it."""
        return {k for k, v in _digests(self.root).items() if self._original.get(k) != v}


def _add_event(doc: dict[str, Any]) -> None:
    doc["$defs"]["ToolCallProgressEvent"] = PROGRESS


def _add_field(doc: dict[str, Any]) -> None:
    doc["$defs"]["RunStartedEvent"]["properties"]["region"] = REGION


CHECK_EVENT = """
    import aguikit
    from aguikit.errors import ProtocolError, SchemaValidationError
    from aguikit.models import ToolCallProgressEvent, EVENT_CLASSES, Event
    import typing

    doc = {"type": "TOOL_CALL_PROGRESS", "toolCallId": "c", "progress": 0.5}
    aguikit.validate_event(doc)
    event = aguikit.parse_event(doc)
    assert type(event) is ToolCallProgressEvent, type(event)
    assert aguikit.to_wire(event) == doc
    assert EVENT_CLASSES["TOOL_CALL_PROGRESS"] is ToolCallProgressEvent
    assert ToolCallProgressEvent in typing.get_args(Event)
    try:
        aguikit.validate_event({**doc, "progress": 2.0})
        raise AssertionError("progress 2.0 accepted")
    except SchemaValidationError as error:
        assert "/progress" in str(error), error

    run = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    call = [
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        doc,
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
    ]
    end = [{"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}]
    session = aguikit.Session()
    session.feed_all(run + call + end)
    session.finish()
    assert [] == session.warnings, session.warnings
    try:
        aguikit.Session().feed_all(run + [doc])
        raise AssertionError("progress outside an open tool call accepted")
    except ProtocolError as error:
        assert "AGUI-V014" == error.rule, error

    from hypothesis import HealthCheck, given, settings
    from tests import strategies

    @settings(max_examples=60, database=None, suppress_health_check=list(HealthCheck))
    @given(strategies.documents(ToolCallProgressEvent))
    def generated_documents_validate(generated):
        aguikit.validate_event(generated)
        assert 0 <= generated["progress"] <= 1

    generated_documents_validate()
    print("event ok")
"""

CHECK_FIELD = """
    import aguikit
    from aguikit.models import RunStartedEvent

    doc = {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "region": "eu"}
    aguikit.validate_event(doc)
    event = aguikit.parse_event(doc)
    assert isinstance(event, RunStartedEvent) and "eu" == event.region
    assert aguikit.to_wire(event) == doc
    session = aguikit.Session()
    session.feed(doc)
    assert [] == session.warnings, session.warnings
    print("field ok")
"""

DRILLED: Final = pytest.mark.build_independent
"""The drilled copy is imported from its own source in either build, so the pure session's run
is the whole proof and the compiled session would only repeat it."""


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drill]:
    """The repository copied and drilled by the recipe, every step checked on the way."""
    pytest.importorskip("datamodel_code_generator", reason="the drill regenerates the models")
    pytest.importorskip("grpc_tools", reason="the drill regenerates the protobuf messages")
    drill = Drill(tmp_path_factory.mktemp("drill") / "repository")
    drill.edit_json("event", "tools.json", _add_event)
    drill.edit_json("field", "lifecycle.json", _add_field)

    unnumbered = drill.codegen()

    # The binary transport's numbers are never derived: codegen names each missing one.
    assert 0 != unnumbered.returncode
    assert "EventType.TOOL_CALL_PROGRESS has no number" in unnumbered.stderr, unnumbered.stderr
    assert "RunStartedEvent.region has no number" in unnumbered.stderr, unnumbered.stderr
    drill.number("event", [f"ToolCallProgressEvent.{name}" for name in EVENT_SLOTS])
    drill.number("event", ["EventType.TOOL_CALL_PROGRESS", "Event.event.tool_call_progress"])
    drill.number("field", ["RunStartedEvent.region"])
    generated = drill.codegen()

    assert 0 == generated.returncode, generated.stdout + generated.stderr
    # Codegen itself lists the new event in the Event union and in EventType.
    assert "ToolCallProgressEvent" in (drill.root / "schema" / "agui.json").read_text("utf-8")
    assert "TOOL_CALL_PROGRESS" in (drill.root / "schema" / "base.json").read_text("utf-8")

    # Until their rows exist, every per-event table refuses to import, naming the event.
    for module, expected in [
        ("aguikit.rules", "event types with no row: TOOL_CALL_PROGRESS (ToolCallProgressEvent)"),
        ("aguikit.chunks", "the chunk normalizer has no entry for ToolCallProgressEvent"),
        ("aguikit._dispatch", None),
        ("aguikit.models", None),
    ]:
        result = drill.python(f"import {module}")
        if expected is None:
            assert 0 == result.returncode, result.stderr
        else:
            assert 0 != result.returncode
            assert expected in result.stderr, result.stderr
    # The rows: one verifier row, and one decision for the normalizer and the applier,
    # made here in two steps to see the applier's own refusal in between.
    drill.edit_source(
        "event",
        "rules.py",
        "    Row(\n        E.TOOL_CALL_END,",
        ROW + "    Row(\n        E.TOOL_CALL_END,",
    )
    drill.edit_source("event", "_dispatch.py", ASIDE, ASIDE_NORMALIZER_ONLY)
    applier = drill.python("import aguikit.apply")

    assert 0 != applier.returncode
    assert "the applier has no entry for ToolCallProgressEvent" in applier.stderr, applier.stderr

    drill.edit_source("event", "_dispatch.py", ASIDE_NORMALIZER_ONLY, ASIDE_WITH_ROW)
    # The rule reference lists the events each rule is reported on: rendered, not edited.
    rules = drill.command(
        "-m", "aguikit", "rules", "--markdown", stdout=drill.root / "docs" / "rules.md"
    )

    assert 0 == rules.returncode, rules.stderr
    yield drill


@pytest.mark.slow
@DRILLED
def test_one_event_and_one_field_take_a_schema_edit_one_command_and_one_row_each(
    drill: Drill,
) -> None:
    """The new event and field work end to end, and every file the change touched is one of
    four (event) or two (field) edited by hand, or written by the recipe's commands."""
    event = drill.python(CHECK_EVENT)
    field = drill.python(CHECK_FIELD)

    assert "event ok" in event.stdout, event.stderr
    assert "field ok" in field.stdout, field.stderr
    assert {
        "schema/tools.json",
        "schema/proto-ledger.txt",
        "src/aguikit/rules.py",
        "src/aguikit/_dispatch.py",
    } == drill.hand_edited["event"]
    assert {"schema/lifecycle.json", "schema/proto-ledger.txt"} == drill.hand_edited["field"]
    hand = drill.hand_edited["event"] | drill.hand_edited["field"]
    assert set() == drill.changed() - hand - drill.written_by_commands
    assert len(drill.hand_edited["event"]) <= 4
    assert len(drill.hand_edited["field"]) <= 2


@pytest.mark.slow
@DRILLED
def test_a_consumers_exhaustive_match_written_before_the_change_names_the_new_event(
    drill: Drill, tmp_path: Path
) -> None:
    """What the closed ``Event`` union promises a downstream consumer: a ``match`` with a
    case per event class as the registry stood before the change (rendered in this process)
    fails ``mypy --strict`` against the drilled package, on ``assert_never``, naming the new
    class, and on nothing else."""
    pytest.importorskip("mypy", reason="mypy is needed for the typing check")
    module = tmp_path / "consumer.py"
    module.write_text(exhaustive_match(EVENT_CLASSES.values()), encoding="utf-8")

    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary"]
    result = subprocess.run(
        [*mypy, "--cache-dir", str(tmp_path / "mypy-cache"), str(module)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=drill.env,
        cwd=tmp_path,
    )

    (error,) = result.stdout.strip().splitlines()
    assert 1 == result.returncode
    assert "assert_never" in error and '"ToolCallProgressEvent"' in error, error


@pytest.mark.slow
@DRILLED
def test_every_module_reading_the_event_set_passes_on_the_drilled_copy(drill: Drill) -> None:
    """The modules :func:`run_on_the_copy` selects, in one pytest process on the copy with
    the ``drill`` hypothesis profile: no test needed an edit for the new event and field."""
    modules = [f"tests/{name}.py" for name in run_on_the_copy()]

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *modules],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
        env={
            **drill.env,
            "HYPOTHESIS_PROFILE": "drill",
            "AGUIKIT_REFERENCE": str(corpus.REFERENCE),
        },
        cwd=drill.root,
    )

    assert 0 == result.returncode, result.stdout[-6000:] + result.stderr[-2000:]


def test_codegen_check_names_an_event_the_lists_do_not_have_yet(tmp_path: Path) -> None:
    """``--check`` (CI) reports the union and enum a family file outgrew, without writing."""
    pytest.importorskip("datamodel_code_generator", reason="codegen renders the models")
    schema = tmp_path / "schema"
    shutil.copytree(REPO / "schema", schema)
    tools = schema / "tools.json"
    doc = json.loads(tools.read_text(encoding="utf-8"))
    _add_event(doc)
    tools.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    before = (schema / "agui.json").read_text("utf-8")

    result = subprocess.run(
        [sys.executable, str(GENERATE), "--check", "--schema", str(schema)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert 1 == result.returncode
    assert "drift: schema/agui.json: the Event union lacks ToolCallProgressEvent" in result.stdout
    assert "drift: schema/base.json: EventType lacks TOOL_CALL_PROGRESS" in result.stdout
    assert before == (schema / "agui.json").read_text("utf-8")
