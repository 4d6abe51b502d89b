-- Sessions deleted (`sessions.delete`): their lines are deleted with them,
-- and a line still on its way to the store when the session was deleted
-- is not written (the lines' writer skips the sessions named here). A
-- session is named here a day, and its lines are deleted again hourly
-- meanwhile, for a line that raced the deletion.
CREATE TABLE pincer_deleted_sessions (
    session_id TEXT PRIMARY KEY,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
