-- 014: the catalog's logos, per-version documentation and fixed categories.
--
-- Categories: a listing's category was free text, counted in the catalog
-- as the entry of the fixed list (sdk/registryapi Categories) it equals
-- ignoring case and surrounding white space (Go's strings.TrimSpace, of
-- which ASCII's is what occurs), and as 'other' when none. The rows
-- are rewritten so, once, and a check keeps them on the list; the list
-- here and registryapi.Categories are the same (the api package's tests
-- hold them together).
update listings set category = case
    when lower(btrim(category, E' \t\n\r\f\x0b')) in ('ml', 'vision', 'video', 'audio', 'networking', 'storage', 'database',
        'compression', 'crypto', 'genomics', 'finance', 'hpc', 'other') then lower(btrim(category, E' \t\n\r\f\x0b'))
    else 'other' end;
alter table listings alter column category set default 'other',
    add constraint listings_category check (category in ('ml', 'vision', 'video', 'audio', 'networking', 'storage',
        'database', 'compression', 'crypto', 'genomics', 'finance', 'hpc', 'other'));

-- A listing's logo: the PNG the registry made from what its ISV uploaded
-- (never the uploaded bytes), at most 256x256, with its SHA-256 as the
-- validator the API serves it under.
create table listing_logos (
    listing_id uuid primary key references listings (id) on delete cascade,
    png        bytea not null check (length(png) between 1 and 262144),
    digest     text not null check (digest ~ '^sha256:[0-9a-f]{64}$'),
    width      integer not null check (width between 1 and 256),
    height     integer not null check (height between 1 and 256),
    updated_at timestamptz not null default now()
);

-- A version's documentation, Markdown of at most 64 KiB; '' is none.
alter table listing_versions add column docs text not null default '' check (octet_length(docs) <= 65536),
    add column docs_updated_at timestamptz;

---- create above / drop below ----

alter table listing_versions drop column docs, drop column docs_updated_at;
drop table listing_logos;
alter table listings drop constraint listings_category, alter column category set default '';
