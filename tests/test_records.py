import pytest

from perfkit.records import RequestRecord


def _streamed(token_times_s: list[float], arrival_s: float = 10.0, **kw: object) -> RequestRecord:
    return RequestRecord(
        request_id=1,
        arrival_s=arrival_s,
        prompt_tokens=8,
        output_tokens=len(token_times_s),
        first_token_s=token_times_s[0] if token_times_s else None,
        token_times_s=token_times_s,
        finish_s=token_times_s[-1] if token_times_s else None,
        **kw,  # type: ignore[arg-type]
    )


def test_latencies_of_a_streamed_request() -> None:
    rec = _streamed([10.5, 10.6, 10.8, 11.1], scheduled_s=10.2, finish_reason="length")
    assert rec.ttft_s == pytest.approx(0.5)
    assert rec.e2e_s == pytest.approx(1.1)
    assert rec.queue_s == pytest.approx(0.2)
    assert rec.tpot_s == pytest.approx((1.1 - 0.5) / 3)
    assert rec.itl_s == pytest.approx([0.1, 0.2, 0.3])
    assert rec.completed and rec.served


def test_tpot_is_mean_itl_when_finish_is_last_token() -> None:
    rec = _streamed([1.0, 1.25, 1.75, 2.0, 3.0], arrival_s=0.0)
    assert rec.tpot_s == pytest.approx(sum(rec.itl_s) / len(rec.itl_s))


def test_tpot_undefined_below_two_tokens() -> None:
    assert _streamed([10.3]).tpot_s is None
    assert _streamed([10.3]).itl_s == []
    assert _streamed([]).tpot_s is None


def test_missing_times_give_none() -> None:
    rec = RequestRecord(request_id=2, arrival_s=1.0, prompt_tokens=4, output_tokens=0)
    assert (rec.ttft_s, rec.e2e_s, rec.queue_s, rec.tpot_s) == (None, None, None, None)
    assert not rec.completed
    assert rec.last_seen_s == 1.0


def test_ttft_falls_back_to_first_token_time() -> None:
    rec = RequestRecord(request_id=3, arrival_s=1.0, prompt_tokens=4, output_tokens=2,
                        token_times_s=[1.5, 1.7])
    assert rec.ttft_s == pytest.approx(0.5)


@pytest.mark.parametrize(("reason", "rejected", "completed"), [
    ("stop", None, True),
    ("loop", None, True),
    ("cancelled", None, False),
    ("error", None, False),
    (None, "queue-full", False),
])
def test_completed(reason: str | None, rejected: str | None, completed: bool) -> None:
    rec = _streamed([10.5, 10.6], finish_reason=reason, rejected=rejected)
    assert rec.completed is completed


def test_last_seen_uses_latest_known_time() -> None:
    rec = RequestRecord(request_id=4, arrival_s=1.0, prompt_tokens=4, output_tokens=3,
                        scheduled_s=1.2, first_token_s=1.4, token_times_s=[1.4, 1.6, 2.5])
    assert rec.last_seen_s == 2.5
    rec.finish_s = 2.6
    assert rec.last_seen_s == 2.6
