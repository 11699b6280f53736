"""
What the binary transport buys: bytes and microseconds per event, protobuf against SSE-JSON.

Printed, never asserted.  The corpus is :func:`bench_pipeline.realistic_corpus` (chunked and
explicit text, parallel tool calls, state deltas against a 500-row state, reasoning, a
subagent), the same events encoded both ways:

* **bytes/event**: the whole stream's size over its event count (SSE frames with their
  ``data: `` and blank line; protobuf frames with their 4-byte length);
* **encode µs/event**: wire dicts to stream bytes (:func:`aguikit.transport.sse.encode_bytes`
  against :func:`aguikit.proto.encode_proto_frame`);
* **decode µs/event**: stream bytes, in 64 KiB blocks, to wire dicts
  (:func:`aguikit.transport.sse.iter_events` against :func:`aguikit.proto.iter_proto_wire`).

Both columns stop at wire dicts, so neither pays for validation or the typed models; those
costs are the same whichever transport the bytes arrived on (``bench_pipeline.py``).

Run with ``python bench/bench_proto.py`` (``nox -s bench`` runs it with the others).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pipeline import realistic_corpus

from aguikit.proto import encode_proto_frame, iter_proto_wire
from aguikit.transport.sse import encode_bytes, iter_events

BLOCK = 64 * 1024


def _best(fn: Callable[[], Any], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _blocks(data: bytes) -> list[bytes]:
    return [data[i : i + BLOCK] for i in range(0, len(data), BLOCK)]


def main() -> None:
    corpus = realistic_corpus(200)
    n = len(corpus)
    sse = b"".join(encode_bytes(e) for e in corpus)
    pb = b"".join(encode_proto_frame(e) for e in corpus)
    assert corpus == list(iter_proto_wire(_blocks(pb))), "protobuf must round-trip the corpus"

    rows = [
        (
            "SSE-JSON",
            len(sse) / n,
            _best(lambda: [encode_bytes(e) for e in corpus]) / n * 1e6,
            _best(lambda: list(iter_events(_blocks(sse)))) / n * 1e6,
        ),
        (
            "protobuf",
            len(pb) / n,
            _best(lambda: [encode_proto_frame(e) for e in corpus]) / n * 1e6,
            _best(lambda: list(iter_proto_wire(_blocks(pb)))) / n * 1e6,
        ),
    ]
    print(f"binary transport vs SSE on the realistic corpus ({n} events)")
    print(f"{'':10} {'bytes/event':>12} {'encode µs/event':>16} {'decode µs/event':>16}")
    for name, size, enc, dec in rows:
        print(f"{name:10} {size:12.1f} {enc:16.2f} {dec:16.2f}")
    print(f"protobuf/SSE size ratio: {rows[1][1] / rows[0][1]:.2f}")


if __name__ == "__main__":
    main()
