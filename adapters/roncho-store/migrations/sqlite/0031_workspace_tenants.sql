-- Multi-tenant servers (Honcho's `tn` claim): the tenant holding each
-- workspace id. A row comes before its workspace (a tenant's key takes an
-- id it is about to create) and outlives it (an erased workspace's id stays
-- its tenant's, so a call still in flight for it never reaches another
-- tenant), so there is no foreign key.
CREATE TABLE workspace_tenants (
    workspace_name TEXT PRIMARY KEY,
    tenant         TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);
CREATE INDEX workspace_tenants_by_tenant ON workspace_tenants (tenant, workspace_name);
