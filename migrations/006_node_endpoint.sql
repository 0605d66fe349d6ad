-- 006: where a node serves remote attach and the certificate it serves.
--
-- The registry pins the public key of the first certificate a node reports
-- (a renewal with the same key replaces the stored certificate); tenants
-- verify the node's TLS against it instead of a CA. An admin clears the pin
-- (POST /api/v1/nodes/{id}/repin) when the node legitimately gets a new one.
alter table nodes add column endpoint text not null default '';
alter table nodes add column tls_certificate text not null default '';

---- create above / drop below ----

alter table nodes drop column tls_certificate;
alter table nodes drop column endpoint;
