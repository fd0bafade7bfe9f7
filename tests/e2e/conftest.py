import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import l7env  # noqa: E402


@pytest.fixture(scope="module")
def env(request):
    """A cgroup, backends and daemon for one test module (see l7env.Env)."""
    l7env.skip_unless_runnable()
    name = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "")
    e = l7env.Env(name)
    yield e
    warnings = e.kernel_warnings()
    e.close()
    # a backend thread left running would answer, in a later module, bytes
    # it has no business seeing (seen: one module's backend answering
    # another's request)
    l7env.RawBackend.close_all()
    assert not warnings, "kernel warnings during the test:\n" + "\n".join(warnings)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(autouse=True)
def daemon_log_on_failure(request):
    """Attach the last lines of l7fastd's log to a failing test's output:
    the daemon of the module's `env` fixture, or of the environments of its
    `w` world fixture (w.env, or w.kern and w.slow side by side)."""
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.failed:
        return
    envs = []
    if "env" in request.fixturenames:
        envs.append(request.getfixturevalue("env"))
    if "w" in request.fixturenames:
        w = request.getfixturevalue("w")
        envs += [getattr(w, a) for a in ("env", "kern", "slow") if getattr(w, a, None) is not None]
    for env in {id(e): e for e in envs}.values():  # w.env is often the module's env
        if env.daemon:
            tail = "\n".join(env.daemon.log().splitlines()[-60:])
            print(f"\n--- l7fastd log (last 60 lines) ---\n{tail}")
