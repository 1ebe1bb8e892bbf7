"""The periods a retrieval query names, matched against when memories were written.

"What did Mel and her kids paint in July 2023?" names a period; the turns said in July 2023 are where the answer is
likelier to be, however little they resemble the question. `query_periods` reads the periods with the
time rules (`time_expressions.find_time_spans`, relative ones such as "last year" against the
request's moment) as `time_created` bounds, and `written_in` tells whether a memory's `time_created` (ReMe's
`YYYY-MM-DD HH:MM:SS`, which orders as text) lies in one of them. `RecallVectorStoreOp` searches each period too
(a store filter on `metadata.time_created`, the same text comparison) so that its memories join the candidates,
and adds `period_boost` to the score of those written within it.

On LoCoMo dev (each turn written at its session's date) 104 of the 760 questions name a period, mostly of the
"single-hop" category ("What did Gina find for her clothing store on 1 February, 2023?"); the bonus lifts session
recall@5 by about 0.02 under cross-validation (docs/retrieval_quality.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from reme_service.retrieval.time_expressions import find_time_spans, has_time_word
from reme_service.schema.memory import TIME_FORMAT

MAX_PERIODS = 2  # periods searched per query ("between August 11 and August 15"); more are rare and cost a search
Period = tuple[str, str]  # [start, end) as `time_created` text


def query_periods(query: str, moment: datetime) -> list[Period]:
    """The periods `query` names, read against `moment`, as `[start, end)` bounds of `time_created` (at most
    `MAX_PERIODS`, in order of appearance, repeats dropped). The rules run only when the query mentions time at all
    (`has_time_word`, ~5 µs against ~160 µs for the rules; on LoCoMo every question with a period passes it)."""
    if not has_time_word(query):
        return []
    periods: list[Period] = []
    for span in find_time_spans(query, moment):
        period = (span.start.strftime(TIME_FORMAT), span.end.strftime(TIME_FORMAT))
        if period not in periods:
            periods.append(period)
        if len(periods) == MAX_PERIODS:
            break
    return periods


def written_in(time_created: object, periods: Sequence[Period]) -> bool:
    """Whether a memory's `time_created` text lies in one of `periods` (text comparison, as the store filter)."""
    return isinstance(time_created, str) and any(start <= time_created < end for start, end in periods)


def period_filter(period: Period, base: Mapping[str, Any] | None) -> dict[str, Any]:
    """`base` (a store filter, or None) narrowed to the memories written in `period`."""
    start, end = period
    return {**(base or {}), "metadata.time_created": {"gte": start, "lt": end}}
