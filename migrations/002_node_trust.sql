-- 002: the registry trusts a node with data keys only after an operator
-- approved it (or it enrolled with a one-time token), and releases keys only
-- against a load grant: proof that a tenant asked for this load on this node.

-- Nodes registered before this migration are not approved: an operator
-- approves each (registry nodes approve), because nothing proves who they are.
alter table nodes
    add column approved_at timestamptz,
    add column approved_by text not null default '',  -- who approved: an account name or "enrollment:<id>"
    add column revoked_by  text not null default '';

-- One-time enrollment tokens made by an operator; a node registering with one
-- is approved at once. Only the SHA-256 of the secret is kept.
create table node_enrollments (
    id          uuid primary key default gen_random_uuid(),
    token_hash  bytea not null unique check (length(token_hash) = 32),
    created_by  text not null default '',
    created_at  timestamptz not null default now(),
    expires_at  timestamptz not null,
    used_at     timestamptz,
    node_id     uuid references nodes (id) on delete set null
);

-- Load grants: a tenant (through its token) allows one node to load one image.
-- Redeemed at most once for its data keys, before expires_at; usage the node
-- reports must name a grant given to it for that tenant.
create table load_grants (
    id              uuid primary key default gen_random_uuid(),
    secret_hash     bytea not null unique check (length(secret_hash) = 32),
    tenant_id       uuid not null references accounts (id) on delete cascade,
    node_id         uuid not null references nodes (id) on delete cascade,
    repository      text not null,
    manifest_digest text not null,
    listing_id      uuid references listings (id) on delete set null,
    created_at      timestamptz not null default now(),
    expires_at      timestamptz not null,
    redeemed_at     timestamptz
);
create index load_grants_node_tenant on load_grants (node_id, tenant_id);

alter table usage_records add column grant_id uuid references load_grants (id) on delete set null;
create index usage_records_grant on usage_records (grant_id);
