-- 013: reserved for another branch's migration, which takes this number
-- (migrations are numbered without gaps, and 014 is the catalog's). This
-- file does nothing; it goes when that branch's 013 is merged.
select 1;
