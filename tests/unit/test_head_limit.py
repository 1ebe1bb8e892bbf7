"""`EdgeHttpProtocol`'s count of a request head's bytes, read by read: the head ends at its blank line wherever the
reads split it, and the body after it is never counted (the 431 itself: tests/service/test_http_edge.py)."""

from __future__ import annotations

import pytest

from reme_service.server.protocol import EdgeHttpProtocol

HEAD = b"POST /retrieve_task_memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"
BODY = b'{"workspace_id": "ws", "query": "x\n\nx"}'


def counter(limit: int) -> EdgeHttpProtocol:
    """A protocol object with only its head accounting set up (no connection, no server)."""
    proto = object.__new__(EdgeHttpProtocol.configured(
        header_timeout=10.0, max_header_bytes=limit, max_connections=None, retry_after=1
    ))  # fmt: skip
    proto._head_bytes = 0
    proto._head_tail = b""
    return proto


def count(reads: list[bytes], limit: int = 10_000) -> tuple[int, list[bool]]:
    """The head's byte count after `reads`, and the verdict of each read fed while the head was incomplete (the
    parser completes it, and the protocol stops counting, in the read that holds its blank line)."""
    proto = counter(limit)
    verdicts = []
    received = 0
    for data in reads:
        verdicts.append(proto._head_too_large(data))
        received += len(data)
        if verdicts[-1] or received >= head_length(reads):
            break
    return proto._head_bytes, verdicts


def head_length(reads: list[bytes]) -> int:
    request = b"".join(reads)
    return min(at + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (at := request.find(mark)) >= 0)


@pytest.mark.parametrize("line_end", [b"\r\n", b"\n"])
def test_the_head_is_counted_to_its_blank_line_wherever_the_reads_split_it(line_end: bytes) -> None:
    head = HEAD.replace(b"\r\n", line_end)
    request = head + BODY
    for cut in range(1, len(request)):
        assert count([request[:cut], request[cut:]])[0] == len(head), cut
    for first, second in [(5, 9), (len(head) - 3, len(head) - 1), (len(head) - 2, len(head) + 4)]:
        reads = [request[:first], request[first:second], request[second:]]
        assert count(reads)[0] == len(head), (first, second)
    assert count([request[i : i + 1] for i in range(len(request))])[0] == len(head)  # a byte a read


def test_a_head_over_the_limit_is_refused_at_the_read_that_takes_it_over() -> None:
    request = HEAD + BODY
    assert count([request], limit=len(HEAD))[1] == [False]  # exactly at the limit: served
    assert count([request], limit=len(HEAD) - 1)[1] == [True]  # one byte over, though complete in one read
    half = len(HEAD) // 2
    assert count([request[:half], request[half:]], limit=half + 1)[1] == [False, True]
    assert count([HEAD[:-4]], limit=len(HEAD) - 5)[1] == [True]  # incomplete and already over
