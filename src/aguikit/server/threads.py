"""
Threads that outlive the page: each thread's folded conversation, kept by the server so
a fresh page (or another worker) can restate it.

An event log keeps a *run* for as long as a client may reconnect to it; a thread is what
the runs add up to, and it is what a reloaded page needs: the messages (encrypted
reasoning artefacts included, which a consumer must return in later input), the state,
the interrupts the last run paused on and until when they can be answered, and how each
run ended, with its token usage.  :class:`MemoryThreadStore` keeps that per process,
:class:`aguikit.server.redis_threads.RedisThreadStore` on Redis for several workers; both
fold a finished run's events into the thread with :func:`fold`, which is a
:class:`~aguikit.Session` started from the thread's messages and state, so the store
agrees with every consumer by construction (there is no second fold).

A thread is restated as the specification prescribes for a producer replaying history
(``events/lifecycle.mdx``, "Several runs on one stream"): :func:`restate` gives one run of
``RUN_STARTED``, ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT`` and ``RUN_FINISHED``, the last
carrying the thread's pending interrupts when its last run paused on some, so any
conformant client folds it to the thread as the server holds it, and a client that
already holds it folds it idempotently (snapshots reconcile by id and replace).

What a store refuses, with a catalogue id (:class:`ThreadError`): a thread it does not
hold (unknown, expired, deleted, or another principal's: the same answer, so thread ids
cannot be probed), a thread whose folded history outgrew ``max_thread_bytes`` (kept with
its run outcomes but never restated, because a truncated snapshot would be presented as
the whole conversation), and a damaged one (a run the fold refused, an unreadable entry),
named with where it broke; other threads are unaffected.

Thread ids are bearer secrets unless the endpoint has an ``authorize`` hook: whoever
knows one may read the thread.  :func:`new_thread_id` makes them unguessable (128 bits
from :mod:`secrets`) where the server makes them.
"""

from __future__ import annotations

import datetime
import secrets
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs

from ..errors import AguiError
from ..jsonio import dumps_wire, loads_object
from ..session import Session
from ..wire import parse_message, to_wire

__all__ = [
    "THREAD_DAMAGED",
    "THREAD_STORE_FAILED",
    "THREAD_TOO_LARGE",
    "THREAD_UNKNOWN",
    "MemoryThreadStore",
    "RunRecord",
    "Thread",
    "ThreadError",
    "ThreadStore",
    "ThreadStoreError",
    "ended",
    "fold",
    "merged",
    "new_thread_id",
    "owned",
    "readable",
    "restate",
]

THREAD_UNKNOWN: Final = "AGUI-E030"
"""No such thread for this principal: never created, expired, deleted, or another's."""
THREAD_TOO_LARGE: Final = "AGUI-E031"
"""The thread's folded history is over the store's ``max_thread_bytes``."""
THREAD_DAMAGED: Final = "AGUI-E032"
"""The thread could not be folded or read back (a run the fold refused, a corrupt entry)."""
THREAD_STORE_FAILED: Final = "AGUI-E033"
"""The store could not answer (Redis unreachable): the endpoint's ``503``."""

DEFAULT_THREAD_TTL: Final = 30 * 24 * 3600.0
"""Seconds a thread is kept after its last update: a month, like a chat history a user
comes back to; every store takes ``ttl=`` to change it."""
DEFAULT_MAX_THREAD_BYTES: Final = 8 * 1024 * 1024
"""The largest folded thread (its JSON) a store keeps whole."""
DEFAULT_MAX_THREADS: Final = 10_000
"""Threads a :class:`MemoryThreadStore` keeps; past it the least recently updated goes."""
DEFAULT_MAX_TOTAL_BYTES: Final = 256 * 1024 * 1024
"""Bytes of folded threads a :class:`MemoryThreadStore` keeps over all threads."""

_TERMINAL: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_FORMAT: Final = 1
"""The version of a stored thread's JSON; a store refuses (as damaged) one it cannot read."""


