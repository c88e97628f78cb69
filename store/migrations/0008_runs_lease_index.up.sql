-- runs_lease had the same predicate as runs_one_active (status =
-- 'running'), so the planner could answer "the running run of this thread"
-- (threadline_run_begin, RunActive) by walking runs_lease over every
-- running run and filtering on thread_id. It did, with the generic plan a
-- session caches while the table is small: with 1,000 runs streaming, each
-- new run's start read all of them. With lease_until IS NOT NULL in its
-- predicate, runs_lease serves only queries that compare lease_until (the
-- claim of expired runs); a lookup by thread can only use runs_one_active.
DROP INDEX runs_lease;
CREATE INDEX runs_lease ON runs (lease_until) WHERE status = 'running' AND lease_until IS NOT NULL;
