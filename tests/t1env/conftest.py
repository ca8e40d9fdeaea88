import pytest

from t1env.episode.shell import ShellSession
from t1env.sandbox.local import LocalSandbox


@pytest.fixture
def box():
    b = LocalSandbox()
    b.start()
    yield b
    b.stop()


@pytest.fixture
def shell(box):
    s = ShellSession(box)
    s.start()
    yield s
    s.close()


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker("needs_bwrap")