class ThreadError(AguiError):
    """
    A thread the store cannot give: ``rule`` is :data:`THREAD_UNKNOWN`,
    :data:`THREAD_TOO_LARGE` or :data:`THREAD_DAMAGED`; ``event_index`` (1-based, in the
    run being folded) and ``pointer`` (into the stored entry or the event) say where, when
    the error is about one place.
    """

    def __init__(
        self,
        rule: str,
        thread_id: str,
        detail: str,
        *,
        event_index: int | None = None,
        pointer: str | None = None,
    ) -> None:
        self.rule = rule
        self.thread_id = thread_id
        self.detail = detail
        self.event_index = event_index
        self.pointer = pointer
        super().__init__(f"thread {thread_id!r}: {detail}")

    @property
    def location(self) -> str:
        where = [f"thread {self.thread_id!r}"]
        if self.event_index is not None:
            where.append(f"event {self.event_index}")
        if self.pointer is not None:
            where.append(f"at {self.pointer or '/'}")
        return ", ".join(where)


class ThreadStoreError(ThreadError):
    """The store could not answer (:data:`THREAD_STORE_FAILED`): Redis unreachable or
    failing, or an update that lost every compare-and-set round.  Nothing was changed."""

    def __init__(self, thread_id: str, detail: str) -> None:
        super().__init__(THREAD_STORE_FAILED, thread_id, detail)


def new_thread_id() -> str:
    """A fresh thread id nobody can guess (128 random bits): without an ``authorize`` hook
    a thread id is the only secret between a thread and anyone who asks for it."""
    return f"thread-{secrets.token_urlsafe(16)}"


@attrs.frozen
class RunRecord:
    """
    How one run of a thread ended.

    Attributes:
        run_id: The run's ``runId``.
        status: ``"finished"``, ``"interrupted"``, ``"cancelled"`` or ``"error"``.
        code: ``RUN_ERROR.code``, when the run failed with one.
        message: ``RUN_ERROR.message``, when the run failed.
        usage: The terminal event's ``usage`` (wire form), when it carried one.
        ended: When the store recorded it (seconds since the epoch).
    """

    run_id: str
    status: str
    code: str | None = None
    message: str | None = None
    usage: list[dict[str, Any]] | None = None
    ended: float = 0.0


