-- 004: password lockouts shared by the registry's replicas (auth.Limits).
--
-- One row per account name (scope 'account') or client network (scope
-- 'source', an IPv4 address /32 or an IPv6 /64) with failed password checks
-- since its last success or forgetting: how many, until when it is locked
-- out, and when the count is forgotten. Every replica reads and counts here,
-- so that N replicas do not give a guesser N times the budget. Times are the
-- registries' clocks. Rows past forget_at are purged as failures are
-- recorded.
create table login_failures (
    scope        text not null check (scope in ('account', 'source')),
    key          text not null check (length(key) <= 128),
    failures     integer not null check (failures > 0),
    locked_until timestamptz,
    forget_at    timestamptz not null,
    primary key (scope, key)
);

create index login_failures_forget on login_failures (forget_at);

---- create above / drop below ----

drop table login_failures;
