"""
The seam between the floors that run an AG-UI stream and whatever observes their runs.

The producer (:class:`aguikit.server.RunWriter`) and the clients (:class:`aguikit.AgentClient`,
:class:`aguikit.Agent`) sit on the top floor; :mod:`aguikit.otel`, which turns a run into
OpenTelemetry spans and metrics, sits below them and needs ``opentelemetry-api``, an
optional extra.  So the top floor never imports it: each run asks :func:`observe` for an
observer, given the one its caller passed (``telemetry=``) or else the one
``AguikitInstrumentor().instrument()`` installed here.  A process that never asked for
telemetry pays one ``None`` check per run and nothing per event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = [
    "Observe",
    "RunObserver",
    "install",
    "installed",
    "observe",
    "observing",
    "uninstall",
]


class RunObserver(Protocol):
    """What a producer or a client tells about one run, in order."""

    def event(self, event: Any) -> None:
        """One typed event of the run, after chunk expansion, as it is sent or delivered."""

    def warning(self, code: str, index: int | None) -> None:
        """A finding or a repair, by catalogue symbol, at a 0-based event index."""

    def failed(self, error: BaseException) -> None:
        """The run failed with ``error`` (recorded by its type and rule, never its text)."""

    def end(self) -> None:
        """The run is over for this side, whether or not its terminal event was seen."""

    def metadata(self) -> dict[str, Any] | None:
        """What ``RUN_STARTED.metadata`` should carry so a browser can correlate."""

    def headers(self) -> dict[str, str]:
        """The request headers that carry the run's context to the agent."""

    def activate(self) -> Any:
        """A context manager making the run's context current (for the handler's own spans)."""

    def mark(self, name: str) -> None:
        """A timestamped point of the run that no event marks (a proxy's upstream reply)."""


class Observe(Protocol):
    """Something that starts a :class:`RunObserver` per run (:class:`aguikit.otel.Telemetry`)."""

    def observe(
        self, run_input: Any, *, side: str, headers: Mapping[str, str] | None = None
    ) -> RunObserver | None:
        """An observer for the run ``run_input`` asks for, or ``None`` to observe nothing."""


_INSTALLED: list[Observe] = []


def install(observer: Observe) -> None:
    """Make ``observer`` the one every run without a ``telemetry=`` argument uses."""
    _INSTALLED[:] = [observer]


def uninstall() -> None:
    """Stop observing runs that were not given a ``telemetry=`` argument."""
    _INSTALLED.clear()


def installed() -> Observe | None:
    """The installed observer factory, if any."""
    return _INSTALLED[0] if _INSTALLED else None


def observe(
    given: Observe | None,
    run_input: Any,
    *,
    side: str,
    headers: Mapping[str, str] | None = None,
) -> RunObserver | None:
    """The observer of one run: from ``given``, else from the installed factory, else none."""
    factory = given if given is not None else (_INSTALLED[0] if _INSTALLED else None)
    if factory is None:
        return None
    return factory.observe(run_input, side=side, headers=headers)


@contextmanager
def observing(observer: RunObserver) -> Iterator[RunObserver]:
    """
    End an observed run however the block ends, recording the exception that ended it: a
    consumer that stops reading (``GeneratorExit``, cancellation) ends it ``truncated``.
    The clients wrap their read loop in it; a proxy wraps its relay loop.
    """
    try:
        yield observer
    except Exception as error:
        observer.failed(error)
        raise
    finally:
        observer.end()