@attrs.frozen
class Thread:
    """
    One thread as the store holds it: the fold of every run recorded into it.

    Attributes:
        thread_id: The ``threadId``.
        owner: The principal the ``authorize`` hook named when the thread was first
            recorded (``None``: anonymous); only that principal may read it.
        messages: The conversation, wire dicts (encrypted values with their messages).
        state: The application state.
        interrupts: What the last run paused on (wire dicts), answered or not; see
            :meth:`pending_interrupts` for those that can still be answered.
        runs: Every run recorded, in order.
        updated: When it was last recorded into (seconds since the epoch).
        version: How many updates made it (a store's compare-and-set counts on it).
        damaged: ``(rule, detail)`` when the store refuses to restate it
            (:data:`THREAD_TOO_LARGE`, :data:`THREAD_DAMAGED`); ``None`` for a sound one.
        running: The ``runId`` of the background run in progress on the thread (in the
            endpoint's event log), which a connecting client attaches to.
    """

    thread_id: str
    owner: str | None = None
    messages: tuple[dict[str, Any], ...] = ()
    state: Any = attrs.Factory(dict)
    interrupts: tuple[dict[str, Any], ...] = ()
    runs: tuple[RunRecord, ...] = ()
    updated: float = 0.0
    version: int = 0
    damaged: tuple[str, str] | None = None
    running: str | None = None

    def pending_interrupts(self, now: float | None = None) -> list[dict[str, Any]]:
        """The interrupts of the last run that can still be answered: those whose
        ``expiresAt`` (RFC 3339) is absent or after ``now`` (default: the current time).
        An ``expiresAt`` that does not parse is kept: the producer, not the store,
        decides what an answer to it is worth."""
        moment = time.time() if now is None else now
        return [i for i in self.interrupts if not _expired(i.get("expiresAt"), moment)]

    def encrypted_values(self) -> list[dict[str, Any]]:
        """Every encrypted reasoning artefact the thread holds, as ``{"entityId",
        "subtype", "encryptedValue"[, "encryptedValueType"]}``: what a client must return
        unmodified in its next input (they ride their messages and tool calls, so
        :attr:`messages` already carries them; this is the list of them)."""
        found: list[dict[str, Any]] = []
        for message in self.messages:
            _collect(found, "message", message)
            for call in message.get("toolCalls") or ():
                if isinstance(call, Mapping):
                    _collect(found, "tool-call", call)
        return found

    def to_json(self) -> str:
        """The thread as one JSON document (what :class:`RedisThreadStore` stores)."""
        return dumps_wire(
            {
                "format": _FORMAT,
                "threadId": self.thread_id,
                "owner": self.owner,
                "messages": list(self.messages),
                "state": self.state,
                "interrupts": list(self.interrupts),
                "runs": [attrs.asdict(run) for run in self.runs],
                "updated": self.updated,
                "version": self.version,
                "damaged": list(self.damaged) if self.damaged else None,
                "running": self.running,
            }
        )

    @classmethod
    def from_json(cls, thread_id: str, data: str | bytes) -> Thread:
        """
        Read back :meth:`to_json`.

        Raises:
            ThreadError: :data:`THREAD_DAMAGED`, naming the pointer of what is wrong,
                when ``data`` is not a stored thread this version reads.
        """
        try:
            document = loads_object(data)
        except AguiError as error:
            raise ThreadError(
                THREAD_DAMAGED, thread_id, f"the stored entry is not JSON: {error}", pointer=""
            ) from error
        return _thread_of(thread_id, document)

    def size(self) -> int:
        """Bytes of :meth:`to_json` (UTF-8): what the byte bounds count."""
        return len(self.to_json().encode())


def _collect(found: list[dict[str, Any]], subtype: str, holder: Mapping[str, Any]) -> None:
    value = holder.get("encryptedValue")
    if value is None:
        return
    entry = {"entityId": holder.get("id"), "subtype": subtype, "encryptedValue": value}
    if holder.get("encryptedValueType") is not None:
        entry["encryptedValueType"] = holder["encryptedValueType"]
    found.append(entry)


def _expired(value: Any, now: float) -> bool:
    if not isinstance(value, str):
        return False
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp() <= now


_SHAPE: Final[Mapping[str, tuple[type, ...]]] = {
    "format": (int,),
    "threadId": (str,),
    "owner": (str, type(None)),
    "messages": (list,),
    "interrupts": (list,),
    "runs": (list,),
    "updated": (int, float),
    "version": (int,),
    "damaged": (list, type(None)),
    "running": (str, type(None)),
}


def _thread_of(thread_id: str, document: Mapping[str, Any]) -> Thread:
    """A stored document as a :class:`Thread`, or a located :data:`THREAD_DAMAGED`."""

    def damaged(pointer: str, what: str) -> ThreadError:
        return ThreadError(THREAD_DAMAGED, thread_id, f"the stored entry {what}", pointer=pointer)

    for name, kinds in _SHAPE.items():
        if name not in document:
            raise damaged("", f"has no {name!r}")
        if not isinstance(document[name], kinds) or isinstance(document[name], bool):
            raise damaged(f"/{name}", f"has a malformed {name!r}")
    if document["format"] != _FORMAT:
        raise damaged("/format", f"is format {document['format']}, not {_FORMAT}")
    if document["threadId"] != thread_id:
        raise damaged("/threadId", f"names thread {document['threadId']!r}")
    if "state" not in document:
        raise damaged("", "has no 'state'")
    for name in ("messages", "interrupts"):
        for index, item in enumerate(document[name]):
            if not isinstance(item, dict):
                raise damaged(f"/{name}/{index}", "holds something that is not an object")
    runs = []
    for index, run in enumerate(document["runs"]):
        try:
            runs.append(RunRecord(**run))
        except TypeError as error:
            raise damaged(f"/runs/{index}", f"holds a malformed run ({error})") from error
    mark = document["damaged"]
    if mark is not None and (len(mark) != 2 or not all(isinstance(m, str) for m in mark)):
        raise damaged("/damaged", "has a malformed 'damaged'")
    return Thread(
        thread_id=thread_id,
        owner=document["owner"],
        messages=tuple(document["messages"]),
        state=document["state"],
        interrupts=tuple(document["interrupts"]),
        runs=tuple(runs),
        updated=float(document["updated"]),
        version=document["version"],
        damaged=(mark[0], mark[1]) if mark else None,
        running=document["running"],
    )


