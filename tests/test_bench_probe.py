"""
``bench/bench_proxy.py --probe`` must cost the proxy it probes the same in every round.

Its probe once rewrote every note it had taken since the proxy started, every second, in
the proxy's own process: a judging proxy notes each answer's batch (27,000 a round), so the
dump's CPU, its hold on the GIL and the collector's heap grew round after round, and the
judging proxy looked dearer in each later round of a run (``docs/proxy.md``, "Judging's
CPU").  Counted here, never timed: each dump writes only the notes taken since the last.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_proxy.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_proxy", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_each_dump_writes_only_the_notes_taken_since_the_last(tmp_path: Path) -> None:
    bench = _bench()
    notes: dict[str, list[Any]] = {"gc": [], "late": [], "judged": []}
    path = tmp_path / "probe.json"
    written: list[int] = []
    with path.open("a") as out:
        for second in range(50):
            notes["judged"] += [[second, 10.0, 4, n] for n in range(100)]
            notes["gc"].append([second, 0, 0.1])
            before = out.tell()
            bench._dump(notes, out)
            written.append(out.tell() - before)
            assert notes == {"gc": [], "late": [], "judged": []}  # nothing kept in the proxy
    assert max(written) < 2 * min(written)  # the 50th second's dump no dearer than the 1st
    read = bench._read_notes(path)
    assert [j[0] for j in read["judged"]] == [s for s in range(50) for _ in range(100)]
    assert [g[0] for g in read["gc"]] == list(range(50))


def test_a_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    bench = _bench()
    out = io.StringIO()
    bench._dump({"gc": [[1, 2, 3.0]], "late": [], "judged": []}, out)
    path = tmp_path / "probe.json"
    path.write_text(out.getvalue() + json.dumps({"gc": [[4, 5, 6.0]]})[:7])
    assert bench._read_notes(path)["gc"] == [[1, 2, 3.0]]
