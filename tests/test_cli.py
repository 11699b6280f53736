"""Tests for aguikit.cli, run as a real subprocess: ``python -m aguikit ...``."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from tests.servers import Route, serve
from tests.support import (
    jsonl_bytes,
    run_finished,
    run_input,
    run_started,
    split_every,
    sse_bytes,
    state_snapshot,
    text_content,
    text_end,
    text_message,
    text_start,
    tool_call_args,
    tool_call_end,
    tool_call_start,
    write_jsonl,
    write_sse,
)

from aguikit.transport.jsonl import encode_line

GOOD = [
    run_started(),
    *text_message("m1", "Hi"),
    tool_call_start("c1", "lookup"),
    tool_call_args("c1", '{"q": "x"}'),
    tool_call_end("c1"),
    state_snapshot({"count": 1}),
    run_finished(),
]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aguikit", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_demo_checks_clean_and_replays() -> None:
    """``aguikit demo`` needs no arguments, checks its bundled stream clean and replays it."""
    result = run("demo")

    assert 0 == result.returncode, result.stdout + result.stderr
    assert "demo.sse: OK: 44 events, 0 schema errors, 0 protocol errors" in result.stdout
    for fragment in ("get_weather", '"city": "Lisbon"', "subagent researcher", '"status": "ready"'):
        assert fragment in result.stdout


def _demo_sections(out: str) -> list[tuple[str, str]]:
    """The demo's output as (command, what it printed) pairs; a blank line parts them."""
    parts = re.split(r"^\$ (.*)\n", out, flags=re.MULTILINE)
    assert "" == parts[0]
    texts = [text.removesuffix("\n") for text in parts[2:-1:2]] + [parts[-1]]
    return list(zip(parts[1::2], texts, strict=True))


@pytest.mark.parametrize("how", ["python -m aguikit", "aguikit on PATH"])
def test_the_demo_prints_commands_that_print_the_same_when_run_from_anywhere(
    how: str, tmp_path: Path
) -> None:
    """
    Each ``$`` line the demo prints, typed into a shell elsewhere (another directory, and
    for ``python -m aguikit``, ``./dev demo``'s way, a PATH without this environment),
    runs and prints what the demo printed under it: the bundled recording is named by its
    path, the program by a name the shell finds.
    """
    bin_dir = str(Path(sys.executable).parent)
    bare = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_dir)
    path = bare if how == "python -m aguikit" else bin_dir + os.pathsep + bare
    env = {**os.environ, "PATH": path, "NO_COLOR": "1"}
    argv = [sys.executable, "-m", "aguikit"] if how == "python -m aguikit" else ["aguikit"]
    (tmp_path / "elsewhere").mkdir()

    demo = subprocess.run(
        [*argv, "demo"], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    sections = _demo_sections(demo.stdout)

    assert 0 == demo.returncode, demo.stdout + demo.stderr
    assert ["check", "replay"] == [shlex.split(command)[len(argv)] for command, _ in sections]
    assert all(command.startswith(shlex.join(argv) + " ") for command, _ in sections)
    for command, printed in sections:
        again = subprocess.run(
            command,
            shell=True,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=tmp_path / "elsewhere",
        )
        assert (0, printed) == (again.returncode, again.stdout), command + again.stderr


def test_check_clean_sse_file_exits_zero(tmp_path: Path) -> None:
    """A valid ``.sse`` recording checks clean."""
    result = run("check", str(write_sse(tmp_path / "run.sse", GOOD)))

    assert 0 == result.returncode, result.stdout + result.stderr
    assert result.stdout.startswith(f"{tmp_path / 'run.sse'}: OK: 9 events")


def test_check_clean_jsonl_file_exits_zero(tmp_path: Path) -> None:
    """A valid ``.jsonl`` recording checks clean."""
    result = run("check", str(write_jsonl(tmp_path / "run.jsonl", GOOD)))

    assert 0 == result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
def test_check_reads_stdin_and_sniffs_the_format(fmt: str) -> None:
    """``-`` reads standard input; the format is recognised from the first bytes."""
    data = sse_bytes(GOOD) if fmt == "sse" else jsonl_bytes(GOOD)

    result = run("check", "-", stdin=data)

    assert 0 == result.returncode, result.stdout + result.stderr
    assert "<stdin>: OK: 9 events" in result.stdout


def test_check_reports_every_schema_error_with_index_and_type(tmp_path: Path) -> None:
    """All schema violations are listed, one line each, and the exit code is 1."""
    bad = list(GOOD)
    bad[2] = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5}
    bad[5] = {"type": "TOOL_CALL_ARGS", "toolCallId": "c1"}
    path = write_sse(tmp_path / "bad.sse", bad)

    result = run("check", str(path))
    lines = result.stdout.splitlines()

    assert 1 == result.returncode
    assert any("event 3 TEXT_MESSAGE_CONTENT: error type at /delta" in line for line in lines)
    assert any("event 6 TOOL_CALL_ARGS: error required" in line for line in lines)
    assert "2 schema errors" in lines[-1] or "2 schema errors" in result.stdout


