-- Work that one replica of the cluster does at a time, for as long as it
-- is alive: a chat channel's receiving (Telegram's long polling, Discord's
-- gateway connection, Slack's socket). A lease whose replica stopped
-- renewing its presence is the next replica's to take.
CREATE TABLE pincer_leases (
    name TEXT PRIMARY KEY,
    replica TEXT NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What the channels received, by the platform's id of it: a message or
-- a button press is taken by the first replica that writes its id here,
-- so that one delivered twice (a webhook retried, an update polled again
-- after its poller died) is answered once across the cluster.
CREATE TABLE pincer_inbound (
    id TEXT PRIMARY KEY,
    replica TEXT NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX pincer_inbound_by_time ON pincer_inbound (taken_at);
