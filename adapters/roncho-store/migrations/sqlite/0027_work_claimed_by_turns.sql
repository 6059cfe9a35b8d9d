-- Claims take turns across workspaces (issue 57): a claim looks for ready
-- work in the workspaces after the last one claimed, in workspace order,
-- so one tenant's backlog cannot hold up another's work. This index walks
-- pending tasks by workspace, as the claim reads them.
CREATE INDEX work_tasks_by_turn ON work_tasks (workspace_name, id) WHERE state = 'pending';
