"""The compiled engine's tests skip, with engine_status()'s line as the reason, only when the
extension is not built (a machine without a C++ compiler); a stale build fails them, since
they would compare the golden model with old code. ``HBFSIM_REQUIRE_ENGINE=1`` turns the
skip into a failure too (for a CI that must build the engine)."""

import os

import pytest

from hbfsim.engine import compiled_available, engine_status, stale


# function scope: a module- or session-scoped fixture would pin each module to one
# pytest-xdist worker (tests/conftest.py groups tests by their widest fixture)
@pytest.fixture(autouse=True)
def compiled_engine():
    if not compiled_available():
        if os.environ.get("HBFSIM_REQUIRE_ENGINE") == "1":
            pytest.fail(engine_status())
        pytest.skip(engine_status())
    if stale():
        pytest.fail(engine_status())
