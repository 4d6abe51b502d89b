-- The live events of the runs going on (their text as it streams, their
-- tool calls and questions), numbered from 1 per run in the order the
-- replica running it told them on the bus: a replica that starts while a
-- run goes on, or misses some of its events, reads them from here before
-- it follows the bus. A run's events are deleted a minute after it ended
-- (its transcript keeps what it said); any older than a day, whatever
-- happened to their run, too.
CREATE TABLE pincer_run_events (
    run TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run, seq)
);
