-- Messages one replica took for a session another replica runs: queued
-- here first, then claimed by the replica that runs them (the session's,
-- or the one that takes the session over when that replica is gone), one
-- claim a message (`FOR UPDATE SKIP LOCKED`), so that none is lost with a
-- replica that dies and none runs twice. Claimed rows are kept a day,
-- unclaimed ones a week.
CREATE TABLE pincer_run_queue (
    run TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    message TEXT NOT NULL,
    queued_by TEXT NOT NULL,
    queued_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    claimed_by TEXT,
    claimed_at TIMESTAMPTZ
);
CREATE INDEX pincer_run_queue_waiting ON pincer_run_queue (key, queued_at)
    WHERE claimed_by IS NULL;
