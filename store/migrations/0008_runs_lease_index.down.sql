DROP INDEX runs_lease;
CREATE INDEX runs_lease ON runs (lease_until) WHERE status = 'running';
