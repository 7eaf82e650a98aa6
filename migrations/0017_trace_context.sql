-- Tracing (SPEC §21): the W3C trace context of the request that enqueued a
-- job, as a text map ({"traceparent": "...", "tracestate": "..."}), so the
-- job's run joins that trace (docs/decisions/0032). No constraint: a value a
-- plain-SQL producer got wrong must never refuse its enqueue nor fail a
-- claim; the worker takes what it cannot read as no context at all.
ALTER TABLE awc.jobs ADD COLUMN trace_context jsonb;
