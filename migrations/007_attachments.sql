-- 007: the accelerator pool (sdk/poolapi): attachments of tenants to slots
-- of nodes, with leases, and their usage.
--
-- revision orders every change of an attachment: a node long-polls its
-- assignments for a revision past the last it saw. The registry keeps only
-- the SHA-256 of the tenant's credential; the node is given that hash.
create sequence attachment_revision;

create table attachments (
    id               uuid primary key default gen_random_uuid(),
    tenant_id        uuid not null references accounts (id) on delete cascade,
    listing_id       uuid references listings (id) on delete set null,
    version          text not null,
    repository       text not null,
    manifest_digest  text not null,
    node_id          uuid not null references nodes (id) on delete cascade,
    slot             int not null check (slot >= 0),
    chips            int not null default 1 check (chips between 1 and 2),
    share            boolean not null default false,
    state            text not null check (state in ('pending', 'loading', 'ready', 'failed', 'detached', 'expired', 'lost')),
    error            text not null default '',
    warm             boolean not null default false,
    credential_hash  bytea not null check (length(credential_hash) = 32),
    lease_seconds    int not null check (lease_seconds between 2 and 600),
    lease_expires_at timestamptz not null,
    grants_issued    int not null default 0,
    created_at       timestamptz not null default now(),
    ready_at         timestamptz,
    ended_at         timestamptz,
    released_at      timestamptz, -- the node let go of it: cleared and scrubbed, or kept warm
    scrubbed         boolean not null default false,
    revision         bigint not null default nextval('attachment_revision')
);
create index attachments_node on attachments (node_id, revision);
create index attachments_tenant on attachments (tenant_id, created_at);
create index attachments_live on attachments (lease_expires_at) where state in ('pending', 'loading', 'ready');
-- A whole slot holds one live attachment (placement also locks; this is the
-- database's own guard).
create unique index attachments_whole_slot on attachments (node_id, slot)
    where not share and state in ('pending', 'loading', 'ready');

-- An attachment is a usage record of its own: held from creation to its end.
alter table usage_records drop constraint usage_records_event_check;
alter table usage_records add constraint usage_records_event_check check (event in ('load', 'clear', 'busy', 'attach'));
alter table usage_records add column attachment_id uuid references attachments (id) on delete set null;
create unique index usage_records_attachment on usage_records (attachment_id) where attachment_id is not null;

---- create above / drop below ----

drop index usage_records_attachment;
alter table usage_records drop column attachment_id;
delete from usage_records where event = 'attach';
alter table usage_records drop constraint usage_records_event_check;
alter table usage_records add constraint usage_records_event_check check (event in ('load', 'clear', 'busy'));
drop table attachments;
drop sequence attachment_revision;
