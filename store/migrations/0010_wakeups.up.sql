-- Wake-ups across processes (store.Notifier). Several stateless replicas
-- share this database; each LISTENs on one dedicated connection, and the
-- writes another replica must hear of at once send a NOTIFY, delivered
-- when (and only if) they commit:
--   threadline_run     payload: run ids (with ":<last seq>" from the group
--                      commit), comma separated: the run's log grew, it
--                      ended, or it was deleted.
--   threadline_change  payload "c:<run id>": a cancel was requested;
--                      "t:<thread id>": a thread was deleted.
-- The group commit's own NOTIFY is sent by the store (RunEventsAppend);
-- the rest come from the triggers below. The durable tables stay the source
-- of truth: a wake-up only says "read again".
CREATE FUNCTION threadline_notify_run_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.cancel_requested AND NOT OLD.cancel_requested AND NEW.status = 'running' THEN
        PERFORM pg_notify('threadline_change', 'c:' || NEW.id::text);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM pg_notify('threadline_run', NEW.id::text);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_notify AFTER UPDATE OF status, cancel_requested ON runs
    FOR EACH ROW EXECUTE FUNCTION threadline_notify_run_row();

CREATE FUNCTION threadline_notify_runs_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('threadline_run', id::text) FROM gone_runs WHERE status = 'running';
    RETURN NULL;
END;
$$;
CREATE TRIGGER runs_notify_gone AFTER DELETE ON runs
    REFERENCING OLD TABLE AS gone_runs
    FOR EACH STATEMENT EXECUTE FUNCTION threadline_notify_runs_gone();

CREATE FUNCTION threadline_notify_thread_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('threadline_change', 't:' || OLD.id::text);
    RETURN NULL;
END;
$$;
CREATE TRIGGER threads_notify_gone AFTER DELETE ON threads
    FOR EACH ROW EXECUTE FUNCTION threadline_notify_thread_gone();

-- Presence: every serving process holds, on its LISTEN connection, the
-- session advisory lock lock_key (hashtextextended('threadline owner ' ||
-- owner, 0)). Postgres releases it the moment that connection dies, so a
-- process whose row is here and whose lock is not held is dead, and the
-- others recover its runs at once instead of after their lease. Processes
-- without a row (no notifier) are left to the lease.
CREATE TABLE run_owners (
    owner      text        PRIMARY KEY,
    lock_key   bigint      NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
