-- Postgres replaced the foreign keys of messages to their session and peer,
-- checked row by row, with one lock per batch and delete triggers in this
-- version. SQLite checks a foreign key without a query per row; nothing
-- changes here.
SELECT 1;
