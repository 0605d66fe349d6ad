-- 008: the FPGA part each chip of an image needs, and the chip of the
-- board its bitstream is for, recorded when the image is validated, so
-- that the pool places an attachment only on chips that can take it: a
-- bitstream for one part, or for the other chip of a board, fails to load.
--
-- parts is in board order (parts[1] for the board's first chip), as the
-- image config's chips[].part names them (shell.Part.Name); chip_indexes
-- gives each such chip's chips[].index (0, 1, or -1 for any chip). Images
-- validated before this migration have none, and are placed on any chip,
-- as before, until they are validated again.
alter table validation_jobs add column parts text[] not null default '{}',
	add column chip_indexes smallint[] not null default '{}';

---- create above / drop below ----

alter table validation_jobs drop column parts, drop column chip_indexes;
