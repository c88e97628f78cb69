DROP TRIGGER runs_fence_gone ON runs;
DROP TRIGGER runs_fence_claim ON runs;
DROP FUNCTION threadline_fence_move();
DROP TABLE run_fence;
