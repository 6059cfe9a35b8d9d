-- A message's vector now mixes in the turn it answers at half weight
-- (normalize(own + 0.5 · previous)) instead of 0.85: at 0.85 small talk
-- right after a line took that line's meaning and outranked it ("pet cat"
-- found "The weather has been lovely lately." before the kitten). Embed
-- every message again (issue 36; docs/benchmarks.md).
UPDATE message_sync SET state = 'pending', attempts = 0, error = NULL, version = version + 1;
INSERT INTO message_sync (message_id, version)
    SELECT id, 1 FROM messages m
    WHERE NOT EXISTS (SELECT 1 FROM message_sync q WHERE q.message_id = m.id);
