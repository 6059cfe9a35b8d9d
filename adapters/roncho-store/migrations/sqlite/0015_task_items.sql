-- A representation task now carries every message of one peer in a batch
-- (`message_ids`); queue status counts its messages, as Honcho counts one
-- queue row per message.
ALTER TABLE work_tasks ADD COLUMN items BIGINT NOT NULL DEFAULT 1;