def merged(
    thread: Thread, messages: Sequence[Mapping[str, Any]] | None, state: Any = None
) -> tuple[list[dict[str, Any]], Any]:
    """
    The conversation and state a run on ``thread`` starts from, given what its request
    carried: each of the request's ``messages`` replaces the thread's message with its id
    or is appended, and no thread message is dropped (a page that hydrated sends its new
    message only; one that kept the conversation sends it all, to the same end); the
    request's ``state`` replaces the thread's unless it is ``None`` or ``{}`` (what a
    fresh page sends).
    """
    result = [dict(m) for m in thread.messages]
    index = {m.get("id"): i for i, m in enumerate(result)}
    for message in messages or ():
        at = index.get(message.get("id"))
        if at is None:
            index[message.get("id")] = len(result)
            result.append(dict(message))
        else:
            result[at] = dict(message)
    return result, thread.state if state is None or state == {} else state


def fold(
    thread: Thread,
    events: Iterable[Mapping[str, Any]],
    *,
    given: Mapping[str, Any] | None = None,
    max_thread_bytes: int = DEFAULT_MAX_THREAD_BYTES,
    now: float | None = None,
) -> Thread:
    """
    ``thread`` with one or more finished runs' events (wire dicts, as logged) folded in,
    after the conversation and state their request carried (``given``, the
    ``RunAgentInput`` wire dict; see :func:`merged`).

    The fold is a :class:`~aguikit.Session` started from the thread's messages and state:
    the same receiver, chunk expansion, verifier and applier every consumer runs, so the
    stored conversation is what a client that read every run holds.  Never raises for the
    events: a run the session refuses marks the thread :data:`THREAD_DAMAGED` (with the
    run's 1-based event number and the rule that refused it), a fold over
    ``max_thread_bytes`` marks it :data:`THREAD_TOO_LARGE` (its messages and state are
    then dropped, never kept truncated); either way the runs' outcomes are recorded, and
    a damaged thread is not folded into again.

    Raises:
        ThreadError: :data:`THREAD_DAMAGED` when the thread's own stored messages do not
            parse (the caller's entry was corrupt).
    """
    moment = time.time() if now is None else now
    wires = list(events)
    runs = list(thread.runs)
    runs.extend(_outcomes(wires, moment))
    running = thread.running
    if running is not None and any(r.run_id == running for r in runs[len(thread.runs) :]):
        running = None
    if thread.damaged is not None:
        return attrs.evolve(
            thread, runs=tuple(runs), updated=moment, version=thread.version + 1, running=running
        )
    start, state = merged(
        thread,
        None if given is None else given.get("messages"),
        None if given is None else given.get("state"),
    )
    messages = []
    for index, message in enumerate(start):
        try:
            messages.append(parse_message(message))
        except AguiError as error:
            raise ThreadError(
                THREAD_DAMAGED,
                thread.thread_id,
                f"message {index + 1} does not parse: {error}",
                pointer=f"/messages/{index}",
            ) from error
    session = Session(
        messages=messages,
        state=state,
        thread_id=thread.thread_id,
        keep_delivered=False,
    )
    damaged: tuple[str, str] | None = None
    for number, wire in enumerate(wires, 1):
        try:
            session.feed(wire)
        except AguiError as error:
            damaged = (
                THREAD_DAMAGED,
                f"event {number} of the recorded events was refused"
                f" ({error.rule or type(error).__name__}): {error}",
            )
            break
    folded = Thread(
        thread_id=thread.thread_id,
        owner=thread.owner,
        messages=() if damaged else tuple(to_wire(m) for m in session.messages),
        state={} if damaged else session.state,
        interrupts=()
        if damaged or not runs or runs[-1].status != "interrupted"
        else tuple(to_wire(i) for i in session.interrupts),
        runs=tuple(runs),
        updated=moment,
        version=thread.version + 1,
        damaged=damaged,
        running=running,
    )
    if damaged is None and folded.size() > max_thread_bytes:
        folded = attrs.evolve(
            folded,
            messages=(),
            state={},
            interrupts=(),
            damaged=(
                THREAD_TOO_LARGE,
                f"its history is {folded.size()} bytes, over the store's bound of "
                f"{max_thread_bytes} (max_thread_bytes)",
            ),
        )
    return folded


