-- The replicas of a team gateway, as each last said it was alive.
CREATE TABLE pincer_replicas (
    name TEXT PRIMARY KEY,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    version TEXT NOT NULL
);

-- Scheduled runs claimed across the cluster: a `[[cron]]` job's run at
-- its time, or the heartbeat's in its interval, belongs to the one
-- replica whose claim was written first.
CREATE TABLE pincer_schedule_claims (
    name TEXT NOT NULL,
    slot_ms BIGINT NOT NULL,
    replica TEXT NOT NULL,
    claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (name, slot_ms)
);
