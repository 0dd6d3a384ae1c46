-- +goose Up
-- When a session was suspended (Session.SuspendedAt), in unix nanoseconds;
-- 0 while it is open. Its retention counts from then.
ALTER TABLE sessions ADD COLUMN suspended_at bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sessions DROP COLUMN suspended_at;
