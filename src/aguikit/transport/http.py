"""
The HTTP client: POST a ``RunAgentInput``, read the agent's SSE answer, fold it as it comes.

An application talking to an agent wants three things from a client, and gets them here
over ``httpx``: the request made the way the official clients make it (a JSON body,
``Accept: text/event-stream``, the protocol version declared), the answer decoded and
checked incrementally (each event verified and applied by a :class:`aguikit.Session` the
moment its frame is complete, so a UI can render token by token), and every way it can go
wrong reported as a typed error rather than a hung iterator or an ``httpx`` exception:
:class:`~aguikit.errors.HTTPStatusError`, :class:`~aguikit.errors.ContentTypeError`,
:class:`~aguikit.errors.TransportError`, :class:`~aguikit.errors.DecodeError`,
:class:`~aguikit.errors.ProtocolError` and, for an answer that stops before the run ends,
:class:`~aguikit.errors.TruncatedStreamError`.

Stopping early is part of the contract: breaking out of the loop, closing the generator or
cancelling the task closes the HTTP response, and with it the connection, so the agent
sees the client go and can stop spending tokens.

What it deliberately does not do: retry, reconnect with ``Last-Event-ID`` (AG-UI runs are
not resumable streams), or interpret the binary protobuf transport.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs
import httpx

from .._generated.registry import PROTOCOL_VERSION
from ..errors import ContentTypeError, HTTPStatusError, TransportError
from ._json import DEFAULT_MAX_DEPTH
from .sse import DEFAULT_MAX_FRAME_BYTES, MEDIA_TYPE, SSEDecoder, frame_object

if TYPE_CHECKING:
    from .._generated.models import Event, RunAgentInput
    from ..apply import Changed
    from ..session import Session

__all__ = ["AgentClient", "Update", "prepare_input"]

_ERROR_BODY_BYTES: Final = 4096
"""How much of a non-2xx body is read for the error: enough to show why, never all of it."""

_LEGACY_KINDS: Final = (("image/", "image"), ("audio/", "audio"), ("video/", "video"))


@attrs.frozen
class Update:
    """
    One event the agent sent, with what it changed in the session.

    ``event`` is the typed event as delivered to the application (after the receiver
    boundary and chunk expansion, so one received chunk may produce several updates, and a
    dropped unknown event none); ``changes`` lists what applying it changed (a message
    appended, text grown, state replaced...), for a view that redraws only that.
    """

    event: Event
    changes: tuple[Changed, ...]


def _version_key(version: str) -> tuple[int, ...] | None:
    parts = version.split(".")
    if not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def _older_than(version: str | None, reference: str) -> bool:
    if version is None:
        return False
    mine, theirs = _version_key(version), _version_key(reference)
    return mine is not None and theirs is not None and mine < theirs


def _upgrade_part(part: Any, siblings: Sequence[Any]) -> list[Any]:
    """A retired ``binary`` content part as the modern media part it stands for."""
    if not (isinstance(part, Mapping) and part.get("type") == "binary"):
        return [part]
    mime = part.get("mimeType")
    if not isinstance(mime, str):
        return [part]
    kind = next((name for prefix, name in _LEGACY_KINDS if mime.startswith(prefix)), "document")
    if isinstance(part.get("data"), str) and part["data"]:
        source = {"type": "data", "value": part["data"], "mimeType": mime}
    elif isinstance(part.get("url"), str) and part["url"]:
        source = {"type": "url", "value": part["url"], "mimeType": mime}
    else:
        return [part]  # only an id: nothing to upgrade to; validation will name it
    modern: dict[str, Any] = {"type": kind, "source": source}
    if isinstance(part.get("filename"), str):
        modern["metadata"] = {"filename": part["filename"]}
    for other in siblings:  # the sender already included the modern twin: keep one
        if (
            isinstance(other, Mapping)
            and other.get("type") == kind
            and other.get("source") == source
            and ("metadata" not in modern or other.get("metadata") == modern["metadata"])
        ):
            return []
    return [modern]


def _upgrade_messages(messages: Any) -> Any:
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(p, Mapping) and p.get("type") == "binary" for p in content
        ):
            parts = [new for part in content for new in _upgrade_part(part, content)]
            message = {**message, "content": parts}
        out.append(message)
    return out


def _flatten_for_0_0_39(messages: list[Any], warnings: list[str]) -> list[Any]:
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            if len(texts) != len(content):
                warnings.append(
                    f"message {message.get('id')!r}: a peer of protocol 0.0.39 or older "
                    "takes text only, so the client DROPS non-text parts"
                )
            message = {**message, "content": "\n".join(t for t in texts if t)}
        out.append(message)
    return out


def prepare_input(
    run_input: RunAgentInput | Mapping[str, Any],
    *,
    protocol_version: str | None = PROTOCOL_VERSION,
    max_protocol_version: str | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """
    The JSON body the client POSTs for ``run_input``.

    A mapping is read as wire JSON; retired ``binary`` content parts in it are upgraded to
    the modern media parts they stand for (an old front end's history stays sendable).  The
    result is validated and re-serialised through the typed model, so nothing malformed
    leaves the process.  ``protocolVersion`` is set to ``protocol_version`` unless the
    input already declares one.

    ``max_protocol_version`` pins an older peer: below ``1.0`` the version declaration is
    left out (such a peer may reject an unknown member), and at ``0.0.39`` or older user
    content is flattened to its text, which is recorded in ``warnings``.

    Raises:
        SchemaValidationError: The input is not a valid ``RunAgentInput``.
    """
    from ..wire import parse_run_agent_input, to_wire

    if isinstance(run_input, Mapping):
        data = dict(run_input)
        data["messages"] = _upgrade_messages(data.get("messages"))
        wire = to_wire(parse_run_agent_input(data))
    else:
        wire = to_wire(run_input)
    old_peer = _older_than(max_protocol_version, "1.0")
    if old_peer:
        wire.pop("protocolVersion", None)
    elif protocol_version is not None and "protocolVersion" not in wire:
        wire["protocolVersion"] = protocol_version
    if max_protocol_version is not None and not _older_than("0.0.39", max_protocol_version):
        wire["messages"] = _flatten_for_0_0_39(
            wire["messages"], [] if warnings is None else warnings
        )
    return wire


def _media_type(response: httpx.Response) -> str | None:
    value = response.headers.get("content-type")
    return None if value is None else value.split(";", 1)[0].strip().lower()


class AgentClient:
    """
    Runs an AG-UI agent over HTTP and keeps the conversation it produces.

    Each :meth:`run` (or :meth:`run_sync`) starts a fresh :class:`aguikit.Session`,
    available as :attr:`session` during and after the run; :attr:`messages` and
    :attr:`state` read through to it.

    Args:
        url: The agent endpoint.
        headers: Extra request headers (authentication, tracing).
        timeout: Seconds, or an ``httpx.Timeout``; the read timeout applies between
            chunks, so a slow agent is fine as long as it keeps talking.
        verify: Verify event ordering (raise :class:`~aguikit.errors.ProtocolError`).
        validate: Schema-validate every event before parsing it.
        protocol_version: Declared in the request's ``protocolVersion`` unless the input
            sets one.
        max_protocol_version: Pin an older peer (see :func:`prepare_input`).
        max_frame_bytes: Largest SSE frame accepted.
        max_depth: Deepest JSON nesting accepted in one event.
        transport: An ``httpx`` transport to use instead of the network (sync runs).
        async_transport: Likewise for async runs.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = 60.0,
        verify: bool = True,
        validate: bool = True,
        protocol_version: str | None = PROTOCOL_VERSION,
        max_protocol_version: str | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.verify = verify
        self.validate = validate
        self.protocol_version = protocol_version
        self.max_protocol_version = max_protocol_version
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth
        self._transport = transport
        self._async_transport = async_transport
        self._session: Session | None = None
        self.request_warnings: list[str] = []
        """What preparing the last request had to drop for an old peer."""

    # --- the conversation ---------------------------------------------------------------

    @property
    def session(self) -> Session:
        """
        The session of the current or most recent run.

        Raises:
            RuntimeError: No run has started yet.
        """
        if self._session is None:
            raise RuntimeError("no run has started yet: call run() or run_sync() first")
        return self._session

    @property
    def messages(self) -> list[Any]:
        """The conversation so far (see :attr:`aguikit.Session.messages`)."""
        return list(self.session.messages)

    @property
    def state(self) -> Any:
        """The agent state so far (see :attr:`aguikit.Session.state`)."""
        return self.session.state

    # --- running --------------------------------------------------------------------------

    def _request(self, run_input: RunAgentInput | Mapping[str, Any]) -> dict[str, Any]:
        self.request_warnings = []
        return prepare_input(
            run_input,
            protocol_version=self.protocol_version,
            max_protocol_version=self.max_protocol_version,
            warnings=self.request_warnings,
        )

    def _request_headers(self) -> dict[str, str]:
        return {**self.headers, "Content-Type": "application/json", "Accept": MEDIA_TYPE}

    def _new_session(self) -> Session:
        from ..session import Session

        # Every event is handed to the caller as an Update; a second copy kept in the session
        # would grow with the stream, not with the conversation.
        self._session = Session(verify=self.verify, validate=self.validate, keep_delivered=False)
        return self._session

    def _check_content_type(self, response: httpx.Response) -> None:
        media = _media_type(response)
        if media != MEDIA_TYPE:
            raise ContentTypeError(response.headers.get("content-type"), url=self.url)

    @staticmethod
    def _updates(session: Session, frame_data: dict[str, Any] | None) -> list[Update]:
        """Feed one event (or, for ``None``, finish) and pair what was delivered with it."""
        changes = session.finish() if frame_data is None else session.feed(frame_data)
        fresh = session.last_delivered
        return [Update(event, (change,)) for event, change in zip(fresh, changes, strict=True)]

    def run_sync(self, run_input: RunAgentInput | Mapping[str, Any]) -> Iterator[Update]:
        """
        Run the agent and yield an :class:`Update` per delivered event, synchronously.

        Closing the iterator early (``break``, ``.close()``) closes the connection.

        Raises:
            HTTPStatusError: The agent answered non-2xx (the error holds the body's start).
            ContentTypeError: The agent answered 2xx with something other than SSE.
            TransportError: The connection failed or broke mid-stream.
            DecodeError: The answer is not a well-formed event stream.
            SchemaValidationError, UnknownEventTypeError: An event is malformed.
            ProtocolError: An event broke an ordering rule (when ``verify``).
            TruncatedStreamError: The stream ended before the run finished or failed.
        """
        body = self._request(run_input)
        session = self._new_session()
        decoder = SSEDecoder(source=self.url, max_frame_bytes=self.max_frame_bytes)
        try:
            with (
                httpx.Client(timeout=self.timeout, transport=self._transport) as client,
                client.stream(
                    "POST", self.url, json=body, headers=self._request_headers()
                ) as response,
            ):
                if not response.is_success:
                    raise HTTPStatusError(
                        response.status_code, _read_start_sync(response), url=self.url
                    )
                self._check_content_type(response)
                for chunk in response.iter_bytes():
                    for frame in decoder.feed(chunk):
                        data = frame_object(frame, source=self.url, max_depth=self.max_depth)
                        yield from self._updates(session, data)
        except httpx.HTTPError as exc:
            raise TransportError(_describe(exc), url=self.url) from exc
        decoder.close()
        yield from self._updates(session, None)

    async def run(self, run_input: RunAgentInput | Mapping[str, Any]) -> AsyncIterator[Update]:
        """
        Run the agent and yield an :class:`Update` per delivered event.

        Use as ``async for update in client.run(run_input)``.  Leaving the loop early,
        ``aclose()`` or cancelling the task closes the connection.

        Raises:
            The same errors as :meth:`run_sync`.
        """
        body = self._request(run_input)
        session = self._new_session()
        decoder = SSEDecoder(source=self.url, max_frame_bytes=self.max_frame_bytes)
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout, transport=self._async_transport) as client,
                client.stream(
                    "POST", self.url, json=body, headers=self._request_headers()
                ) as response,
            ):
                if not response.is_success:
                    raise HTTPStatusError(
                        response.status_code, await _read_start(response), url=self.url
                    )
                self._check_content_type(response)
                async for chunk in response.aiter_bytes():
                    for frame in decoder.feed(chunk):
                        data = frame_object(frame, source=self.url, max_depth=self.max_depth)
                        for update in self._updates(session, data):
                            yield update
        except httpx.HTTPError as exc:
            raise TransportError(_describe(exc), url=self.url) from exc
        decoder.close()
        for update in self._updates(session, None):
            yield update


def _describe(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def _read_start_sync(response: httpx.Response) -> str:
    data = bytearray()
    for chunk in response.iter_bytes():
        data += chunk
        if len(data) >= _ERROR_BODY_BYTES:
            break
    return bytes(data[:_ERROR_BODY_BYTES]).decode("utf-8", "replace")


async def _read_start(response: httpx.Response) -> str:
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= _ERROR_BODY_BYTES:
            break
    return bytes(data[:_ERROR_BODY_BYTES]).decode("utf-8", "replace")
