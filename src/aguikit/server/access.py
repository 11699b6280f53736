"""
Who may start, resume, join or cancel a run, and read or delete a thread: the endpoint's
``authorize`` hook.

AG-UI defines no credential ("authentication and authorization are properties of the
binding and the application"), so the endpoint asks the application.  A deployment
passes ``authorize=`` to :func:`aguikit.server.agui_endpoint`: it is called with the
Starlette request and an :class:`Access` record before a run starts, before a resume,
before a join, before a cancel, before a thread is read (``connect``, or a run request
asking for its history) and before one is deleted, and returns the request's *principal* (an opaque
string naming the user, or ``None`` for anonymous) or raises :class:`Denied`.

The principal returned when a run starts is stored with the run in its event log; a
resume, join or cancel must then present the run's ``threadId`` and, when a hook is
configured, the same principal.  A run that is not the requester's gets the same answer
as one that does not exist, so run ids cannot be probed.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["Access", "Authorize", "Denied", "consult"]

Action: TypeAlias = Literal["start", "resume", "join", "cancel", "connect", "delete"]


@attrs.frozen
class Access:
    """
    What a request asks to do with a run, as the ``authorize`` hook sees it.

    Attributes:
        action: ``"start"`` a new run, ``"resume"`` one after a dropped connection
            (``Last-Event-ID``), ``"join"`` one in progress (``X-AGUI-Join``),
            ``"cancel"`` it (``X-AGUI-Cancel``), or ``"connect"`` to a thread (its
            restating run, ``docs/threads.md``; ``run_id`` is the request's; a run request
            asking for the thread's history ahead of its run is asked this too, after
            its ``"start"``), or ``"delete"`` the thread (``run_id`` is ``None``).
        thread_id: The request's ``threadId``.
        run_id: The run the request names (``None`` for ``"delete"``, which names none).
        input: The ``RunAgentInput`` wire dict on ``"start"``; ``None`` otherwise.
    """

    action: Action
    thread_id: str | None
    run_id: str | None
    input: Mapping[str, Any] | None = None


class Denied(Exception):
    """
    Raised by an ``authorize`` hook to refuse a request: answered with ``status`` (401
    or 403) as an RFC 9457 problem document, with ``WWW-Authenticate`` when given.

    Args:
        status: ``401`` (no or bad credentials) or ``403`` (not allowed).
        detail: The problem document's ``detail``: what the client should know.
        www_authenticate: The ``WWW-Authenticate`` header of a ``401``.
    """

    def __init__(
        self, status: int = 403, detail: str = "", *, www_authenticate: str | None = None
    ) -> None:
        if status not in (401, 403):
            raise ValueError("Denied status must be 401 or 403")
        self.status = status
        self.detail = detail
        self.www_authenticate = www_authenticate
        super().__init__(detail or f"HTTP {status}")


Authorize: TypeAlias = Callable[["Request", Access], "Awaitable[str | None] | str | None"]
"""``authorize(request, access) -> principal | None``, sync or async; raises :class:`Denied`."""


async def consult(hook: Authorize | None, request: Request, access: Access) -> str | None:
    """
    The principal ``hook`` names for ``request`` asking ``access`` (``None`` without a
    hook: everyone is the same anonymous principal).

    Raises:
        Denied: The hook refused the request.
    """
    if hook is None:
        return None
    answer = hook(request, access)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is not None and not isinstance(answer, str):
        raise TypeError(f"authorize must return a str principal or None, not {answer!r}")
    return answer
