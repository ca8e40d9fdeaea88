import os

import pytest

from t1env.resources import CACHE_ENV


@pytest.fixture(autouse=True, scope="session")
def _family_cache(tmp_path_factory):
    """Family instances are generated into a per-session cache, not the user's ~/.cache."""
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("t1-cache"))
    yield
    if old is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = old
