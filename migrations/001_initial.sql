-- 001: the registry's first schema: OCI storage metadata and the marketplace.
--
-- Conventions: timestamps are timestamptz; externally visible ids are uuid
-- (gen_random_uuid, built into PostgreSQL 13+); append-only logs use bigint
-- identity ids for ordering and keyset pagination; digests are
-- "algorithm:hex" strings as in OCI.

-- Accounts and credentials ----------------------------------------------------

create table accounts (
    id            uuid primary key default gen_random_uuid(),
    name          text not null unique
                  check (name ~ '^[a-z0-9]+([._-][a-z0-9]+)*$' and length(name) <= 64),
    role          text not null check (role in ('isv', 'tenant', 'admin', 'node')),
    password_hash text,                        -- PHC string of a memory-hard KDF; null: no password login
    disabled      boolean not null default false,
    created_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
);

create table api_tokens (
    id           uuid primary key default gen_random_uuid(),
    account_id   uuid not null references accounts (id) on delete cascade,
    name         text not null default '',
    token_hash   bytea not null unique,        -- hash of the secret; the secret is shown once
    scopes       text[] not null default '{}',
    created_at   timestamptz not null default now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
create index api_tokens_account on api_tokens (account_id);

-- ISV signing keys (cosign-format signatures on images).
create table signing_keys (
    id          uuid primary key default gen_random_uuid(),
    account_id  uuid not null references accounts (id) on delete cascade,
    key_id      text not null,                 -- fingerprint of the public key
    algorithm   text not null,
    public_key  text not null,                 -- PEM
    created_at  timestamptz not null default now(),
    revoked_at  timestamptz,
    unique (account_id, key_id)
);

-- OCI storage ------------------------------------------------------------------

-- A repository "namespace/name..."; the namespace is the owning ISV's account name.
create table repositories (
    id         bigint generated always as identity primary key,
    name       text not null unique check (length(name) between 1 and 255),
    owner_id   uuid references accounts (id) on delete restrict,
    created_at timestamptz not null default now()
);

-- A blob row exists only after the blob store committed the verified content.
create table blobs (
    digest     text primary key check (digest ~ '^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$'),
    size       bigint not null check (size >= 0),
    media_type text,
    created_at timestamptz not null default now()
);

-- Blobs linked into a repository (pushed or mounted); blob access and
-- cross-repository mounts go through these links.
create table repository_blobs (
    repository_id bigint not null references repositories (id) on delete cascade,
    digest        text not null references blobs (digest) on delete restrict,
    created_at    timestamptz not null default now(),
    primary key (repository_id, digest)
);
create index repository_blobs_digest on repository_blobs (digest);

create table manifests (
    repository_id   bigint not null references repositories (id) on delete cascade,
    digest          text not null check (digest ~ '^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$'),
    media_type      text not null,
    artifact_type   text,
    subject_digest  text,                      -- OCI 1.1 subject, for the referrers API
    size            bigint not null check (size >= 0),
    content         bytea,                     -- the manifest bytes, verbatim
    blob_digest     text references blobs (digest) on delete restrict, -- or stored as a blob
    annotations     jsonb,
    created_at      timestamptz not null default now(),
    primary key (repository_id, digest),
    check ((content is null) <> (blob_digest is null))
);
create index manifests_subject on manifests (repository_id, subject_digest) where subject_digest is not null;

-- What a manifest references: its config and layers (blobs), so that a
-- manifest never points at a missing blob and GC knows what is live.
create table manifest_blobs (
    repository_id   bigint not null,
    manifest_digest text not null,
    blob_digest     text not null references blobs (digest) on delete restrict,
    primary key (repository_id, manifest_digest, blob_digest),
    foreign key (repository_id, manifest_digest) references manifests (repository_id, digest) on delete cascade
);
create index manifest_blobs_blob on manifest_blobs (blob_digest);

-- Manifests an index references (children must exist in the same repository).
create table manifest_children (
    repository_id   bigint not null,
    manifest_digest text not null,
    child_digest    text not null,
    primary key (repository_id, manifest_digest, child_digest),
    foreign key (repository_id, manifest_digest) references manifests (repository_id, digest) on delete cascade,
    foreign key (repository_id, child_digest) references manifests (repository_id, digest) on delete restrict
);

create table tags (
    repository_id   bigint not null references repositories (id) on delete cascade,
    name            text not null check (name ~ '^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$'),
    manifest_digest text not null,
    updated_at      timestamptz not null default now(),
    primary key (repository_id, name),
    foreign key (repository_id, manifest_digest) references manifests (repository_id, digest) on delete cascade
);
create index tags_manifest on tags (repository_id, manifest_digest);

-- Upload sessions of the blob upload API; the bytes are staged in the blob
-- store under staged_key (the store's upload id).
create table upload_sessions (
    id            text primary key,
    repository_id bigint not null references repositories (id) on delete cascade,
    account_id    uuid references accounts (id) on delete set null,
    byte_offset   bigint not null default 0 check (byte_offset >= 0),
    staged_key    text not null,
    started_at    timestamptz not null default now(),
    updated_at    timestamptz not null default now()
);
create index upload_sessions_updated on upload_sessions (updated_at);

-- Marketplace -------------------------------------------------------------------

create table listings (
    id                    uuid primary key default gen_random_uuid(),
    owner_id              uuid not null references accounts (id) on delete restrict,
    repository_id         bigint unique references repositories (id) on delete restrict,
    name                  text not null check (length(name) between 1 and 128),
    summary               text not null default '',
    description           text not null default '',
    category              text not null default '',
    board_model           text not null default '',
    currency              text not null default 'USD' check (currency ~ '^[A-Z]{3}$'),
    price_per_hour_micros bigint not null default 0 check (price_per_hour_micros >= 0),
    price_per_load_micros bigint not null default 0 check (price_per_load_micros >= 0),
    visibility            text not null default 'private' check (visibility in ('private', 'shared', 'public')),
    published             boolean not null default false,
    created_at            timestamptz not null default now(),
    updated_at            timestamptz not null default now(),
    unique (owner_id, name)
);
create index listings_public on listings (category, name) where published and visibility = 'public';

create table listing_versions (
    listing_id      uuid not null references listings (id) on delete cascade,
    version         text not null check (length(version) between 1 and 128),
    manifest_digest text not null,
    created_at      timestamptz not null default now(),
    primary key (listing_id, version)
);
create index listing_versions_digest on listing_versions (manifest_digest);

create table entitlements (
    id          uuid primary key default gen_random_uuid(),
    listing_id  uuid not null references listings (id) on delete cascade,
    account_id  uuid not null references accounts (id) on delete cascade,
    kind        text not null check (kind in ('subscription', 'purchase', 'share')),
    granted_by  uuid references accounts (id) on delete set null,
    created_at  timestamptz not null default now(),
    expires_at  timestamptz,
    revoked_at  timestamptz
);
create unique index entitlements_active on entitlements (listing_id, account_id, kind) where revoked_at is null;
create index entitlements_account on entitlements (account_id);

-- Durable validation jobs, one per pushed image (repository, manifest); the
-- job's state is the image's validation state. Workers lease a job with
-- "for update skip locked" and lease_until; an expired lease is retried.
create table validation_jobs (
    id              uuid primary key default gen_random_uuid(),
    repository_id   bigint not null references repositories (id) on delete cascade,
    manifest_digest text not null,
    listing_id      uuid references listings (id) on delete set null,
    state           text not null default 'pending'
                    check (state in ('pending', 'validating', 'available', 'failed')),
    attempts        int not null default 0 check (attempts >= 0),
    max_attempts    int not null default 5 check (max_attempts > 0),
    reasons         jsonb not null default '[]',  -- hdk validation codes and messages
    lease_owner     text,
    lease_until     timestamptz,
    run_after       timestamptz not null default now(),
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    finished_at     timestamptz,
    unique (repository_id, manifest_digest)
);
create index validation_jobs_runnable on validation_jobs (run_after) where state in ('pending', 'validating');

create table nodes (
    id                uuid primary key default gen_random_uuid(),
    account_id        uuid not null references accounts (id) on delete cascade, -- the node's account (role node)
    name              text not null unique check (length(name) between 1 and 128),
    public_key        text not null,            -- PEM; data keys are wrapped to it
    boards            jsonb not null default '[]', -- boards and slots from the last heartbeat
    registered_at     timestamptz not null default now(),
    last_heartbeat_at timestamptz,
    revoked_at        timestamptz
);
create index nodes_account on nodes (account_id);

-- Usage reported by nodes; report_id makes a re-sent report idempotent.
create table usage_records (
    id              bigint generated always as identity primary key,
    node_id         uuid not null references nodes (id) on delete restrict,
    tenant_id       uuid not null references accounts (id) on delete restrict,
    listing_id      uuid references listings (id) on delete set null,
    manifest_digest text,
    board           text not null default '',
    slot            int,
    event           text not null check (event in ('load', 'clear', 'busy')),
    busy_ns         bigint not null default 0 check (busy_ns >= 0),
    started_at      timestamptz,
    ended_at        timestamptz,
    report_id       text,
    recorded_at     timestamptz not null default now(),
    unique (node_id, report_id)
);
create index usage_records_tenant on usage_records (tenant_id, recorded_at);
create index usage_records_listing on usage_records (listing_id, recorded_at);

-- Every state-changing call.
create table audit_log (
    id          bigint generated always as identity primary key,
    at          timestamptz not null default now(),
    actor_id    uuid references accounts (id) on delete set null,
    actor_name  text not null default '',
    action      text not null,
    target_type text not null default '',
    target_id   text not null default '',
    outcome     text not null default 'ok',
    request_id  text not null default '',
    remote_addr text not null default '',
    details     jsonb not null default '{}'
);
create index audit_log_at on audit_log (at);
create index audit_log_actor on audit_log (actor_id, at);
create index audit_log_target on audit_log (target_type, target_id, at);

---- create above / drop below ----

drop table audit_log;
drop table usage_records;
drop table nodes;
drop table validation_jobs;
drop table entitlements;
drop table listing_versions;
drop table listings;
drop table upload_sessions;
drop table tags;
drop table manifest_children;
drop table manifest_blobs;
drop table manifests;
drop table repository_blobs;
drop table blobs;
drop table repositories;
drop table signing_keys;
drop table api_tokens;
drop table accounts;
