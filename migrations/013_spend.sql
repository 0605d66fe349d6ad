-- 013: spend limits per tenant and currency, and free-trial hours per
-- listing.
--
-- A tenant's spend in a currency is what its usage of the calendar month
-- (UTC) costs so far, priced as the month's statement prices it
-- (services/registry/api, "Spend"). alert_micros is a threshold that, once
-- crossed, writes one spend.threshold_reached event per month and currency
-- (its dedupe key); limit_micros is the hard limit at which new load
-- grants and new attachments of the pool are refused. Either may be null:
-- no alert, no limit. Amounts are integer micro-units, as prices are.
create table spend_limits (
    tenant_id    uuid not null references accounts (id) on delete cascade,
    currency     text not null check (currency ~ '^[A-Z]{3}$'),
    alert_micros bigint check (alert_micros between 0 and 1000000000000000),
    limit_micros bigint check (limit_micros between 0 and 1000000000000000),
    updated_at   timestamptz not null default now(),
    updated_by   uuid references accounts (id) on delete set null,
    primary key (tenant_id, currency),
    check (alert_micros is null or limit_micros is null or alert_micros <= limit_micros)
);

-- The spend check reads the tenant's records of the month through
-- usage_records_tenant (tenant_id, recorded_at); an attachment of the pool
-- is one record written when it starts, so the attachments still open, or
-- ended within the month, are found through usage_records_tenant_attach,
-- and the tenant's records of listings with a free trial (whose earlier
-- use decides how much of the trial is left) through
-- usage_records_tenant_listing.
create index usage_records_tenant_attach on usage_records (tenant_id, ended_at) where event = 'attach';
create index usage_records_tenant_listing on usage_records (tenant_id, listing_id);

-- The first trial_hours hours of a tenant's loaded and attached time of a
-- listing, in total over all months, are free: the statements show that
-- time as trial_hour lines of amount 0, and the ISV earns nothing on it.
alter table listings add column trial_hours int not null default 0 check (trial_hours between 0 and 10000);

alter table statement_lines drop constraint statement_lines_unit_check;
alter table statement_lines add constraint statement_lines_unit_check
    check (unit in ('load', 'loaded_hour', 'attached_hour', 'trial_hour'));

---- create above / drop below ----

alter table statement_lines drop constraint statement_lines_unit_check;
alter table statement_lines add constraint statement_lines_unit_check
    check (unit in ('load', 'loaded_hour', 'attached_hour')) not valid;
alter table listings drop column trial_hours;
drop index usage_records_tenant_listing;
drop index usage_records_tenant_attach;
drop table spend_limits;
