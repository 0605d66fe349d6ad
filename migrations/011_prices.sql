-- 011: effective-dated prices and monthly statements.
--
-- A listing's prices are rows of listing_prices, each in force from its
-- effective_at until the next row's, so that usage is priced at the price
-- in force when it happened and a price change never rewrites what was
-- already used. Amounts are integer micro-units of the listing's currency:
-- per load, per hour a slot is busy (loaded) and per hour an attachment of
-- the pool is held.
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

-- Monthly statements. A month (its first day, UTC) is closed once, after
-- it ended, with the platform's fee rate of the time; its lines are then
-- stored and never change. Each line is a tenant's usage of one listing
-- version in one unit, for_month being the month the usage happened in:
-- the month itself, or an earlier one on an adjustment line, which bills
-- what reached the registry after that month was closed.
create table statement_months (
    month            date primary key check (extract(day from month) = 1),
    closed_at        timestamptz not null default now(),
    closed_by        uuid references accounts (id) on delete set null,
    fee_basis_points int not null check (fee_basis_points between 0 and 10000)
);

create table statement_lines (
    id            bigint generated always as identity primary key,
    month         date not null references statement_months (month) on delete restrict,
    for_month     date not null check (extract(day from for_month) = 1 and for_month <= month),
    tenant_id     uuid not null references accounts (id) on delete restrict,
    listing_id    uuid not null references listings (id) on delete restrict,
    isv_id        uuid not null references accounts (id) on delete restrict,
    currency      text not null check (currency ~ '^[A-Z]{3}$'),
    version       text not null,
    unit          text not null check (unit in ('load', 'loaded_hour', 'attached_hour')),
    quantity      bigint not null,
    amount_micros bigint not null,
    unique (month, for_month, tenant_id, listing_id, version, unit)
);
create index statement_lines_tenant on statement_lines (tenant_id, month);
create index statement_lines_isv on statement_lines (isv_id, month);

create function statements_closed() returns trigger language plpgsql as $$
begin
    raise exception '%: a closed month''s statements never change', tg_table_name using errcode = 'check_violation';
end $$;
create trigger statement_months_closed before update or delete on statement_months
    for each row execute function statements_closed();
create trigger statement_lines_closed before update or delete on statement_lines
    for each row execute function statements_closed();

---- create above / drop below ----

drop table statement_lines;
drop table statement_months;
drop function statements_closed();
alter table listings add column price_per_hour_micros bigint not null default 0 check (price_per_hour_micros >= 0),
    add column price_per_load_micros bigint not null default 0 check (price_per_load_micros >= 0);
update listings l set price_per_hour_micros = p.per_hour_micros, price_per_load_micros = p.per_load_micros
from listing_prices p where p.listing_id = l.id
and p.effective_at = (select max(effective_at) from listing_prices q where q.listing_id = l.id and q.effective_at <= now());
drop table listing_prices;
drop function listing_prices_history();