def _outcomes(wires: Sequence[Mapping[str, Any]], moment: float) -> list[RunRecord]:
    """The run records of the terminal events among ``wires`` (a ``RUN_ERROR``, which
    names no run, is the last ``RUN_STARTED``'s)."""
    found = []
    started = ""
    for wire in wires:
        kind = wire.get("type")
        if kind == "RUN_STARTED":
            started = str(wire.get("runId", ""))
        if kind not in _TERMINAL:
            continue
        usage = wire.get("usage")
        usage = [dict(u) for u in usage] if isinstance(usage, list) else None
        if kind == "RUN_ERROR":
            found.append(
                RunRecord(
                    run_id=started,
                    status="error",
                    code=wire.get("code"),
                    message=wire.get("message"),
                    usage=usage,
                    ended=moment,
                )
            )
            continue
        outcome = wire.get("outcome")
        kind_of = str(outcome.get("type")) if isinstance(outcome, Mapping) else "success"
        status = {"interrupt": "interrupted", "cancelled": "cancelled"}.get(kind_of, "finished")
        found.append(RunRecord(str(wire.get("runId", "")), status, usage=usage, ended=moment))
    return found


def owned(thread: Thread | None, thread_id: str, principal: str | None) -> Thread:
    """
    ``thread`` when it is ``principal``'s, damaged or not (what its owner may delete).

    Raises:
        ThreadError: :data:`THREAD_UNKNOWN` for no thread or another principal's: the
            same answer, so ids cannot be probed.
    """
    if thread is None or thread.owner != principal:
        raise ThreadError(THREAD_UNKNOWN, thread_id, "no such thread (unknown, expired or deleted)")
    return thread


def readable(thread: Thread | None, thread_id: str, principal: str | None) -> Thread:
    """
    ``thread`` as ``principal`` may restate it.

    Raises:
        ThreadError: :data:`THREAD_UNKNOWN` for no thread or another principal's (the
            same answer, so ids cannot be probed); the thread's own mark
            (:data:`THREAD_TOO_LARGE`, :data:`THREAD_DAMAGED`) for one the store will not
            restate.
    """
    thread = owned(thread, thread_id, principal)
    if thread.damaged is not None:
        raise ThreadError(thread.damaged[0], thread_id, thread.damaged[1])
    return thread


