DROP TRIGGER IF EXISTS runs_delete_marks ON runs;
DROP FUNCTION IF EXISTS run_marks_delete();
DROP TABLE IF EXISTS run_marks;
