"""
Tests for the generated models in ``aguikit._generated.models``: the shape users import.

These hold the promises the rest of the library leans on: every model is an attrs class
constructed by keyword only, carries ``extra_members``, is documented from the schema, and
the ``Event`` union is exactly the registry's events, and ``aguikit.models`` exports every
generated name.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any, Final

import attrs
import pytest
from tests import corpus, strategies
from tests.support import exhaustive_match

from aguikit._generated import models
from aguikit._generated.registry import DEPRECATED_EVENT_TYPES, EVENT_CLASSES, PROTOCOL_VERSION
from aguikit.validate import load_schema

CLASSES = sorted(strategies.MODEL_CLASSES.values(), key=lambda c: c.__name__)
SOURCE = ast.parse(inspect.getsource(models))
CLASS_NODES = {
    node.name: node
    for node in SOURCE.body
    if isinstance(node, ast.ClassDef) and node.name in strategies.MODEL_CLASSES
}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_model_is_a_slotted_attrs_class_with_extra_members(cls: type) -> None:
    """attrs (so cattrs can build hooks for it), slotted, with the extras field last."""
    fields = attrs.fields(cls)

    assert attrs.has(cls)
    assert "__slots__" in cls.__dict__
    assert "extra_members" == fields[-1].name
    assert fields[-1].metadata.get("extras") is True
    assert fields[-1].default is None


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_model_is_keyword_only(cls: type) -> None:
    """Positional construction fails: field order is not part of the API."""
    required = [f for f in attrs.fields(cls) if f.default is attrs.NOTHING]

    assert all(f.kw_only for f in attrs.fields(cls))
    with pytest.raises(TypeError):
        cls(*(["x"] * max(1, len(required))))


def test_event_alias_has_every_event_class() -> None:
    """``Event`` is a plain union of exactly the registry's classes, one per event type."""
    members = typing.get_args(models.Event)

    assert len(load_schema()["$defs"]["EventType"]["enum"]) == len(members)
    assert set(EVENT_CLASSES.values()) == set(members)


def test_aguikit_models_exports_every_generated_name() -> None:
    """
    The public module re-exports every top-level name of the generated models (classes,
    enums, aliases) and the registry's facts, so a class the schema gains is public at once.
    """
    import aguikit.models as public

    generated = {
        name
        for node in SOURCE.body
        for name in (
            [node.name]
            if isinstance(node, ast.ClassDef)
            else [
                t.id
                for t in getattr(node, "targets", [getattr(node, "target", None)])
                if isinstance(t, ast.Name)
            ]
        )
        if not name.startswith("_")
    }

    assert set(strategies.MODEL_CLASSES) <= generated
    assert generated | {
        "DEPRECATED_EVENT_TYPES",
        "EVENT_CLASSES",
        "MESSAGE_CLASSES",
        "PROTOCOL_VERSION",
        "SCHEMA_ID",
    } == set(public.__all__)
    assert all(getattr(public, name) is getattr(models, name) for name in generated)


@pytest.mark.parametrize(
    ("alias", "names"),
    [
        (
            models.Message,
            {
                "DeveloperMessage",
                "SystemMessage",
                "AssistantMessage",
                "UserMessage",
                "ToolMessage",
                "ActivityMessage",
                "ReasoningMessage",
            },
        ),
        (models.ContentPart, {"TextPart", "ImagePart", "AudioPart", "VideoPart", "DocumentPart"}),
        (models.PartSource, {"DataSource", "UrlSource", "FileSource"}),
        (
            models.RunFinishedOutcome,
            {
                "RunFinishedSuccessOutcome",
                "RunFinishedInterruptOutcome",
                "RunFinishedCancelledOutcome",
            },
        ),
        (
            models.SubagentFinishedOutcome,
            {"SubagentFinishedSuccessOutcome", "SubagentFinishedSuspendedOutcome"},
        ),
        (
            models.JsonPatchOperation,
            {
                "AddOperation",
                "RemoveOperation",
                "ReplaceOperation",
                "MoveOperation",
                "CopyOperation",
                "TestOperation",
            },
        ),
    ],
    ids=["Message", "ContentPart", "PartSource", "RunFinishedOutcome", "SubagentOutcome", "Patch"],
)
def test_union_aliases_have_the_schema_members(alias: Any, names: set[str]) -> None:
    """Each union alias lists the classes its schema ``oneOf`` lists."""
    assert names == {m.__name__ for m in typing.get_args(alias)}


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_model_and_every_field_has_a_docstring(cls: type) -> None:
    """Schema prose becomes documentation: a class docstring and one per attribute."""
    node = CLASS_NODES[cls.__name__]
    body = node.body
    undocumented = []
    for index, statement in enumerate(body):
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        if statement.target.id.startswith("__"):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        documented = (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
            and following.value.value.strip()
        )
        if not documented:
            undocumented.append(statement.target.id)

    assert (cls.__doc__ or "").strip()
    assert [] == undocumented


@pytest.mark.parametrize("event_type", sorted(EVENT_CLASSES))
def test_an_event_type_discriminator_defaults_to_its_only_value(event_type: str) -> None:
    """``type`` is a one-value Literal whose default is that value, so it is never passed."""
    cls = EVENT_CLASSES[event_type]
    field = attrs.fields_dict(cls)["type"]

    assert typing.Literal[event_type] == typing.get_type_hints(cls)["type"]
    assert event_type == field.default


def test_closed_string_sets_are_str_enums_equal_to_their_wire_strings() -> None:
    """A parsed plain string and the enum member compare equal, so users can use either."""
    plain: list[str] = ["assistant", "tool-call"]

    assert plain == [
        models.TextMessageRole.ASSISTANT,
        models.ReasoningEncryptedValueSubtype.TOOL_CALL,
    ]
    assert len(EVENT_CLASSES) == len(models.EventType)
    assert {"resolved", "cancelled"} == {s.value for s in models.ResumeEntryStatus}


