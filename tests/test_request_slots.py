"""The runner's slots (ragplan.eval.question_runner.Slots): at most ``n`` LLM requests in flight; ``n`` questions, and
up to ``2n`` while every question in flight is at the endpoint, so the next questions' requests are ready when a reply
frees a slot. Events, not timings: threads block on real events and the test waits for them with a generous bound."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ragplan.eval.question_runner import GivenUp, Slots
from ragplan.llm import on_send


def _send() -> None:
    """What the OpenAI client built by ragplan.llm does just before it sends a request."""
    hook = on_send.get()
    assert hook is not None
    hook()

BOUND_S = 30  # against a hang only


async def _until(check) -> None:
    for _ in range(BOUND_S * 100):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def test_n_requests_at_most_and_the_next_questions_start_only_when_every_one_waits_on_the_endpoint():
    async def scenario() -> None:
        slots, n = Slots(2), 2
        release, inside, most, lock = threading.Event(), [0], [0], threading.Lock()
        admitted: list[int] = []

        def graph(i: int) -> None:  # one request, held until `release`
            with slots.request(lambda: None, threading.Event(), True):
                _send()
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                release.wait(BOUND_S)
                with lock:
                    inside[0] -= 1

        async def question(i: int) -> None:
            admitted.append(i)
            try:
                await asyncio.to_thread(graph, i)
            finally:
                slots.leave()

        fed = asyncio.create_task(slots.feed(question, range(6)))
        await _until(lambda: inside[0] == n)  # the first two send their requests ...
        await _until(lambda: len(admitted) == 2 * n)  # ... then two more are prepared and wait for a slot
        await asyncio.sleep(0.2)
        assert len(admitted) == 2 * n and inside[0] == n  # never more than 2n questions, n requests
        release.set()
        await asyncio.wait_for(fed, BOUND_S)
        assert sorted(admitted) == list(range(6)) and most[0] == n

    asyncio.run(scenario())


def test_no_question_beyond_n_starts_while_one_is_working():
    async def scenario() -> None:
        slots = Slots(1)
        working, done, admitted = threading.Event(), threading.Event(), []

        async def question(i: int) -> None:
            admitted.append(i)
            try:
                await asyncio.to_thread(lambda: (working.set(), done.wait(BOUND_S)))  # no request: working all along
            finally:
                slots.leave()

        fed = asyncio.create_task(slots.feed(question, range(2)))
        await _until(working.is_set)
        await asyncio.sleep(0.2)
        assert admitted == [0]
        done.set()
        await asyncio.wait_for(fed, BOUND_S)
        assert admitted == [0, 1]

    asyncio.run(scenario())


def test_feed_starts_a_question_only_when_there_is_room_so_a_large_batch_holds_few_tasks():
    """The questions of a batch are started one by one as room frees (not all at once, waiting on the slots):
    at most 2n question tasks exist at any time, whatever the batch's size, and each is run once, in order."""
    async def scenario() -> None:
        slots, started, most = Slots(2), [], [0]

        async def question(i: int) -> None:
            most[0] = max(most[0], len(asyncio.all_tasks()) - 1)  # (the feeding task itself)
            started.append(i)
            try:
                await asyncio.sleep(0)
            finally:
                slots.leave()

        await asyncio.wait_for(slots.feed(question, range(1_000)), BOUND_S)
        assert started == list(range(1_000)) and most[0] <= 4 and slots.running == 0

    asyncio.run(scenario())


def test_feed_raises_the_first_failure_and_cancels_the_questions_in_flight():
    async def scenario() -> None:
        slots, cancelled, started = Slots(3), [], []

        async def question(i: int) -> None:
            started.append(i)
            try:
                if i == 1:
                    raise OSError("disk full")
                await asyncio.sleep(BOUND_S)
            except asyncio.CancelledError:
                cancelled.append(i)
                raise
            finally:
                slots.leave()

        with pytest.raises(OSError, match="disk full"):
            await asyncio.wait_for(slots.feed(question, range(100)), BOUND_S)
        await asyncio.sleep(0)
        assert len(started) < 100 and sorted(cancelled) == [i for i in started if i != 1]

    asyncio.run(scenario())


def test_a_question_given_up_while_it_waits_for_a_slot_sends_nothing():
    async def scenario() -> None:
        slots = Slots(1)
        held, release, given_up, counted, sent = threading.Event(), threading.Event(), threading.Event(), [], []

        def first() -> None:
            with slots.request(lambda: counted.append(1), threading.Event(), True):
                _send()
                held.set()
                release.wait(BOUND_S)

        def second() -> None:
            with slots.request(lambda: counted.append(2), given_up, True):
                _send()
                sent.append(2)

        t = asyncio.create_task(asyncio.to_thread(first))
        await _until(held.is_set)
        waiting = asyncio.create_task(asyncio.to_thread(second))
        await _until(lambda: slots.waiting == 2)
        given_up.set()
        with pytest.raises(GivenUp):
            await asyncio.wait_for(waiting, BOUND_S)
        release.set()
        await asyncio.wait_for(t, BOUND_S)
        assert counted == [1] and sent == [] and slots.waiting == 0  # never sent, never counted

    asyncio.run(scenario())


def test_the_openai_client_made_here_calls_on_send_before_each_request(monkeypatch):
    """The slot is taken where the request leaves (the HTTP client's request hook), not before the request is built."""
    from ragplan.llm import load_chat_model
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen: list[int] = []
    with OpenAIStub(replies=["hello", "again"]) as stub:
        model = load_chat_model("openai:stub", base_url=stub.base_url)
        token = on_send.set(lambda: seen.append(len(stub.requests)))
        try:
            model.invoke("hi")
            model.invoke("hi")
        finally:
            on_send.reset(token)
    assert seen == [0, 1]  # before each request reached the server
    from ragplan.llm import _sends_hook
    from tests.scripted import ScriptedChatModel

    assert _sends_hook(model) and _sends_hook(model.bind(temperature=0))  # (a request leaves through the hook)
    assert not _sends_hook(ScriptedChatModel(replies=[]))  # another model's request is counted when it is made
