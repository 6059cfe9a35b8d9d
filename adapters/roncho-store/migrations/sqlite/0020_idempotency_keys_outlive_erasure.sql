-- An erasure that reaches a key's write disarms the key rather than
-- forgetting it: the request's digest is cleared (it was computed from the
-- erased text), the key stays as long as the erasure's receipt (for ever),
-- and a repeat of it returns what is left and writes nothing, so that a
-- client's retry never writes erased text again.
ALTER TABLE idempotency_keys ADD COLUMN erased_by TEXT;