def test_optional_fields_default_to_none_and_required_ones_have_no_default() -> None:
    """``None`` is the single meaning of "unset", which is what ``to_wire`` omits."""
    fields = attrs.fields_dict(models.RunStartedEvent)

    assert attrs.NOTHING is fields["thread_id"].default
    assert None is fields["parent_run_id"].default
    assert None is fields["input"].default


def test_models_are_mutable_values_built_anew_with_evolve() -> None:
    """Not frozen (construction cost), compared by value, evolvable."""
    first = models.TextMessageContentEvent(message_id="m", delta="a")

    second = attrs.evolve(first, delta="b")

    assert models.TextMessageContentEvent(message_id="m", delta="a") == first
    assert "b" == second.delta
    assert first != second


def test_closed_models_are_marked_and_open_patch_operations_are_not() -> None:
    """The closedness marker follows the schema: patch operations are open per RFC 6902."""
    defs = load_schema()["$defs"]

    for cls in CLASSES:
        closed = defs[cls.__name__].get("unevaluatedProperties") is False
        assert closed == getattr(cls, "__wire_closed__", False), cls.__name__


# --------------------------------------------------------------------------- exhaustiveness


def mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on one file, with the package the interpreter imports."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(cache),
            str(path),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for both runs, so the second one only re-checks the small file."""
    pytest.importorskip("mypy", reason="mypy is needed for the typing tests")
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.build_independent
def test_an_exhaustive_match_over_event_type_checks(mypy_cache: Path, tmp_path: Path) -> None:
    """A ``match`` with a case per event class, ending in ``assert_never``, is accepted."""
    module = tmp_path / "exhaustive_match.py"
    module.write_text(exhaustive_match(EVENT_CLASSES.values()), encoding="utf-8")

    result = mypy(module, mypy_cache)

    assert 0 == result.returncode, result.stdout + result.stderr


def test_a_match_missing_one_event_fails_type_checking_naming_the_class(
    mypy_cache: Path, tmp_path: Path
) -> None:
    """One case fewer than the union has: mypy rejects the ``assert_never`` and names the
    class, as it does for a consumer's match when the protocol adds an event."""
    module = tmp_path / "missing_case.py"
    classes = [c for c in EVENT_CLASSES.values() if c is not models.ToolCallArgsEvent]
    module.write_text(exhaustive_match(classes), encoding="utf-8")

    result = mypy(module, mypy_cache)

    assert 1 == result.returncode
    assert "ToolCallArgsEvent" in result.stdout
    assert "assert_never" in result.stdout


# --------------------------------------------------------------------------- counts in prose

ROOT: Final = Path(__file__).resolve().parent.parent
PROSE: Final = (
    "README.md",
    "schema/README.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md") if p.name != "rules.md"),
)
"""Documents written by hand (the changelog is history; ``docs/rules.md`` is rendered)."""
OF_THE_SPEC: Final = re.compile(r"\b(\d+) event types of AG-UI (\d+\.\d+)\b")
RETIRED: Final = re.compile(r"\b(\d+) retired `THINKING_\*` types\b")
ANY_COUNT: Final = re.compile(
    r"\b\d+(?:-way\b| (?:current |deprecated |retired |shared )?event (?:types|classes)\b"
    r"| failed branches\b| members\))"
)
SPEC_SCHEMA: Final = corpus.REFERENCE / "upstream" / "docs" / "spec" / PROTOCOL_VERSION
SPEC_SCHEMA_FILE: Final = SPEC_SCHEMA / "schema.json"


@pytest.mark.parametrize("name", PROSE)
def test_prose_counts_only_what_a_schema_change_cannot_make_stale(name: str) -> None:
    """
    A count of aguikit's own events ("36 event types", "36-way") goes stale the moment the
    schema gains one, and would make adding an event a prose edit: the documents say
    those without a number.  The counts they may state are the specification's ("the 31
    event types of AG-UI 1.1") and the retired types' ("the 5 retired `THINKING_*` types"),
    checked against their sources below.
    """
    text = (ROOT / name).read_text(encoding="utf-8")
    allowed = {m.start() for m in OF_THE_SPEC.finditer(text)} | {
        m.start() for m in RETIRED.finditer(text)
    }

    assert [] == [m.group(0) for m in ANY_COUNT.finditer(text) if m.start() not in allowed]
    assert [len(DEPRECATED_EVENT_TYPES)] * len(RETIRED.findall(text)) == [
        int(n) for n in RETIRED.findall(text)
    ]


def test_the_spec_counts_in_prose_are_the_specifications() -> None:
    """ "The N event types of AG-UI X.Y" is the count of the bundled specification's
    ``EventType`` for the version aguikit speaks, and aguikit defines every one of them."""
    if not SPEC_SCHEMA_FILE.is_file():
        pytest.skip(f"the AG-UI {PROTOCOL_VERSION} specification is not at {SPEC_SCHEMA}")
    spec = json.loads(SPEC_SCHEMA_FILE.read_text(encoding="utf-8"))
    defined = set(spec["$defs"]["EventType"]["enum"])
    stated = [m for name in PROSE for m in OF_THE_SPEC.findall((ROOT / name).read_text("utf-8"))]

    assert stated, "README.md states how many event types AG-UI defines"
    assert [(str(len(defined)), PROTOCOL_VERSION)] * len(stated) == stated
    assert defined <= set(EVENT_CLASSES) - set(DEPRECATED_EVENT_TYPES)
