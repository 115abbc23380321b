from types import SimpleNamespace as NS

import pytest

from hbfsim.serve.scheduler import Scheduler


def test_orders():
    w = [NS(name=c, index=i) for i, c in enumerate("abcd")]
    hot = {"c", "d"}
    res = lambda r: r.name in hot  # noqa: E731
    assert [r.name for r in Scheduler("fcfs").candidates(w, res)] == list("abcd")
    assert [r.name for r in Scheduler("cache-aware").candidates(w, res)] == list("cdab")
    assert [r.name for r in Scheduler("cache-aware", window=2).candidates(w, res)] == ["a", "b"]


def test_headroom_applies_to_new_sessions_only():
    s = Scheduler("buffered", 0.10)
    assert s.limit(NS(index=0), 1000) == 900
    assert s.limit(NS(index=3), 1000) == 1000
    assert Scheduler("cache-aware").limit(NS(index=0), 1000) == 1000


@pytest.mark.parametrize("kw,word", [(dict(name="lifo"), "scheduler"),
                                     (dict(name="buffered", headroom=1.0), "headroom"),
                                     (dict(window=0), "window")])
def test_bad_scheduler_options(kw, word):
    with pytest.raises(ValueError, match=word):
        Scheduler(**kw)