def test_check_goes_on_verifying_after_a_protocol_error(tmp_path: Path) -> None:
    """
    The ordering error is reported with its rule id; the failing event is treated as not
    delivered and every later event is verified too, so a second error is found.
    """
    bad = [GOOD[0], {"type": "TEXT_MESSAGE_CONTENT", "messageId": "nope", "delta": "x"}, *GOOD[1:]]
    bad.insert(5, {"type": "TOOL_CALL_END", "toolCallId": "never"})
    bad.append({"type": "TEXT_MESSAGE_END"})

    result = run("check", str(write_sse(tmp_path / "bad.sse", bad)))

    assert 1 == result.returncode
    assert "event 2 TEXT_MESSAGE_CONTENT: error AGUI-V012" in result.stdout
    assert "event 6 TOOL_CALL_END: error AGUI-V014" in result.stdout
    assert "(may be a consequence of the error at event 2)" in result.stdout
    assert "2 protocol errors" in result.stdout
    assert "1 schema errors" in result.stdout
    assert "verification stopped" not in result.stdout


def test_check_reports_a_truncated_stream(tmp_path: Path) -> None:
    """A recording that stops before RUN_FINISHED is a problem (exit 1)."""
    result = run("check", str(write_sse(tmp_path / "cut.sse", GOOD[:4])))

    assert 1 == result.returncode
    assert "1 protocol errors" in result.stdout


def test_check_reports_a_decode_error_with_its_location(tmp_path: Path) -> None:
    """Bytes that are not a stream are reported with frame and byte offset."""
    path = tmp_path / "junk.sse"
    path.write_bytes(sse_bytes(GOOD[:1]) + b"data: {not json\n\n")

    result = run("check", str(path))

    assert 1 == result.returncode
    assert "frame 2, byte" in result.stdout
    assert "1 decode errors" in result.stdout


def test_check_json_format_is_machine_readable(tmp_path: Path) -> None:
    """``--format json`` prints one document with counts and every problem."""
    bad = list(GOOD)
    bad[2] = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 5}

    result = run("check", "--format", "json", str(write_jsonl(tmp_path / "b.jsonl", bad)))
    document = json.loads(result.stdout)
    (source,) = document["sources"]

    assert 1 == result.returncode
    assert (1, False, 1) == (document["schema_version"], document["ok"], document["exit"])
    assert (False, 9, 1) == (source["ok"], source["events"], source["counts"]["schema"])
    assert {
        "kind": "schema",
        "rule": "AGUI-S001",
        "severity": "error",
        "event": 3,
        "line": 3,
        "event_type": "TEXT_MESSAGE_CONTENT",
        "pointer": "/delta",
    }.items() <= source["problems"][0].items()


