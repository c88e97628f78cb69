DROP TABLE run_events;
DROP TABLE runs;
DROP TABLE checkpoints;
DROP FUNCTION checkpoints_immutable();
DROP TABLE threads;
