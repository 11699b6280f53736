"""Tests for :mod:`aguikit.apply`: folding events into messages, state and the rest."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from aguikit.apply import Applier, ChangeKind, SubagentStatus, What, apply_patch
from aguikit.chunks import normalize_all
from aguikit.errors import PatchError, StageOrderError, WireFormatError
from aguikit.models import (
    ActivityDeltaEvent,
    ActivityMessage,
    ActivitySnapshotEvent,
    AddOperation,
    AssistantMessage,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RemoveOperation,
    ReplaceOperation,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from aguikit.receiver import Receiver
from aguikit.wire import to_wire


def applied(*events: Any, **kwargs: Any) -> Applier:
    applier = Applier(**kwargs)
    for event in events:
        applier.apply(event)
    return applier


def wire(applier: Applier) -> list[dict[str, Any]]:
    return [to_wire(m) for m in applier.messages]


def test_deltas_assemble_one_message_in_arrival_order() -> None:
    """Start, content, content, end: one assistant message with the text concatenated."""
    applier = applied(
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta="Hello, "),
        TextMessageContentEvent(message_id="m1", delta="world"),
        TextMessageEndEvent(message_id="m1"),
    )

    assert [{"id": "m1", "role": "assistant", "content": "Hello, world"}] == wire(applier)
    assert "Hello, world" == applier.text_of("m1")


@pytest.mark.parametrize("role", ["user", "system", "developer", "assistant"])
def test_a_text_message_takes_the_role_its_start_names(role: str) -> None:
    """Every streamable role materialises as its own message class."""
    applier = applied(
        TextMessageStartEvent(message_id="m1", role=role, name="n"),
        TextMessageContentEvent(message_id="m1", delta="x"),
    )

    assert {"id": "m1", "role": role, "content": "x", "name": "n"} == wire(applier)[0]


def test_apply_reports_the_row_that_changed() -> None:
    """Changed names the message id, its index and the appended delta."""
    applier = applied(TextMessageStartEvent(message_id="a"), TextMessageStartEvent(message_id="b"))

    changed = applier.apply(TextMessageContentEvent(message_id="b", delta="hi"))

    assert (What.MESSAGES, ChangeKind.CONTENT, "b", 1, "hi") == (
        changed.what,
        changed.kind,
        changed.message_id,
        changed.index,
        changed.delta,
    )
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        changed.index = 3  # type: ignore[misc]


def test_an_orphan_content_event_opens_the_message_it_names() -> None:
    """Tolerant: a half-drawn conversation beats a blank one."""
    applier = applied(TextMessageContentEvent(message_id="m9", delta="orphan"))

    assert [{"id": "m9", "role": "assistant", "content": "orphan"}] == wire(applier)


def test_reopening_a_closed_message_appends_to_it() -> None:
    """A closed message is closed, not sealed."""
    applier = applied(
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta="First."),
        TextMessageEndEvent(message_id="m1"),
        TextMessageStartEvent(message_id="m1"),
        TextMessageContentEvent(message_id="m1", delta=" Second."),
    )

    assert "First. Second." == applier.text_of("m1")
    assert 1 == len(applier.messages)


def test_parallel_tool_calls_attach_to_their_parent_message() -> None:
    """Interleaved argument fragments are separated by tool call id."""
    applier = applied(
        TextMessageStartEvent(message_id="m1"),
        ToolCallStartEvent(tool_call_id="a", tool_call_name="f", parent_message_id="m1"),
        ToolCallStartEvent(tool_call_id="b", tool_call_name="g", parent_message_id="m1"),
        ToolCallArgsEvent(tool_call_id="a", delta='{"x":'),
        ToolCallArgsEvent(tool_call_id="b", delta="{}"),
        ToolCallArgsEvent(tool_call_id="a", delta="1}"),
        ToolCallEndEvent(tool_call_id="a"),
    )

    (message,) = wire(applier)
    assert [("a", "f", '{"x":1}'), ("b", "g", "{}")] == [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["toolCalls"]
    ]


def test_a_tool_call_without_a_parent_gets_a_message_of_its_own() -> None:
    """Named for the call, and attributed like the call."""
    applier = applied(
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", subagent_run_id="s")
    )

    message = applier.message("c1")
    assert isinstance(message, AssistantMessage)
    assert ("s", ["c1"]) == (message.subagent_run_id, [c.id for c in message.tool_calls or []])


def test_a_tool_result_is_placed_right_after_the_message_that_made_the_call() -> None:
    """Providers require the result to follow its call, even when text came in between."""
    applier = applied(
        ToolCallStartEvent(tool_call_id="c1", tool_call_name="f", parent_message_id="a1"),
        ToolCallEndEvent(tool_call_id="c1"),
        TextMessageStartEvent(message_id="a2"),
        TextMessageContentEvent(message_id="a2", delta="meanwhile"),
        ToolCallResultEvent(message_id="t1", tool_call_id="c1", content="42"),
    )

    assert ["a1", "t1", "a2"] == [m.id for m in applier.messages]
    assert "meanwhile" == applier.text_of("a2")
    assert {"id": "t1", "role": "tool", "content": "42", "toolCallId": "c1"} == wire(applier)[1]


def test_tool_call_metadata_lands_on_the_call_and_merges_last_write_wins() -> None:
    """Not on the assistant message that owns it."""
    applier = applied(
        ToolCallStartEvent(
            tool_call_id="c1", tool_call_name="f", parent_message_id="m", metadata={"a": 1}
        ),
        ToolCallArgsEvent(tool_call_id="c1", delta="{}", metadata={"b": 2}),
        ToolCallEndEvent(tool_call_id="c1", metadata={"a": 3}),
    )

    message = wire(applier)[0]
    assert "metadata" not in message
    assert {"a": 3, "b": 2} == message["toolCalls"][0]["metadata"]


def test_message_metadata_merges_key_by_key_without_recursing() -> None:
    """An array value is replaced whole, never merged element-wise."""
    applier = applied(
        TextMessageStartEvent(message_id="m", metadata={"a": 1, "trace": ["one", "two"]}),
        TextMessageContentEvent(message_id="m", delta="x", metadata={"trace": ["three"]}),
        TextMessageEndEvent(message_id="m", metadata={"n": None}),
    )

    assert {"a": 1, "trace": ["three"], "n": None} == wire(applier)[0]["metadata"]


@pytest.mark.parametrize("snapshot", [0, None, False, [], "text", {"a": 1}])
def test_a_state_snapshot_replaces_the_state_whatever_json_it_is(snapshot: Any) -> None:
    """Falsy and null snapshots replace too: absent is not the same as null."""
    applier = applied(
        StateSnapshotEvent(snapshot={"old": True}), StateSnapshotEvent(snapshot=snapshot)
    )

    assert snapshot == applier.state


def test_a_state_delta_applies_its_operations_in_order() -> None:
    """RFC 6902 on the current state."""
    applier = applied(
        StateSnapshotEvent(snapshot={"plan": {"status": "open", "steps": ["a"]}}),
        StateDeltaEvent(
            delta=[
                AddOperation(path="/plan/steps/-", value="b"),
                ReplaceOperation(path="/plan/status", value="closed"),
            ]
        ),
    )

    assert {"plan": {"status": "closed", "steps": ["a", "b"]}} == applier.state


def test_a_state_delta_that_fails_leaves_the_state_exactly_as_it_was() -> None:
    """Atomic: the first operation is undone, and the error names the failing one."""
    applier = applied(StateSnapshotEvent(snapshot={"plan": {"status": "open"}}))

    with pytest.raises(PatchError) as caught:
        applier.apply(
            StateDeltaEvent(
                delta=[
                    ReplaceOperation(path="/plan/status", value="closed"),
                    ReplaceOperation(path="/absent/deeper", value=1),
                ]
            )
        )
    assert {"plan": {"status": "open"}} == applier.state
    assert (1, "/absent/deeper", "state") == (
        caught.value.op_index,
        caught.value.pointer,
        caught.value.target,
    )
    assert "{" not in caught.value.reason  # the document is not pasted into the reason


def test_state_never_shares_values_with_the_events_that_built_it() -> None:
    """Patching the state does not reach back into a delivered snapshot or delta."""
    snapshot = StateSnapshotEvent(snapshot={"items": []})
    value = {"deep": []}
    applier = applied(snapshot, StateDeltaEvent(delta=[AddOperation(path="/items/-", value=value)]))
    applier.apply(StateDeltaEvent(delta=[AddOperation(path="/items/0/deep/-", value=1)]))

    assert {"items": []} == snapshot.snapshot
    assert {"deep": []} == value


def test_apply_patch_accepts_wire_dicts_and_replaces_the_root() -> None:
    """A whole-document operation returns the new document."""
    assert 7 == apply_patch({"a": 1}, [{"op": "replace", "path": "", "value": 7}])


def test_an_activity_snapshot_creates_and_a_delta_patches_it() -> None:
    """The activity is a message of its own role."""
    applier = applied(
        ActivitySnapshotEvent(message_id="a", activity_type="search", content={"found": 0}),
        ActivityDeltaEvent(
            message_id="a",
            activity_type="search",
            patch=[ReplaceOperation(path="/found", value=3)],
        ),
    )

    assert [
        {"id": "a", "role": "activity", "activityType": "search", "content": {"found": 3}}
    ] == wire(applier)


def test_an_activity_snapshot_with_replace_false_leaves_an_existing_activity_as_it_is() -> None:
    """Content and activityType both stay, per the corpus (not an RFC 7396 merge)."""
    applier = applied(
        ActivitySnapshotEvent(message_id="a", activity_type="web", content={"q": "ag-ui"}),
        ActivitySnapshotEvent(
            message_id="a", activity_type="file", content={"q": "else", "n": 9}, replace=False
        ),
    )

    assert {"activityType": "web", "content": {"q": "ag-ui"}} == {
        k: wire(applier)[0][k] for k in ("activityType", "content")
    }


def test_an_activity_delta_that_would_leave_a_non_object_is_refused() -> None:
    """Activity content is an object by definition; the activity keeps what it had."""
    applier = applied(ActivitySnapshotEvent(message_id="a", activity_type="t", content={"k": 1}))

    with pytest.raises(PatchError, match="not an object"):
        applier.apply(
            ActivityDeltaEvent(
                message_id="a",
                activity_type="t",
                patch=[ReplaceOperation(path="", value=7)],
            )
        )
    message = applier.message("a")
    assert isinstance(message, ActivityMessage)
    assert {"k": 1} == message.content


def test_an_activity_delta_for_an_unknown_activity_is_skipped_with_a_warning() -> None:
    """It invents no message."""
    warnings: list[tuple[str, str]] = []
    applier = Applier(on_warning=lambda code, message: warnings.append((code, message)))

    changed = applier.apply(ActivityDeltaEvent(message_id="ghost", activity_type="t", patch=[]))

    assert (What.NOTHING, []) == (changed.what, applier.messages)
    assert "activity-missing" == warnings[0][0]
    assert "ghost" in warnings[0][1]


def test_reasoning_messages_join_the_transcript_and_spans_do_not() -> None:
    """A span brackets; the message inside it is a reasoning-role message in order."""
    applier = applied(
        ReasoningStartEvent(message_id="span"),
        ReasoningMessageStartEvent(message_id="r1"),
        ReasoningMessageContentEvent(message_id="r1", delta="weighing"),
        ReasoningMessageEndEvent(message_id="r1"),
        ReasoningEndEvent(message_id="span"),
        TextMessageStartEvent(message_id="a1"),
    )

    assert [("r1", "reasoning"), ("a1", "assistant")] == [(m.id, m.role) for m in applier.messages]
    assert ["r1"] == [m.id for m in applier.reasoning]
    assert "weighing" == applier.text_of("r1")


def test_a_thought_reports_started_and_ended_once_however_many_brackets() -> None:
    """REASONING_START and REASONING_MESSAGE_START under one id are one start."""
    applier = Applier()
    kinds = [
        applier.apply(event).kind
        for event in (
            ReasoningStartEvent(message_id="r"),
            ReasoningMessageStartEvent(message_id="r"),
            ReasoningMessageEndEvent(message_id="r"),
            ReasoningEndEvent(message_id="r"),
        )
    ]

    assert [ChangeKind.STARTED, ChangeKind.UPDATED, ChangeKind.ENDED, ChangeKind.NONE] == kinds


def test_the_deprecated_thinking_family_becomes_reasoning_with_the_receivers_minted_ids(
    thinking: list[Any],
) -> None:
    """THINKING_* carry no ids; the receiver translates them and mints one, once, for all."""
    receiver = Receiver()
    applier = applied(*(receiver.receive(event) for event in thinking))

    (message,) = applier.messages
    assert ("reasoning", "Let me check.", "thinking-message-2") == (
        message.role,
        message.content,
        message.id,
    )


def test_a_bare_applier_refuses_a_deprecated_event_naming_the_receiver(
    thinking: list[Any],
) -> None:
    """No second translation: the applier says which stage should have run, and changes nothing."""
    applier = Applier()

    with pytest.raises(StageOrderError) as info:
        applier.apply(thinking[0])

    assert ("AGUI-V094", "aguikit.receiver.Receiver") == (info.value.rule, info.value.stage)
    assert [] == applier.messages


@pytest.fixture
def thinking() -> list[Any]:
    from aguikit._deprecation import constructing_from_wire
    from aguikit.models import (
        ThinkingEndEvent,
        ThinkingStartEvent,
        ThinkingTextMessageContentEvent,
        ThinkingTextMessageEndEvent,
        ThinkingTextMessageStartEvent,
    )

    with constructing_from_wire():
        return [
            ThinkingStartEvent(),
            ThinkingTextMessageStartEvent(),
            ThinkingTextMessageContentEvent(delta="Let me check."),
            ThinkingTextMessageEndEvent(),
            ThinkingEndEvent(),
        ]


def test_encrypted_values_attach_to_messages_and_tool_calls_and_unknown_ones_warn() -> None:
    """An entity the consumer does not know is tolerated, not an error, and dropped with a
    warning (the reasoning page: "a consumer SHOULD warn and MAY drop it"); an activity
    message, which holds no encrypted value, counts as unknown."""
    warned: list[str] = []
    applier = Applier(on_warning=lambda symbol, message: warned.append(message))
    for event in (
        ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="m"),
        ReasoningEncryptedValueEvent(subtype="tool-call", entity_id="c", encrypted_value="T"),
        ReasoningEncryptedValueEvent(subtype="message", entity_id="m", encrypted_value="M"),
        ActivitySnapshotEvent(message_id="a", activity_type="search", content={}),
    ):
        applier.apply(event)
    changed = [
        applier.apply(
            ReasoningEncryptedValueEvent(subtype=kind, entity_id=entity, encrypted_value="x")
        )
        for kind, entity in (("message", "nobody"), ("tool-call", "nocall"), ("message", "a"))
    ]

    message = wire(applier)[0]
    assert ("M", "T") == (message["encryptedValue"], message["toolCalls"][0]["encryptedValue"])
    assert {What.NOTHING} == {change.what for change in changed}
    assert ["nobody", "nocall", "a"] == [text.split("'")[1] for text in warned]
    assert "encryptedValue" not in wire(applier)[1]


def test_a_run_error_abandons_the_subagents_still_running() -> None:
    """RUN_ERROR ends everything: an invocation still running will get no closing event,
    and is marked abandoned (the subagents page: "A consumer MUST treat every open
    invocation as abandoned when a run errors"); one that closed keeps its outcome."""
    applier = applied(
        SubagentStartedEvent(subagent_run_id="s1", name="a"),
        SubagentStartedEvent(subagent_run_id="s2", name="b"),
        SubagentFinishedEvent(subagent_run_id="s2"),
        RunErrorEvent(message="out of budget"),
    )

    assert [SubagentStatus.ABANDONED, SubagentStatus.FINISHED] == [
        subagent.status for subagent in applier.subagents
    ]


def test_subagents_run_suspend_resume_and_fail() -> None:
    """A suspended invocation announced again is a resumption, not a second subagent."""
    applier = Applier()
    kinds = [
        applier.apply(event).kind
        for event in (
            SubagentStartedEvent(subagent_run_id="s1", name="researcher"),
            SubagentFinishedEvent(
                subagent_run_id="s1",
                outcome=SubagentFinishedSuspendedOutcome(interrupt_ids=["i1"]),
            ),
            SubagentStartedEvent(subagent_run_id="s1", name="researcher"),
            SubagentErrorEvent(subagent_run_id="s1", message="gave up", code="E"),
            SubagentFinishedEvent(subagent_run_id="s2"),
        )
    ]

    assert [
        ChangeKind.STARTED,
        ChangeKind.SUSPENDED,
        ChangeKind.RESUMED,
        ChangeKind.FAILED,
        ChangeKind.FINISHED,
    ] == kinds
    first, second = applier.subagents
    assert (SubagentStatus.FAILED, "gave up", ("i1",)) == (
        first.status,
        first.error_message,
        first.interrupt_ids,
    )
    assert (SubagentStatus.FINISHED, "s2") == (second.status, second.name)


def test_interrupts_come_from_the_last_run_finished_and_clear_on_the_next_run() -> None:
    """Thread and run ids follow RUN_STARTED."""
    interrupt = Interrupt(id="i1", reason="approval")
    applier = applied(
        RunStartedEvent(thread_id="t", run_id="r1"),
        RunFinishedEvent(
            thread_id="t", run_id="r1", outcome=RunFinishedInterruptOutcome(interrupts=[interrupt])
        ),
    )
    assert (["i1"], "t", "r1") == (
        [i.id for i in applier.interrupts],
        applier.thread_id,
        applier.run_id,
    )

    applier.apply(RunStartedEvent(thread_id="t", run_id="r2"))

    assert ([], "r2") == (applier.interrupts, applier.run_id)


def test_a_messages_snapshot_is_an_edit_by_id_not_a_replacement() -> None:
    """Local order wins, omitted messages go, new ones append, local activity survives."""
    applier = applied(
        TextMessageStartEvent(message_id="a"),
        TextMessageContentEvent(message_id="a", delta="draft"),
        TextMessageStartEvent(message_id="b"),
        ActivitySnapshotEvent(message_id="act", activity_type="t", content={}),
        MessagesSnapshotEvent(
            messages=[
                UserMessage(id="new", content="hi"),
                AssistantMessage(id="a", content="corrected"),
            ]
        ),
    )

    assert ["a", "act", "new"] == [m.id for m in applier.messages]
    assert "corrected" == applier.text_of("a")
    applier.apply(TextMessageContentEvent(message_id="a", delta="!"))
    assert "corrected!" == applier.text_of("a")


def test_a_messages_snapshot_carrying_activity_declares_the_whole_activity_set() -> None:
    """An activity missing from such a snapshot was deleted."""
    applier = applied(
        ActivitySnapshotEvent(message_id="old", activity_type="t", content={}),
        MessagesSnapshotEvent(
            messages=[ActivityMessage(id="new", activity_type="t", content={"n": 1})]
        ),
    )

    assert ["new"] == [m.id for m in applier.messages]


def test_streaming_into_an_adopted_message_does_not_change_the_event_it_came_from() -> None:
    """Snapshot messages are copied on the way in."""
    original = AssistantMessage(id="a", content="x")
    applier = applied(
        MessagesSnapshotEvent(messages=[original]),
        ToolCallStartEvent(tool_call_id="c", tool_call_name="f", parent_message_id="a"),
        TextMessageContentEvent(message_id="a", delta="y"),
    )

    assert ("x", None) == (original.content, original.tool_calls)
    assert "xy" == applier.text_of("a")


def test_multimodal_user_content_keeps_its_parts_and_appends_text() -> None:
    """Text streamed into a parts message extends its last text part."""
    applier = Applier(messages=[UserMessage(id="u", content=[TextPart(text="look")])])
    applier.apply(TextMessageContentEvent(message_id="u", delta=" here"))

    assert [{"type": "text", "text": "look here"}] == wire(applier)[0]["content"]
    assert "look here" == applier.text_of("u")


def test_a_tool_result_with_parts_keeps_them_unchanged() -> None:
    """Content parts are carried through as parts."""
    parts = [TextPart(text="attached")]
    applier = applied(ToolCallResultEvent(message_id="t", tool_call_id="c", content=parts))

    assert [{"type": "text", "text": "attached"}] == wire(applier)[0]["content"]


def test_chunks_expanded_by_the_normalizer_assemble_in_the_applier() -> None:
    """The normalizer expands chunks once, before the applier, which folds the result."""
    applier = applied(
        *normalize_all(
            [
                TextMessageChunkEvent(message_id="m", delta="Hel"),
                TextMessageChunkEvent(delta="lo"),
            ]
        )
    )

    assert "Hello" == applier.text_of("m")


@pytest.mark.parametrize(
    "chunk",
    [
        TextMessageChunkEvent(message_id="m", delta="Hel"),
        ToolCallChunkEvent(tool_call_id="c", tool_call_name="f", delta="{}"),
        ReasoningMessageChunkEvent(message_id="r", delta="hmm"),
    ],
    ids=lambda e: str(e.type),
)
def test_a_bare_applier_refuses_a_chunk_naming_the_normalizer(chunk: Any) -> None:
    """No private second normalizer: a chunk is a StageOrderError, and nothing changes."""
    applier = Applier()

    with pytest.raises(StageOrderError) as info:
        applier.apply(chunk)

    assert ("AGUI-V091", "aguikit.chunks.ChunkNormalizer") == (info.value.rule, info.value.stage)
    assert "applier" in str(info.value)
    assert [] == applier.messages


def test_state_as_structures_the_state_into_a_users_class() -> None:
    """And a state that does not fit raises an aguikit error, not a cattrs one."""

    @attrs.define
    class Plan:
        step: int

    applier = applied(StateSnapshotEvent(snapshot={"step": 2}))
    assert Plan(step=2) == applier.state_as(Plan)

    applier.apply(StateSnapshotEvent(snapshot={"step": "many"}))
    with pytest.raises(WireFormatError):
        applier.state_as(Plan)


def test_initial_messages_and_state_are_copied() -> None:
    """The caller's objects are never mutated by applying events."""
    history = [AssistantMessage(id="a", content="x")]
    state = {"n": []}
    applier = Applier(messages=history, state=state)
    applier.apply(TextMessageContentEvent(message_id="a", delta="y"))
    applier.apply(StateDeltaEvent(delta=[AddOperation(path="/n/-", value=1)]))

    assert ("x", {"n": []}) == (history[0].content, state)
    assert ("xy", {"n": [1]}) == (applier.text_of("a"), applier.state)


def test_a_remove_operation_carrying_an_extra_value_applies() -> None:
    """RFC 6902 operations are open objects: a leftover member is ignored."""
    op = RemoveOperation(path="/items/1", extra_members={"value": "drop-me"})
    applier = applied(
        StateSnapshotEvent(snapshot={"items": ["a", "drop-me", "b"]}), StateDeltaEvent(delta=[op])
    )

    assert {"items": ["a", "b"]} == applier.state


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "add", "path": "/a/b/-", "value": 4}],
        [{"op": "remove", "path": "/zz"}],
        [{"op": "frob", "path": "/a"}],
        [{"path": "/a"}],
        [{"op": "add"}],
        [{"op": "replace", "path": "", "value": 5}],
        [{"op": "move", "from": "/a", "path": "/a/b"}],
        [{"op": "add", "path": "/n", "value": 1}, {"op": "test", "path": "/c", "value": "y"}],
    ],
)
def test_apply_patch_agrees_with_jsonpatch_on_results_and_failures(ops: list[Any]) -> None:
    """The engine skips jsonpatch's duplicate validation pass, never its verdicts."""
    import copy

    import jsonpatch

    document = {"a": {"b": [1, 2, 3]}, "c": "x"}
    theirs, ours = copy.deepcopy(document), copy.deepcopy(document)
    try:
        expected: Any = (
            "applied",
            jsonpatch.JsonPatch(ops).apply(theirs, in_place=True, atomic=True),
        )
    except jsonpatch.JsonPatchException:
        expected = ("refused",)
    try:
        got: Any = ("applied", apply_patch(ours, ops))
    except PatchError:
        got = ("refused",)

    assert expected == got
    assert theirs == ours  # atomic: a failure leaves both documents as they were


