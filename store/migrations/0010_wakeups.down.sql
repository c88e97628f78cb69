DROP TABLE run_owners;
DROP TRIGGER threads_notify_gone ON threads;
DROP FUNCTION threadline_notify_thread_gone();
DROP TRIGGER runs_notify_gone ON runs;
DROP FUNCTION threadline_notify_runs_gone();
DROP TRIGGER runs_notify ON runs;
DROP FUNCTION threadline_notify_run_row();
