"""Posts wait for a lull in incoming requests, so that acknowledgements keep Slack's 3 s."""

from __future__ import annotations

import threading
import time

from triage.service.slack import Lull


def _touch_for(lull: Lull, seconds: float, every: float) -> list[tuple[float, float]]:
    """Touch the lull every `every` s for `seconds`; for each touch, instants just before and after."""
    touched: list[tuple[float, float]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        before = time.monotonic()
        lull.touch()
        touched.append((before, time.monotonic()))
        time.sleep(every)
    return touched


def _earliest_lull(touched: list[tuple[float, float]], quiet: float) -> float:
    """The first instant a lull of `quiet` s could have begun, even if the toucher stalled."""
    for (before, _), (_, next_after) in zip(touched, touched[1:]):
        if next_after - before >= quiet:
            return before + quiet
    return touched[-1][0] + quiet


def _wait_in_thread(lull: Lull, stop: threading.Event) -> tuple[threading.Thread, list[float]]:
    out: list[float] = []

    def run() -> None:
        lull.wait(stop)
        out.append(time.monotonic())

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_post_waits_while_requests_keep_coming_and_goes_at_the_first_lull():
    lull = Lull(quiet_s=0.3, max_wait_s=10.0)
    lull.touch()
    waiter, returned = _wait_in_thread(lull, threading.Event())
    touched = _touch_for(lull, 1.0, every=0.01)
    waiter.join(10)
    assert returned, "the wait did not end"
    began = _earliest_lull(touched, 0.3)
    assert began <= returned[0] <= touched[-1][1] + 0.3 + 2.0


def test_a_steady_stream_of_requests_holds_a_post_back_no_longer_than_the_maximum():
    lull = Lull(quiet_s=1.0, max_wait_s=0.4)  # no lull can begin before the maximum is reached
    lull.touch()
    started = time.monotonic()
    waiter, returned = _wait_in_thread(lull, threading.Event())
    _touch_for(lull, 3.0, every=0.01)
    waiter.join(10)
    assert returned and 0.4 <= returned[0] - started < 2.5  # requests went on for 3 s


def test_an_idle_server_posts_at_once_and_stopping_ends_the_wait():
    assert Lull(quiet_s=0.3, max_wait_s=5.0).wait(threading.Event()) < 0.05
    busy = Lull(quiet_s=5.0, max_wait_s=30.0)
    busy.touch()
    stop = threading.Event()
    started = time.monotonic()
    waiter, returned = _wait_in_thread(busy, stop)
    stop.set()
    waiter.join(10)
    assert returned and returned[0] - started < 2.0


def test_the_server_marks_each_incoming_post_and_no_get(live):
    server = live(post_lull_s=2.0, post_max_defer_s=2.0)
    lull = server.service.lull
    assert server.service.poster.lull is lull
    server.http.get("/healthz")
    assert lull.wait(threading.Event()) < 0.05  # a GET is not a request to acknowledge
    server.http.post("/slack/commands", content=b"token=x")  # unsigned: refused, but it came in
    assert lull.wait(threading.Event()) >= 0.5
