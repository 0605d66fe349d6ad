-- 011: effective-dated prices. A listing's prices are rows of
-- listing_prices, each in force from its effective_at until the next row's,
-- so that usage is priced at the price in force when it happened and a
-- price change never rewrites what was already used. Amounts are integer
-- micro-units of the listing's currency: per load, per hour a slot is busy
-- (loaded) and per hour an attachment of the pool is held.
--
-- A row already in force is history: it may be neither changed nor
-- deleted, and no row may take effect before the moment it is written. Rows
-- scheduled for the future may still be replaced. The trigger holds this
-- against any writer, not only the API.
create table listing_prices (
    listing_id               uuid not null references listings (id) on delete cascade,
    effective_at             timestamptz not null,
    per_load_micros          bigint not null check (per_load_micros >= 0),
    per_hour_micros          bigint not null check (per_hour_micros >= 0),
    per_attached_hour_micros bigint not null check (per_attached_hour_micros >= 0),
    created_at               timestamptz not null default now(),
    created_by               uuid references accounts (id) on delete set null,
    primary key (listing_id, effective_at)
);

-- Existing listings' prices held since their creation, as far as anyone
-- can know; the pool's attached time was never priced.
insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros, created_at, created_by)
select id, created_at, price_per_load_micros, price_per_hour_micros, 0, created_at, owner_id from listings;

create function listing_prices_history() returns trigger language plpgsql as $$
begin
    if tg_op in ('UPDATE', 'DELETE') and old.effective_at <= now() then
        raise exception 'listing_prices: the price of % from % is history', old.listing_id, old.effective_at
            using errcode = 'check_violation';
    end if;
    if tg_op in ('INSERT', 'UPDATE') and new.effective_at < now() then
        raise exception 'listing_prices: a price cannot take effect in the past (%)', new.effective_at
            using errcode = 'check_violation';
    end if;
    if tg_op = 'DELETE' then
        return old;
    end if;
    return new;
end $$;
create trigger listing_prices_history before insert or update or delete on listing_prices
    for each row execute function listing_prices_history();

-- The history is the one source of a listing's prices.
alter table listings drop column price_per_hour_micros, drop column price_per_load_micros;

---- create above / drop below ----

alter table listings add column price_per_hour_micros bigint not null default 0 check (price_per_hour_micros >= 0),
    add column price_per_load_micros bigint not null default 0 check (price_per_load_micros >= 0);
update listings l set price_per_hour_micros = p.per_hour_micros, price_per_load_micros = p.per_load_micros
from listing_prices p where p.listing_id = l.id
and p.effective_at = (select max(effective_at) from listing_prices q where q.listing_id = l.id and q.effective_at <= now());
drop table listing_prices;
drop function listing_prices_history();
