"""
Every build task of aguikit, one session per concern (``nox -l`` lists them).

CI runs the default sessions (``nox``); ``bench`` and ``fuzz`` are opt-in because they
measure or search rather than check.  ``integrations`` installs pinned real AG-UI producers
and judges their streams with ``aguikit.testing`` (``docs/producers.md`` lists findings).
Arguments after ``--`` reach every selected session,
so only ``tests`` and ``tests_compiled`` read them (they are pytest's); ``lint``,
``typecheck`` and ``codegen_check`` run with fixed arguments and ignore them.
"""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path
from typing import Final

import nox

ROOT = Path(__file__).parent
SRC = ROOT / "src" / "aguikit"
TESTS = ROOT / "tests"
BENCH = ROOT / "bench"
NODE = TESTS / "node"
CODEGEN = ROOT / "codegen" / "generate.py"
DMCG = "datamodel-code-generator[ruff]==0.89.0"
PROTOC = "grpcio-tools==1.85.1"
"""``protoc`` as a Python package: codegen-time only (the installed package needs just the
``protobuf`` runtime).  Pinned because its version is written into the generated code."""

nox.options.default_venv_backend = "uv|virtualenv"
INTEGRATIONS = ROOT / "integrations"
PRODUCERS = ["pydantic-ai-slim[ag-ui]==2.68.0", "ag-ui-langgraph==0.0.47"]
"""Real producers, pinned: a finding in docs/producers.md is about exactly this version."""

AGENT_FRAMEWORK = INTEGRATIONS / "agent_framework"
AGENT_FRAMEWORK_PRODUCER = "agent-framework-ag-ui==1.7.0"
"""Pins ag-ui-protocol 0.1.x, which the ``test`` extra's 1.0.0 excludes: a venv of its own."""
ADK = INTEGRATIONS / "adk"
ADK_PRODUCER = "ag-ui-adk==0.11.0"
"""Brings google-adk's large dependency tree: a venv of its own too."""

nox.options.sessions = [
    "tests",
    "tests_compiled",
    "lint",
    "typecheck",
    "codegen_check",
    # Issue 29: the Redis log at the oldest redis-py the extra admits (the newest is what the
    # tests session installs) and the server on the newest CPython supported (3.11 is tests').
    "redis(end='oldest')",
    "server-3.13",
    "integrations",
    "integrations_agent_framework",
    "integrations_adk",
]
nox.options.reuse_existing_virtualenvs = True


TEST_TOOLS = ("mypy", "types-jsonschema", "types-protobuf", DMCG, PROTOC)
"""What the suite needs beside the ``test`` extra: the typing tests run mypy, the codegen
tests regenerate."""


def install_node_packages(session: nox.Session) -> None:
    """The official @ag-ui/proto (oracle of tests/test_proto_official.py) and @ag-ui/client
    (the integration tests) into the gitignored tests/node/node_modules; CI sets
    AGUIKIT_REQUIRE_NODE so they cannot skip."""
    if shutil.which("npm"):
        session.run(
            "npm", "install", "--no-audit", "--no-fund", "--prefix", str(NODE), external=True
        )


@nox.session(tags=["check"])
def tests(session: nox.Session) -> None:
    """Unit, property and conformance tests (the official corpus is read from ../shared)."""
    session.install("-e", ".[test]", *TEST_TOOLS)
    install_node_packages(session)
    env = {"AGUIKIT_BUILD": "pure", "AGUIKIT_WHEEL_CACHE": str(WHEEL_CACHE)}
    session.run("pytest", *session.posargs, env=env)


PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MYPYC = PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["mypyc"]
COMPILED: list[str] = [
    p.removeprefix("/src/").removesuffix(".py").replace("/", ".") for p in MYPYC["include"]
]
"""The modules the compiled wheel compiles with mypyc (``aguikit.session``, ...): the one list
lives in pyproject.toml, as hatch-mypyc's ``include``."""

ASSERT_COMPILED = r"""
import importlib, importlib.machinery, sys
names = sys.argv[1:]
suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
files = {n: importlib.import_module(n).__file__ for n in names}
pure = [f"{n}: {f}" for n, f in files.items() if not f.endswith(suffixes)]
if pure:
    sys.exit("the compiled wheel did not compile these (mypyc fell back?):\n" + "\n".join(pure))
print(f"compiled: {len(names)} modules, e.g. {files[names[0]]}")
"""
"""Exits non-zero naming every listed module that was imported from a ``.py`` file."""


