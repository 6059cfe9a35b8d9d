-- Multi-tenant servers (Honcho's `tn` claim): the tenant holding each
-- workspace id. A row may come before its workspace (a tenant's key takes
-- an id it is about to create), so there is no foreign key; the erasure of
-- a workspace deletes its row with it.
CREATE TABLE workspace_tenants (
    workspace_name TEXT PRIMARY KEY,
    tenant         TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);
CREATE INDEX workspace_tenants_by_tenant ON workspace_tenants (tenant, workspace_name);
