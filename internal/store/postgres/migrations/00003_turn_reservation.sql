-- +goose Up
-- A running turn's seq reservation (Turn.Reserved): the highest seq its
-- gateway may have sent. A turn ended without its gateway is numbered
-- above it. 0 for the turns before it, whose seqs were never reserved.
ALTER TABLE turns ADD COLUMN reserved_seq bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE turns DROP COLUMN reserved_seq;