def compiled_wheel(session: nox.Session) -> Path:
    """Build aguikit's compiled wheel (mypyc) into the session's tmp and return it.

    Built by ``python -m build`` from the sdist it builds first, as a release is: the sdist's
    unpacked copy takes hatch-mypyc's in-place ``.so`` files, never ``src/``, where a stale
    one would shadow edited source.  A failed compile fails here (hatch-mypyc raises)."""
    session.install("build")
    out = Path(session.create_tmp()).resolve() / "dist"
    shutil.rmtree(out, ignore_errors=True)
    session.run(
        "python",
        "-m",
        "build",
        "--outdir",
        str(out),
        str(ROOT),
        env={"HATCH_BUILD_HOOKS_ENABLE": "1"},
    )
    (wheel,) = out.glob("aguikit-*.whl")
    if wheel.name.endswith("-none-any.whl"):
        session.error(f"{wheel.name} is a pure wheel: the mypyc build hook did not run")
    return wheel


WHEEL_CACHE: Final = ROOT / ".nox" / ".wheels"
"""Where ``tests/test_readme.py`` leaves the compiled wheel the README's build commands
built, under the digest of the tree it was built from (``tests/tree_digest.py``)."""


def readme_wheel(session: nox.Session) -> Path | None:
    """The compiled wheel the ``tests`` session's README test built from this very tree for
    this session's interpreter, if there is one: one compile serves both sessions."""
    sys.path.insert(0, str(ROOT))
    try:
        from tests.tree_digest import tree_digest
    finally:
        sys.path.remove(str(ROOT))
    python = session.python if isinstance(session.python, str) else None  # None: nox's own
    tag = "cp" + (python or f"{sys.version_info[0]}.{sys.version_info[1]}").replace(".", "")
    kept = sorted((WHEEL_CACHE / tree_digest(ROOT)).glob(f"aguikit-*-{tag}-*.whl"))
    if kept:
        session.log(f"the compiled wheel the README's commands built: {kept[-1]}")
    return kept[-1] if kept else None


def install_compiled(session: nox.Session, *extras: str) -> None:
    """Install the compiled wheel, non-editable, with ``extras``' dependencies, and the same
    wheel again over any older one of the same version (a reused venv); then fail loudly if
    any module of the list is not an extension module."""
    wheel = readme_wheel(session) or compiled_wheel(session)
    session.install(f"{wheel}[{','.join(extras)}]" if extras else str(wheel))
    session.install("--force-reinstall", "--no-deps", str(wheel))
    session.run("python", "-c", ASSERT_COMPILED, *COMPILED)


@nox.session(tags=["check"])
def tests_compiled(session: nox.Session) -> None:
    """The whole suite again, against the compiled wheel installed as users get it.

    The pure package and the compiled one are the same source; this proves the compiled one
    behaves the same (``AGUIKIT_BUILD=compiled``: tests/test_build.py fails if the modules
    imported are not the compiled ones).  Never skips: a failed compile fails the session."""
    install_compiled(session, "test")
    session.install(*TEST_TOOLS)
    install_node_packages(session)
    ignored = [f"--ignore={path}" for path in UNCOMPILED_TESTS]
    session.run("pytest", *ignored, *session.posargs, env={"AGUIKIT_BUILD": "compiled"})


@nox.session(tags=["check"])
def integrations(session: nox.Session) -> None:
    """Real AG-UI producers, pinned and offline (fake models), judged by aguikit.testing."""
    session.install("-e", ".[test]", *PRODUCERS)
    # Fixed arguments: `nox -- -k foo` is meant for the unit tests' pytest.
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        str(INTEGRATIONS),
        f"--ignore={AGENT_FRAMEWORK}",
        f"--ignore={ADK}",
    )


@nox.session(tags=["check"])
def integrations_agent_framework(session: nox.Session) -> None:
    """Microsoft Agent Framework's AG-UI endpoint, pinned and offline, in its own venv."""
    session.install("-e", ".", "pytest", AGENT_FRAMEWORK_PRODUCER)
    session.run("pytest", "-p", "no:cacheprovider", str(AGENT_FRAMEWORK))