# ---- the pointer memory of aguikit.patch ---------------------------------------------------


def test_a_remembered_path_resolves_as_jsonpointer_parses_it_every_time() -> None:
    document: Any = {"a/b": {"~c": 1}, "rows": [{"n": 0}]}
    for value in (2, 3):  # the second time the parts come from the memory
        document = apply_patch(document, [{"op": "replace", "path": "/a~1b/~0c", "value": value}])
        document = apply_patch(document, [{"op": "add", "path": "/rows/0/n", "value": value}])
    assert document == {"a/b": {"~c": 3}, "rows": [{"n": 3}]}


def test_a_malformed_path_is_refused_every_time_and_never_remembered() -> None:
    from aguikit import patch

    for _ in range(2):
        with pytest.raises(PatchError, match="invalid escape"):
            apply_patch({"a": 1}, [{"op": "replace", "path": "/~2", "value": 0}])
    assert "/~2" not in patch._PARSED


def test_a_mapping_that_is_not_a_plain_dict_takes_jsonpointers_own_walk() -> None:
    from collections import defaultdict

    document: Any = {"d": defaultdict(dict)}
    with pytest.raises(PatchError):
        apply_patch(document, [{"op": "replace", "path": "/d/missing/x", "value": 1}])
    assert dict(document["d"]) == {}  # looking a member up did not create it


def test_the_pointer_memory_is_bounded_against_ever_new_paths() -> None:
    from aguikit import patch

    document: Any = {}
    for n in range(patch._PARSED_MAX + 50):  # escaped paths: the ones it remembers
        document = apply_patch(document, [{"op": "add", "path": f"/k~0{n}", "value": n}])
    assert len(patch._PARSED) <= patch._PARSED_MAX
    assert len(document) == patch._PARSED_MAX + 50
