-- The sessions of a team gateway: which replica runs each one, by the key
-- its clients name it with, and the run it has going (NULL when idle). A
-- replica takes a session whose replica is gone (its presence not renewed
-- within the lease); a run going when its replica went was interrupted.
CREATE TABLE pincer_sessions (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    replica TEXT NOT NULL,
    running TEXT,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX pincer_sessions_by_id ON pincer_sessions (session_id);

-- Every session's transcript, line by line (the JSONL lines the replica
-- running it writes), numbered from 1 per session: the replica that takes
-- a session over reads it from here.
CREATE TABLE pincer_session_lines (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
