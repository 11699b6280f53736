"""
The stage classes stay open to subclassing from Python in both builds.

Compiled by mypyc, a class refuses interpreted subclasses unless it says otherwise
(``mypyc_attr(allow_interpreted_subclasses=True)``); a user wrapping ``Session.feed`` or
specialising an ``Applier`` must not find that the package they installed is the one
where it fails.  The suite runs against each build (``nox -s tests``, ``tests_compiled``).
"""

from __future__ import annotations

from typing import Any

import pytest

from aguikit import Session
from aguikit.apply import Applier
from aguikit.changes import Changed
from aguikit.chunks import ChunkNormalizer
from aguikit.models import Event, TextMessageChunkEvent
from aguikit.receiver import Receiver
from aguikit.session import Update
from aguikit.verify import Verifier

START = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


def test_a_session_subclass_overrides_feed_and_keeps_the_pipeline() -> None:
    class Counting(Session):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.fed: list[str] = []  # a subclass may add attributes of its own

        def feed(self, event: Any) -> list[Update]:
            self.fed.append(event["type"])
            return super().feed(event)

    session = Counting()
    session.feed(START)
    updates = session.feed({"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "hi"})

    assert ["RUN_STARTED", "TEXT_MESSAGE_CHUNK"] == session.fed
    assert ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"] == [u.event.type for u in updates]
    assert "hi" == session.messages[0].content


def test_each_stage_accepts_a_python_subclass_that_overrides_its_entry_point() -> None:
    seen: list[str] = []

    class LoggingApplier(Applier):
        def apply(self, event: Event) -> Changed:
            seen.append(f"apply {event.type}")
            return super().apply(event)

    class LoggingVerifier(Verifier):
        def verify(self, event: Event) -> None:
            seen.append(f"verify {event.type}")
            super().verify(event)

    class LoggingNormalizer(ChunkNormalizer):
        def normalize(self, event: Event) -> list[Event]:
            seen.append(f"normalize {event.type}")
            return super().normalize(event)

    class LoggingReceiver(Receiver):
        def receive(self, item: Any) -> Event | None:
            seen.append("receive")
            return super().receive(item)

    receiver, normalizer = LoggingReceiver(), LoggingNormalizer()
    verifier, applier = LoggingVerifier(), LoggingApplier()
    event = receiver.receive(START)
    assert event is not None
    for item in normalizer.normalize(event):
        verifier.verify(item)
        applier.apply(item)
    chunk = TextMessageChunkEvent(message_id="m", delta="x")
    for item in normalizer.normalize(chunk):
        verifier.verify(item)
        applier.apply(item)

    assert [
        "receive",
        "normalize RUN_STARTED",
        "verify RUN_STARTED",
        "apply RUN_STARTED",
        "normalize TEXT_MESSAGE_CHUNK",
        "verify TEXT_MESSAGE_START",
        "apply TEXT_MESSAGE_START",
        "verify TEXT_MESSAGE_CONTENT",
        "apply TEXT_MESSAGE_CONTENT",
    ] == seen
    assert "x" == applier.messages[0].content


@pytest.mark.parametrize("record", ["change", "update"])
def test_the_per_event_records_stay_frozen(record: str) -> None:
    import attrs

    session = Session()
    (update,) = session.feed(START)
    value: Any = update if record == "update" else update.change
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        value.kind = "other"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del value.kind