@nox.session(tags=["check"])
def integrations_adk(session: nox.Session) -> None:
    """Google ADK's AG-UI middleware, pinned and offline (a scripted BaseLlm), own venv."""
    session.install("-e", ".", "pytest", ADK_PRODUCER)
    session.run("pytest", "-p", "no:cacheprovider", str(ADK))


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """The main job on the bundled example: `aguikit check` and `aguikit replay` (aguikit demo)."""
    session.install("-e", ".")
    # As `python -m aguikit`: the demo then prints its commands under this environment's
    # interpreter, by absolute path, since a user's shell has no `aguikit` of nox's.
    session.run("python", "-m", "aguikit", "demo", *session.posargs)


@nox.session(tags=["check"])
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(tags=["check"])
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src/ (generated code included: it is typed like the rest)."""
    # The optional extras too: the server speaks Starlette (and Redis), interop the official
    # SDK, the pytest plugin pytest, aguikit.otel the OpenTelemetry API; the protobuf stubs
    # type the generated agui_pb2.
    session.install(
        "-e",
        ".[server,sdk,redis,testing,otel,proxy,view]",
        "mypy",
        "types-jsonschema",
        "types-protobuf",
    )
    session.run("mypy", "--strict", str(SRC))


@nox.session
def codegen(session: nox.Session) -> None:
    """Regenerate src/aguikit/_generated/ from schema/ after a schema change."""
    session.install("-e", ".", DMCG, PROTOC)
    session.run("python", str(CODEGEN), *session.posargs)


@nox.session(tags=["check"])
def codegen_check(session: nox.Session) -> None:
    """Fail, naming the files, when the checked-in generated code differs from schema/, and
    naming the field, when schema/proto-ledger.txt lacks a number or lost or changed one."""
    session.install("-e", ".", DMCG, PROTOC)
    # No posargs: `nox -- -k foo` (and `./dev test -- -k foo`) are pytest's arguments, and
    # every default session receives them; a check with fixed arguments must ignore them.
    session.run("python", str(CODEGEN), "--check")


REDIS_EXTRA: Final = next(
    r for r in PYPROJECT["project"]["optional-dependencies"]["redis"] if r.startswith("redis")
)
"""The redis-py range the ``redis`` extra admits (``redis>=5.0,<9``): one place, pyproject."""
REDIS_ENDS: Final = {
    "oldest": "redis==" + REDIS_EXTRA.split(">=", 1)[1].split(",", 1)[0],
    "newest": REDIS_EXTRA,
}
"""Both ends of that range: its lower bound exactly, and the newest release it admits."""
REDIS_TESTS: Final = [
    "tests/test_redis_faults.py",
    "tests/test_resume.py",
    "tests/test_server_access.py",
    "tests/test_thread_faults.py",
]
SERVER_TESTS: Final = [
    "tests/test_server_http.py",
    "tests/test_server_faults.py",
    "tests/test_server_stop.py",
    "tests/test_client_faults.py",
]
"""What the server session runs on each CPython: cancellation, send and settle deadlines,
lost cancellations and connection faults, whose asyncio behaviour changed between 3.11 and
3.13 (the Redis faults run in the redis sessions, everything on 3.11 in ``tests``)."""
SUPPORTED_PYTHONS: Final = ["3.11", "3.13"]
"""The oldest CPython ``requires-python`` admits and the newest the classifiers name."""
UNCOMPILED_TESTS: Final = [
    *SERVER_TESTS,
    *REDIS_TESTS,
    "tests/test_server_integration.py",
    "tests/test_server_producer.py",
    "tests/test_server_requests.py",
    "tests/test_server_writer.py",
    "tests/test_prelude.py",
    "tests/test_doctor.py",
    "tests/test_replay.py",
    "tests/test_otel.py",
    "tests/test_view.py",
    "tests/test_differential.py",
    "tests/test_models.py",
    "tests/test_proto_official.py",
    "tests/test_interop_sdk.py",
]
"""Modules whose tests drive mostly what the compiled wheel leaves pure (the server, the event
logs and the prelude, the client's reconnects, doctor, replay, telemetry, the page) over
processes, sockets, Node or a browser: the compiled session leaves them out rather than run
the same pure code twice, to keep CI under 30 minutes (the compiled core they pass through
is what the rest of the suite tests in that session; the differential against the official
client, which judges through that core, runs in the pure session).  The generated models, the
protobuf transport against @ag-ui/proto and the official SDK's conversion call no compiled
function but ``validate``'s, and that only on documents the rest holds (a profile of the pure
session counted 0, 0 and 1,688 calls, all ``validate``)."""


@nox.session(default=False)
@nox.parametrize("end", list(REDIS_ENDS))
def redis(session: nox.Session, end: str) -> None:
    """The Redis event log's tests against the oldest and the newest redis-py the
    ``redis`` extra admits, on a real redis-server (AGUIKIT_REQUIRE_REDIS: never a skip);
    each run says which redis-py it had."""
    session.install("-e", ".[test]")
    session.install("--upgrade", REDIS_ENDS[end])
    session.run("python", "-c", "import redis; print('redis-py', redis.__version__)")
    session.run(
        "pytest", *REDIS_TESTS, *session.posargs,
        env={"AGUIKIT_BUILD": "pure", "AGUIKIT_REQUIRE_REDIS": "1"},
    )  # fmt: skip


@nox.session(python=SUPPORTED_PYTHONS, default=False)
def server(session: nox.Session) -> None:
    """The server's, the event logs' and the client's fault tests on the oldest and the
    newest CPython supported (cancellation and timeouts changed between them)."""
    session.install("-e", ".[test]")
    session.run(
        "pytest", *SERVER_TESTS, *session.posargs,
        env={"AGUIKIT_BUILD": "pure", "AGUIKIT_REQUIRE_REDIS": "1"},
    )  # fmt: skip


@nox.session(default=False)
@nox.parametrize("end", list(REDIS_ENDS))
def faults(session: nox.Session, end: str) -> None:
    """Issue 29's fault campaign (bench/faults.py): at least 1,000 random cuts over at least
    100 runs per set-up, every run equal to the uninterrupted one, no hang, nothing left in
    Redis, SIGTERM exits within 5 s; the Redis set-ups with each end of the redis-py range
    (the memory log's once, with the newest).  Minutes: opt-in."""
    session.install("-e", ".[test]")
    session.install("--upgrade", REDIS_ENDS[end])
    setups = "redis-1-worker,redis-2-workers" + (",memory" if end == "newest" else "")
    arguments = session.posargs or ["--setups", setups]
    session.run("python", "bench/faults.py", *arguments, env={"AGUIKIT_REQUIRE_REDIS": "1"})
    # Issue 28's background-run faults, repeated: each prints its time to RUN_ERROR.
    session.run(
        "pytest", "-s", "-p", "no:cacheprovider", "tests/test_thread_faults.py",
        env={"AGUIKIT_REQUIRE_REDIS": "1", "AGUIKIT_THREAD_FAULT_REPEATS": "20"},
    )  # fmt: skip


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks (µs per event, throughput, memory); never asserts on time.

    They measure the build users get, the compiled wheel installed non-editable; then
    bench_session.py runs again against the pure package (src/ first on ``PYTHONPATH``), so
    both builds' numbers print, each under its ``build:`` line."""
    install_compiled(session, "test")
    scripts = session.posargs or sorted(str(p) for p in BENCH.glob("bench_*.py"))
    for script in scripts:
        session.run("python", script)
    for script in scripts:
        if Path(script).name == "bench_session.py":
            session.run("python", script, env={"PYTHONPATH": str(ROOT / "src")})


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """Long hostile-input run over every entry point: 100,000 seeded inputs per fuzz test
    (AGUIKIT_FUZZ_INPUTS), 100,000 streams judged against the official client
    (AGUIKIT_DIFF_STREAMS, tests/test_differential.py) and the ``fuzz`` hypothesis profile;
    takes tens of minutes."""
    session.install("-e", ".[test]")
    install_node_packages(session)
    session.run(
        "pytest",
        "-m",
        "fuzz",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={
            "HYPOTHESIS_PROFILE": "fuzz",
            "AGUIKIT_FUZZ_INPUTS": "100000",
            "AGUIKIT_DIFF_STREAMS": "100000",
        },
    )
