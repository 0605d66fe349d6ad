-- 010: tag immutability rules, per repository.
--
-- A tag that names a version of the repository's listing never moves (the
-- registry checks listing_versions, which needs no rule). These rules make
-- other tags immutable once set: a tag whose name matches a pattern (Go's
-- path.Match syntax: * ? [a-z] and \ escapes; "v*", "release-*") may be
-- pushed while it does not exist, again with the digest it names, and
-- neither moved nor deleted. cosign's signature, attestation and SBOM tags
-- (sha256-<hex>.sig, .att, .sbom) are never held: signing appends to them.
-- The ISV owning the repository's listing manages the rules through
-- /api/v1/listings/{id}/tag-rules.
create table tag_rules (
    id            uuid primary key default gen_random_uuid(),
    repository_id bigint not null references repositories (id) on delete cascade,
    pattern       text not null check (length(pattern) between 1 and 128),
    created_by    uuid references accounts (id) on delete set null,
    created_at    timestamptz not null default now(),
    unique (repository_id, pattern)
);

-- Tags a push moved off their listed version before versions were enforced
-- (issue 26: the listing's own `faas load …:VERSION` then found an image
-- without the platform's countersignature) go back to the version's image,
-- the one validated and countersigned, while it is stored. The image they
-- named stays, by digest.
update tags t set manifest_digest = v.manifest_digest, updated_at = now()
from listing_versions v join listings l on l.id = v.listing_id
where t.repository_id = l.repository_id and t.name = v.version and t.manifest_digest <> v.manifest_digest
  and exists (select 1 from manifests m where m.repository_id = t.repository_id and m.digest = v.manifest_digest);

---- create above / drop below ----

drop table tag_rules;
