-- 012: notifications: an outbox of events per account, the webhooks that
-- receive them, and the log of their deliveries.
--
-- An event is written in the same transaction as what caused it (a
-- validation finishing, a new subscription) or, for an API token about to
-- expire, by a periodic scan; the portal lists an account's events as its
-- notifications. A trigger fans each new event out to one delivery per
-- active webhook of the account subscribed to its type, in that same
-- transaction, so a committed cause always has its deliveries and a rolled
-- back one has none. Deliveries are claimed by the registry's webhook
-- workers with leases (for update skip locked), as validation jobs are.

-- The secret signs every delivery (HMAC-SHA256), so the server must be able
-- to read it: it is kept as issued, shown to the account only in the
-- answer that creates the webhook, never listed nor logged. It is as safe
-- as the database and its backups (see SECURITY.md, "Webhooks").
create table webhooks (
    id          uuid primary key default gen_random_uuid(),
    account_id  uuid not null references accounts (id) on delete cascade,
    url         text not null check (length(url) <= 2048 and url ~ '^https?://'),
    description text not null default '' check (length(description) <= 256),
    secret      text not null check (length(secret) between 32 and 128),
    events      text[] not null check (cardinality(events) between 1 and 8),
    active      boolean not null default true,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now()
);
create index webhooks_account on webhooks (account_id, created_at, id);

-- spend.threshold_reached has no producer yet: the platform has no spend
-- limits. The type is reserved so that webhooks may subscribe to it now.
create table events (
    id         uuid primary key default gen_random_uuid(),
    account_id uuid not null references accounts (id) on delete cascade,
    type       text not null check (type in ('validation.finished', 'subscription.created',
                                             'token.expiring', 'spend.threshold_reached')),
    data       jsonb not null default '{}' check (octet_length(data::text) <= 16384),
    -- dedupe_key makes a producer that may run more than once (the token
    -- scan, on every replica) write its event once.
    dedupe_key text unique,
    created_at timestamptz not null default now(),
    read_at    timestamptz
);
create index events_account on events (account_id, created_at, id);
create index events_created on events (created_at);

-- A delivery is one event to one webhook, retried until it succeeds or its
-- attempts are spent; a redelivery by hand is a new delivery of the same
-- event (redelivery_of names the one it repeats), so receivers dedupe by
-- the event id.
create table webhook_deliveries (
    id              uuid primary key default gen_random_uuid(),
    webhook_id      uuid not null references webhooks (id) on delete cascade,
    event_id        uuid not null references events (id) on delete cascade,
    redelivery_of   uuid references webhook_deliveries (id) on delete set null,
    state           text not null default 'pending' check (state in ('pending', 'delivering', 'succeeded', 'failed')),
    attempts        int not null default 0 check (attempts >= 0),
    next_attempt_at timestamptz not null default now(),
    lease_owner     text,
    lease_until     timestamptz,
    -- The last attempt's outcome; every attempt is in webhook_attempts.
    status_code     int,
    duration_ms     int,
    error           text not null default '' check (length(error) <= 512),
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now()
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where state in ('pending', 'delivering');
create index webhook_deliveries_webhook on webhook_deliveries (webhook_id, created_at, id);

create table webhook_attempts (
    delivery_id uuid not null references webhook_deliveries (id) on delete cascade,
    attempt     int not null check (attempt > 0),
    at          timestamptz not null default now(),
    status_code int, -- null: no response (refused, timed out, unreachable)
    duration_ms int not null check (duration_ms >= 0),
    error       text not null default '' check (length(error) <= 512),
    primary key (delivery_id, attempt)
);

create function events_fan_out() returns trigger language plpgsql as $$
begin
    insert into webhook_deliveries (webhook_id, event_id)
    select w.id, new.id from webhooks w
    where w.account_id = new.account_id and w.active and new.type = any (w.events);
    return null;
end $$;
create trigger events_fan_out after insert on events
    for each row execute function events_fan_out();

---- create above / drop below ----

drop table webhook_attempts;
drop table webhook_deliveries;
drop trigger events_fan_out on events;
drop function events_fan_out();
drop table events;
drop table webhooks;
