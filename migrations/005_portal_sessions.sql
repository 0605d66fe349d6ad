-- 005: the web portal's sign-in sessions (package portal).
--
-- Kept in the database, not in a replica's memory, so that any registry
-- replica serves any signed-in browser. Only the SHA-256 of the session
-- cookie is stored: a database dump does not sign anyone in. The CSRF token
-- is per session and compared in constant time.
create table portal_sessions (
    id_hash     bytea primary key check (length(id_hash) = 32),
    account_id  uuid not null references accounts(id) on delete cascade,
    csrf        text not null,
    created_at  timestamptz not null default now(),
    seen_at     timestamptz not null default now(),
    expires_at  timestamptz not null
);

create index portal_sessions_account on portal_sessions (account_id);
create index portal_sessions_expires on portal_sessions (expires_at);

---- create above / drop below ----

drop table portal_sessions;
