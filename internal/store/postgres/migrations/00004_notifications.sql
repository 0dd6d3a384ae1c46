-- +goose Up
-- Where a turn's ending is announced (Turn.NotifyURL), and the outbox of
-- announcements not yet delivered (see Outbox). A trigger writes a turn's
-- notification in the statement that ends it, whichever statement that
-- is (End, or a reaper ending the turns of a lost replica), so that the
-- ending and its announcement are committed together or not at all.
-- Times are unix nanoseconds, as the turns' are; claimed_until 0 is
-- unclaimed.
ALTER TABLE turns ADD COLUMN notify_url text NOT NULL DEFAULT '';
CREATE TABLE notifications (
    turn_id       text COLLATE "C" PRIMARY KEY,
    url           text NOT NULL,
    created_at    bigint NOT NULL,
    due_at        bigint NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    claimed_by    text NOT NULL DEFAULT '',
    claimed_until bigint NOT NULL DEFAULT 0
);
CREATE INDEX notifications_due ON notifications (due_at);
-- +goose StatementBegin
CREATE FUNCTION turns_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notifications (turn_id, url, created_at, due_at)
    VALUES (NEW.id, NEW.notify_url, NEW.ended_at, NEW.ended_at)
    ON CONFLICT (turn_id) DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- Only an UPDATE that sets ended_at, of a turn with a target, runs it:
-- the journal's appends do not.
CREATE TRIGGER turns_notify AFTER UPDATE OF ended_at ON turns
FOR EACH ROW WHEN (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL AND NEW.notify_url <> '')
EXECUTE FUNCTION turns_notify();

-- +goose Down
DROP TRIGGER turns_notify ON turns;
DROP FUNCTION turns_notify();
DROP TABLE notifications;
ALTER TABLE turns DROP COLUMN notify_url;