def test_receiver_warnings_only_fail_with_strict(tmp_path: Path) -> None:
    """A warning (a producer declaring a newer protocol) exits 0, or 1 with ``--strict``."""
    events = [{**GOOD[0], "protocolVersion": "99.0"}, *GOOD[1:]]
    path = write_sse(tmp_path / "newer.sse", events)

    relaxed = run("check", str(path))
    strict = run("check", "--strict", str(path))

    assert (0, 1) == (relaxed.returncode, strict.returncode), relaxed.stdout
    assert "warning" in relaxed.stdout
    assert "1 warnings" in relaxed.stdout


def test_patch_that_does_not_apply_is_a_problem(tmp_path: Path) -> None:
    """A state delta that cannot apply fails the check."""
    delta = {"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/missing"}]}
    events = [*GOOD[:-1], delta, GOOD[-1]]

    result = run("check", str(write_sse(tmp_path / "patch.sse", events)))

    assert 1 == result.returncode, result.stdout
    assert "1 patch errors" in result.stdout


def test_unreadable_input_exits_two(tmp_path: Path) -> None:
    """A missing file is exit 2 with a message on stderr."""
    result = run("check", str(tmp_path / "absent.sse"))

    assert 2 == result.returncode
    assert "cannot open" in result.stderr


def test_check_a_live_agent_over_http() -> None:
    """An http:// source is POSTed a minimal RunAgentInput and its answer checked."""
    with serve() as server:
        body = sse_bytes(GOOD)
        url = server.add("/agent", Route(split_every(body, [3, 17, 5])))

        result = run("check", url)
        sent = server.requests[0].json()

    assert 0 == result.returncode, result.stdout + result.stderr
    assert {"threadId", "runId", "messages", "protocolVersion"} <= sent.keys()


def test_check_posts_the_given_input(tmp_path: Path) -> None:
    """``--input FILE`` is the body POSTed to the agent."""
    given = run_input(messages=[{"id": "u1", "role": "user", "content": "hello"}])
    (tmp_path / "in.json").write_text(json.dumps(given))
    with serve() as server:
        url = server.add("/agent", Route([sse_bytes(GOOD)]))
        result = run("check", "--input", str(tmp_path / "in.json"), url)
        sent = server.requests[0].json()

    assert 0 == result.returncode
    assert given["messages"] == sent["messages"]


def test_agent_answering_500_exits_two() -> None:
    """An HTTP error from the agent means the input could not be read."""
    with serve() as server:
        url = server.add("/agent", Route([b"overloaded"], status=500, content_type="text/plain"))
        result = run("check", url)

    assert 2 == result.returncode
    assert "HTTP 500" in result.stderr


def test_replay_prints_messages_tool_calls_and_state(tmp_path: Path) -> None:
    """Replay shows each message by role, tool calls with pretty arguments, and the state."""
    result = run("replay", str(write_sse(tmp_path / "run.sse", GOOD)))

    assert 0 == result.returncode, result.stderr
    assert "assistant:\n  Hi" in result.stdout
    assert "lookup" in result.stdout
    assert '"q": "x"' in result.stdout
    assert 'state:\n  {\n    "count": 1\n  }' in result.stdout


def test_rules_prints_the_rule_table() -> None:
    """``aguikit rules`` prints the rendered rule catalogue."""
    result = run("rules")

    assert 0 == result.returncode
    assert "AGUI-" in result.stdout


def test_schema_prints_the_bundled_schema_or_one_definition() -> None:
    """The whole schema is JSON; one definition is its ``$defs`` entry."""
    whole = run("schema")
    one = run("schema", "RunStartedEvent")

    assert "RunStartedEvent" in json.loads(whole.stdout)["$defs"]
    assert json.loads(whole.stdout)["$defs"]["RunStartedEvent"] == json.loads(one.stdout)


