-- 008: the FPGA part each chip of an image needs, recorded when
-- the image is validated, so that the pool places an attachment only on
-- chips of that part: a bitstream for one part fails to load on another.
--
-- parts is in board order (parts[1] for the board's first chip), as the
-- image config's chips[].part names them (shell.Part.Name). Images validated
-- before this migration have none, and are placed on any chip, as before,
-- until they are validated again.
alter table validation_jobs add column parts text[] not null default '{}';

---- create above / drop below ----

alter table validation_jobs drop column parts;
