-- An erasure hides its target at once (issue 57): every read of messages,
-- conclusions, peers and workspaces leaves out what a running erasure has
-- yet to remove, with one probe of this index, which holds only the
-- receipts of erasures still running (none, most of the time).
CREATE INDEX erasure_receipts_running ON erasure_receipts (workspace_name, scope, target) WHERE state = 'running';
