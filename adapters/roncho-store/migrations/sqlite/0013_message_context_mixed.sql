-- Message vectors are now the message's own embedding with the turn it
-- answers mixed in, instead of one embedding of both texts together (which
-- lent a message's meaning to the next turn and diluted its own): embed
-- every message again.
UPDATE messages SET sync_state = 'pending', sync_attempts = 0, sync_error = NULL, sync_version = sync_version + 1
    WHERE sync_state <> 'pending';