def ended(
    thread: Thread,
    run_id: str,
    events: Sequence[Mapping[str, Any]],
    *,
    given: Mapping[str, Any] | None = None,
    max_thread_bytes: int = DEFAULT_MAX_THREAD_BYTES,
) -> Thread | None:
    """
    ``thread`` once its background run ``run_id`` ended with ``events`` (the whole run,
    wire dicts): folded in (:func:`fold`) when they end with a terminal event, and the
    run no longer marked in progress either way; ``None`` when the thread does not mark
    ``run_id`` in progress (already ended by someone else, or the thread was deleted and
    this is a new one): a run's end is recorded once, and never brings back a thread.
    """
    if thread.running != run_id:
        return None
    if events and events[-1].get("type") in _TERMINAL:
        folded = fold(thread, events, given=given, max_thread_bytes=max_thread_bytes)
        return attrs.evolve(folded, running=None)
    return attrs.evolve(thread, running=None, version=thread.version + 1, updated=time.time())


def restate(thread: Thread, run_id: str, *, now: float | None = None) -> list[dict[str, Any]]:
    """
    The restating run of ``thread`` under ``run_id`` (wire dicts): ``RUN_STARTED``,
    ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT``, ``RUN_FINISHED``; the end carries an
    ``interrupt`` outcome with the interrupts still pending when the last run paused on
    some (a client learns what to answer), and none otherwise.

    Raises:
        ThreadError: The thread is marked too large or damaged (see :func:`readable`).
    """
    if thread.damaged is not None:
        raise ThreadError(thread.damaged[0], thread.thread_id, thread.damaged[1])
    ids = {"threadId": thread.thread_id, "runId": run_id}
    finished: dict[str, Any] = {"type": "RUN_FINISHED", **ids}
    pending = thread.pending_interrupts(now)
    if pending:
        finished["outcome"] = {"type": "interrupt", "interrupts": pending}
    return [
        {"type": "RUN_STARTED", **ids},
        {"type": "MESSAGES_SNAPSHOT", "messages": list(thread.messages)},
        {"type": "STATE_SNAPSHOT", "snapshot": thread.state},
        finished,
    ]


