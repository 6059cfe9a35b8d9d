-- The W3C trace context of the request that enqueued a task (traceparent,
-- then a newline and the tracestate), so the work joins that trace; NULL
-- when the request was not traced.
ALTER TABLE work_tasks ADD COLUMN trace_context TEXT;
