-- 010: reserved for a migration of another branch, which takes this
-- number. tern refuses a gap in the numbering ("Missing migration 10"), so
-- this file holds the number until that migration is merged; the merge then
-- deletes this file (tern refuses two files numbered 010, "Duplicate
-- migration 10", so a merge that forgets cannot go unnoticed). It changes
-- nothing.
select 1;