class ThreadStore(Protocol):
    """What an endpoint needs from a thread store (:class:`MemoryThreadStore`,
    :class:`~aguikit.server.redis_threads.RedisThreadStore`)."""

    async def record(
        self,
        thread_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread:
        """
        Fold finished runs' ``events`` into ``thread_id`` (created for ``owner`` when new),
        after what their request carried (``given``, see :func:`fold`), atomically: two
        workers recording into one thread at once both land, in some order.  Returns the
        thread as stored.

        Raises:
            ThreadError: :data:`THREAD_UNKNOWN` when the thread is ``owner``'s to none
                (another principal's), :data:`THREAD_DAMAGED` for an unreadable entry.
        """

    async def begin(
        self, thread_id: str, run_id: str | None, *, owner: str | None = None
    ) -> Thread:
        """
        Mark ``run_id`` as the background run in progress on ``thread_id`` (created for
        ``owner`` when new); :meth:`end` clears the mark when the run ends, and
        ``run_id=None`` clears it whatever it was.

        Raises:
            ThreadError: As :meth:`record`.
        """

    async def end(
        self,
        thread_id: str,
        run_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread | None:
        """
        The background run ``run_id`` ended with ``events`` (:func:`ended`), atomically:
        whoever sees the end first records it (its producer, or a reader that found the
        run ended in the event log because its producer died), later calls change
        nothing and return ``None``, as does a call for a thread that was deleted
        meanwhile (nothing is created).

        Raises:
            ThreadError: As :meth:`record`.
        """

    async def get(self, thread_id: str) -> Thread | None:
        """The thread as stored (damaged or not), ``None`` when unknown or expired.

        Raises:
            ThreadError: :data:`THREAD_DAMAGED` for an entry that cannot be read (the
                store marks it damaged).
        """

    async def load(self, thread_id: str, principal: str | None) -> Thread:
        """The thread ``principal`` may restate (:func:`readable`)."""

    async def delete(self, thread_id: str) -> bool:
        """Remove every trace of the thread; ``True`` when there was one."""


class MemoryThreadStore:
    """
    Threads in this process, bounded three ways: at most ``max_threads`` threads and
    ``max_total_bytes`` bytes of folded history (the least recently updated go first),
    each kept ``ttl`` seconds after its last update; a single thread over
    ``max_thread_bytes`` is kept marked :data:`THREAD_TOO_LARGE`.

    An update is atomic because nothing awaits between reading a thread and storing its
    fold.  For several workers, use :class:`~aguikit.server.redis_threads.RedisThreadStore`.

    .. versionadded:: 0.4.0
    """

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_THREAD_TTL,
        max_threads: int = DEFAULT_MAX_THREADS,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        max_thread_bytes: int = DEFAULT_MAX_THREAD_BYTES,
    ) -> None:
        if max_threads < 1 or max_total_bytes < 1 or max_thread_bytes < 1:
            raise ValueError("max_threads, max_total_bytes and max_thread_bytes must be positive")
        self.ttl = ttl
        self.max_threads = max_threads
        self.max_total_bytes = max_total_bytes
        self.max_thread_bytes = max_thread_bytes
        self._threads: OrderedDict[str, tuple[Thread, int]] = OrderedDict()
        """Least recently updated first; each with its size in bytes."""
        self._bytes = 0

    @property
    def total_bytes(self) -> int:
        """Bytes of folded history held over all threads."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._threads)

    def _drop(self, thread_id: str) -> bool:
        entry = self._threads.pop(thread_id, None)
        if entry is None:
            return False
        self._bytes -= entry[1]
        return True

    def _live(self, thread_id: str) -> Thread | None:
        now = time.time()
        while self._threads:
            oldest, (thread, _) = next(iter(self._threads.items()))
            if now - thread.updated <= self.ttl:
                break
            self._drop(oldest)
        entry = self._threads.get(thread_id)
        if entry is None:
            return None
        if now - entry[0].updated > self.ttl:  # updated out of order (its clock, a test)
            self._drop(thread_id)
            return None
        return entry[0]

    async def record(
        self,
        thread_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread:
        current = self._live(thread_id)
        if current is not None and current.owner != owner:
            raise ThreadError(THREAD_UNKNOWN, thread_id, "no such thread for this principal")
        base = current or Thread(thread_id=thread_id, owner=owner)
        folded = fold(base, events, given=given, max_thread_bytes=self.max_thread_bytes)
        self._store(folded)
        return folded

    async def begin(
        self, thread_id: str, run_id: str | None, *, owner: str | None = None
    ) -> Thread:
        current = self._live(thread_id)
        if current is not None and current.owner != owner:
            raise ThreadError(THREAD_UNKNOWN, thread_id, "no such thread for this principal")
        base = current or Thread(thread_id=thread_id, owner=owner, updated=time.time())
        marked = attrs.evolve(base, running=run_id, version=base.version + 1)
        self._store(marked)
        return marked

    async def end(
        self,
        thread_id: str,
        run_id: str,
        events: Iterable[Mapping[str, Any]],
        *,
        owner: str | None = None,
        given: Mapping[str, Any] | None = None,
    ) -> Thread | None:
        current = self._live(thread_id)
        if current is None or current.owner != owner:
            return None
        changed = ended(
            current, run_id, list(events), given=given, max_thread_bytes=self.max_thread_bytes
        )
        if changed is not None:
            self._store(changed)
        return changed

    def _store(self, thread: Thread) -> None:
        """Keep ``thread`` (replacing its old version), within the bounds."""
        size = thread.size()
        self._drop(thread.thread_id)
        while self._threads and (
            len(self._threads) >= self.max_threads or self._bytes + size > self.max_total_bytes
        ):
            self._drop(next(iter(self._threads)))
        self._threads[thread.thread_id] = (thread, size)
        self._bytes += size

    async def get(self, thread_id: str) -> Thread | None:
        return self._live(thread_id)

    async def load(self, thread_id: str, principal: str | None) -> Thread:
        return readable(self._live(thread_id), thread_id, principal)

    async def delete(self, thread_id: str) -> bool:
        return self._drop(thread_id)
