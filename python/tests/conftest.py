"""Every async test runs twice: on asyncio's default loop and on uvloop."""
import asyncio
import gc
import os

import pytest
import uvloop

import cudaev
from cudaev import _native

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def pytest_generate_tests(metafunc):
    # pytest-asyncio asks for event_loop by name at run time, so the loop kind
    # is parametrised here for every coroutine test and every test naming it.
    if asyncio.iscoroutinefunction(metafunc.function) and "loop_kind" not in metafunc.fixturenames:
        metafunc.fixturenames.append("loop_kind")
    if "loop_kind" in metafunc.fixturenames:
        metafunc.parametrize("loop_kind", sorted(LOOPS))


@pytest.fixture
def loop_kind(request):
    return request.param


@pytest.fixture
def event_loop(loop_kind):
    loop = LOOPS[loop_kind]()
    yield loop
    cudaev.detach(loop)
    loop.close()


@pytest.fixture
def new_loop(loop_kind):
    """A factory of fresh loops of the test's kind (for tests that make several)."""
    return LOOPS[loop_kind]


@pytest.fixture
def unraisable(monkeypatch):
    """Collects what reaches sys.unraisablehook (errors inside C callbacks)."""
    import sys
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u))
    return seen


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def live_ops():
    gc.collect()
    return _native.live_ops()


def pytest_report_header(config):
    return f"cudaev from {os.path.dirname(cudaev.__file__)}"


def pytest_sessionstart(session):
    # ci.sh runs the unpacked wheel: make sure that is what was imported.
    want = os.environ.get("CUDAEV_EXPECT_FROM")
    if want and not os.path.realpath(cudaev.__file__).startswith(os.path.realpath(want)):
        raise pytest.UsageError(f"cudaev imported from {cudaev.__file__}, not from {want}")
