from types import SimpleNamespace as NS

import pytest

from hbfsim.serve.scheduler import Scheduler


def test_orders():
    w = [NS(name=c, index=i, i=i) for i, c in enumerate("abcd")]
    hot = {"c", "d"}
    res = lambda r: r.name in hot  # noqa: E731
    assert [r.name for r in Scheduler("fcfs").candidates(w, res)] == list("abcd")
    assert [r.name for r in Scheduler("cache-aware").candidates(w, res)] == list("cdab")
    assert [r.name for r in Scheduler("cache-aware", window=2).candidates(w, res)] == ["a", "b"]


def test_kept_contexts_come_first_from_anywhere_in_the_queue():
    """A waiting request whose session keeps its context is tried first even beyond the
    window; it is not tried twice; FCFS ignores it."""
    w = [NS(name=c, index=1, i=i) for i, c in enumerate("abcdef")]
    kept = [w[4], w[1]]
    res = lambda r: r.name == "c"  # noqa: E731
    order = [r.name for r in Scheduler("buffered", window=3).candidates(w, res, iter(kept))]
    assert order == ["e", "b", "c", "a", "d"]
    assert [r.name for r in Scheduler("fcfs").candidates(w, res, iter(kept))] == list("abcdef")


@pytest.mark.parametrize("index,need,busy,protected,ok", [
    (0, 100, 500, 300, True), (0, 101, 500, 300, False), (3, 501, 500, 300, False),
    (3, 500, 500, 0, True), (3, 400, 500, 300, True)])
def test_headroom_protects_open_prefixes_from_new_sessions(index, need, busy, protected, ok):
    """A newcomer fits in 90 % of capacity beside running and protected idle pages; a
    returning turn only needs the running pages to leave it room, unless its context left
    the device (``lost``): then it is a newcomer."""
    r = NS(index=index)
    assert Scheduler("buffered", 0.10).admits(r, need, busy, protected, 1000) is ok
    assert Scheduler("cache-aware").admits(r, need, busy, protected, 1000) is \
        (busy + need <= 1000)
    as_new = Scheduler("buffered", 0.10).admits(NS(index=0), need, busy, protected, 1000)
    assert Scheduler("buffered", 0.10).admits(r, need, busy, protected, 1000,
                                              lost=True) is as_new
    assert Scheduler("cache-aware").admits(r, need, busy, protected, 1000, lost=True) is \
        (busy + need <= 1000)


@pytest.mark.parametrize("kw,word", [(dict(name="lifo"), "scheduler"),
                                     (dict(name="buffered", headroom=1.0), "headroom"),
                                     (dict(window=0), "window")])
def test_bad_scheduler_options(kw, word):
    with pytest.raises(ValueError, match=word):
        Scheduler(**kw)
