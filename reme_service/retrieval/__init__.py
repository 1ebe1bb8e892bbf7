"""What several op families use to read queries and rank what they find, with no op in it.

* the time parser: `time_expressions` (`find_time_spans`, `has_time_word`, `asks_about_time`, `off_loop_for`),
  its English and Chinese rules (`time_expr_en`, `time_expr_zh`, on the calendar of `time_rules`), the spans it
  gives (`timespan`) and absolute timestamps (`timestamps`);
* `periods`: the periods a query names, as `time_created` bounds;
* `rescore`: query-aware bonuses on search candidates, and the session-diversified pick.

Layer: above `stores` and `schema`, below `ops`. The op families (`ops/personal`, `ops/vector_store`, ...) import
this package; it imports no op family (tests/unit/test_op_families.py checks both).
"""