def test_unknown_schema_definition_exits_two_with_suggestions() -> None:
    """A misspelt definition is exit 2 naming close matches."""
    result = run("schema", "RunStarted")

    assert 2 == result.returncode
    assert "RunStartedEvent" in result.stderr


def test_plain_output_has_no_ansi_codes_when_not_a_terminal(tmp_path: Path) -> None:
    """Colour is for terminals only; captured output is plain text."""
    result = run("check", str(write_sse(tmp_path / "run.sse", GOOD)))

    assert "\x1b[" not in result.stdout


def test_a_long_check_on_a_terminal_shows_progress_on_stderr(tmp_path: Path) -> None:
    """
    With stderr on a terminal, a long ``check`` reports events read and their rate there,
    and clears the line before its own output; the report on stdout carries none of it.
    """
    import os
    import pty

    path = tmp_path / "long.jsonl"
    with path.open("w", encoding="utf-8") as fp:
        fp.write(encode_line(run_started()))
        fp.write(encode_line(text_start("m")))
        line = encode_line(text_content("m", "x"))
        fp.write(line * 300_000)  # seconds of work: progress waits half a second
        fp.write(encode_line(text_end("m")))
        fp.write(encode_line(run_finished()))
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "aguikit", "check", str(path)],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
            timeout=120,
            check=False,
        )
        os.close(follower)
        follower = -1
        terminal = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal reports EIO once the writer has gone
                break
            if not chunk:
                break
            terminal += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)

    assert 0 == result.returncode, result.stdout
    assert b"events read (" in terminal
    assert b"/s)" in terminal
    assert "events read" not in result.stdout


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_report_quoting_lone_surrogates_is_written_not_crashed(tmp_path: Path, fmt: str) -> None:
    """
    JSON may escape a lone surrogate (``"\\ud800"``); quoting one in a report must not die
    encoding stdout.  Found by the CLI fuzz: the in-process run wrote to a StringIO, which
    accepts anything, while the real command's UTF-8 stdout refused it.
    """
    path = tmp_path / "surrogates.jsonl"
    path.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n'
        '{"type":"TEXT_MESSAGE_STAR\\ud800T","messageId":"m"}\n'
        '{"type":"TEXT_MESSAGE_START","messageId":"m\\ud800","x\\udfff":1}\n',
        encoding="utf-8",
    )

    result = run("check", str(path), "--format", fmt)

    assert 1 == result.returncode
    assert "Traceback" not in result.stderr, result.stderr
    if fmt == "json":
        (source,) = json.loads(result.stdout)["sources"]
        assert any("ud800" in p["message"] for p in source["problems"])
    else:
        assert "TEXT_MESSAGE_STAR\\ud800T" in result.stdout
    replay = run("replay", str(path))
    assert "Traceback" not in replay.stderr, replay.stderr


def test_checking_a_valid_stream_loads_only_what_it_uses(tmp_path: Path) -> None:
    """
    Start-up is part of every ``aguikit check`` in CI: a valid text stream reported as text
    loads neither the schema explainer nor what other commands, formats and options need.
    """
    path = tmp_path / "good.jsonl"
    write_jsonl(path, GOOD)
    probe = (
        "import sys\n"
        "from aguikit.cli import main\n"
        f"code = main(['check', {str(path)!r}])\n"
        "print(code, ' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    code, loaded = result.stdout.splitlines()[-1].split(" ", 1)
    modules = set(loaded.split())

    assert "0" == code
    assert "aguikit.session" in modules  # the probe did check the stream
    unused = {
        "jsonschema",  # explains an invalid event
        "concurrent.futures.process",  # --jobs
        "importlib.metadata",  # --version, the versioned formats
        "xml.sax.saxutils",  # --format junit
        "hashlib",  # --format sarif (its fingerprints)
        "aguikit.reference",  # aguikit rules
        "httpx",  # a URL source
        "aguikit.proto",  # a protobuf source
    }
    assert set() == unused & modules
