-- 009: upload bodies in flight, shared by the registry's replicas
-- (distribution.Config.MaxConcurrentUploads and MaxStagedBytes).
--
-- One row per request body a replica is receiving: the account it counts
-- against (by name, "" for none, as upload sessions count), the replica
-- (for diagnosis) and the bytes reserved for it toward the account's staged
-- limit. Admission counts an account's live rows under a transaction-scoped
-- advisory lock, so that two replicas cannot both admit past the limit. The
-- replica renews lease_expires_at while the body streams; the rows of a
-- crashed replica stop counting once their lease has passed, and are
-- deleted by the next admission of their account or by a sweep. Times are
-- the database's clock, which all replicas share.
create table upload_bodies (
    id               text primary key,
    replica          text not null,
    account          text not null,
    reserved         bigint not null check (reserved >= 0),
    started_at       timestamptz not null default now(),
    lease_expires_at timestamptz not null
);

create index upload_bodies_account on upload_bodies (account, lease_expires_at);
create index upload_bodies_lease on upload_bodies (lease_expires_at);

---- create above / drop below ----

drop table upload_bodies;
