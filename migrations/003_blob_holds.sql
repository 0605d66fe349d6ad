-- 003: garbage collection of blobs (registry gc, meta.GC).
--
-- A hold announces that a blob is about to be committed to the blob store
-- (meta.Store.HoldBlob, taken before the store's commit and refreshed by
-- every commit of the digest): garbage collection spares a held digest until
-- the hold is older than its grace period, so that bytes committed between
-- its mark and its sweep are never removed. Collections purge expired holds.
create table blob_holds (
    digest  text primary key check (digest ~ '^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$'),
    held_at timestamptz not null default now()
);

-- The collection's liveness check looks manifests up by the blob that stores them.
create index manifests_blob on manifests (blob_digest) where blob_digest is not null;

---- create above / drop below ----

drop index manifests_blob;
drop table blob_holds;
