package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A real board keeps its configuration when the host process that drives it
// dies: the role stays in the PR region and IMAGE_DIGEST keeps its value
// until the chip loses power. With Config.StateFile a simulated board does
// the same across processes, so that an agent killed with SIGKILL and
// started again finds the chips as it left them. DDR contents are not kept
// (they would be, on hardware); nothing the agent's recovery decides depends
// on them.

// boardState is the state file's content.
type boardState struct {
	Serial string      `json:"serial"`
	Chips  []chipState `json:"chips"`
}

// chipState is what one chip keeps; Model is empty for an empty region.
type chipState struct {
	Model       string            `json:"model,omitempty"`
	Design      string            `json:"design,omitempty"`
	Options     map[string]string `json:"options,omitempty"`
	FrameBytes  int64             `json:"frame_bytes,omitempty"`
	FrameDigest [32]byte          `json:"frame_digest"`
	CRC         uint32            `json:"crc,omitempty"`
	Digest      [8]uint32         `json:"image_digest"`
}

// persist writes the board's state file, if it has one. The file is
// replaced atomically, so a process killed mid-write leaves the previous
// state; no fsync, since the state only has to survive the process.
func (b *Board) persist() error {
	if b.cfg.StateFile == "" {
		return nil
	}
	b.saveMu.Lock()
	defer b.saveMu.Unlock()
	st := boardState{Serial: b.cfg.Serial}
	for _, c := range b.chips {
		c.mu.Lock()
		cs := chipState{Digest: c.digest}
		if c.role != nil {
			cs.Model, cs.CRC = c.model.Name, c.pr.crc
			cs.Design, cs.Options = c.roleCfg.Design, c.roleCfg.Options
			cs.FrameBytes, cs.FrameDigest = c.roleCfg.FrameBytes, c.roleCfg.FrameDigest
		}
		c.mu.Unlock()
		st.Chips = append(st.Chips, cs)
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := b.cfg.StateFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("sim: state file: %w", err)
	}
	if err := os.Rename(tmp, b.cfg.StateFile); err != nil {
		return fmt.Errorf("sim: state file: %w", err)
	}
	return nil
}

// restore configures the chips from the state file, if there is one.
func (b *Board) restore() error {
	if b.cfg.StateFile == "" {
		return nil
	}
	data, err := os.ReadFile(b.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(filepath.Dir(b.cfg.StateFile), 0o755)
	}
	if err != nil {
		return fmt.Errorf("sim: state file: %w", err)
	}
	var st boardState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("sim: state file %s: %w", b.cfg.StateFile, err)
	}
	if st.Serial != b.cfg.Serial || len(st.Chips) != len(b.chips) {
		return fmt.Errorf("sim: state file %s is of board %q with %d chips, not %q", b.cfg.StateFile, st.Serial, len(st.Chips), b.cfg.Serial)
	}
	for i, cs := range st.Chips {
		c := b.chips[i]
		c.digest = cs.Digest
		if cs.Model == "" {
			continue
		}
		model, ok := b.cfg.Roles.Lookup(cs.Model)
		if !ok {
			return fmt.Errorf("sim: state file %s: chip %d holds role %q, which has no model here", b.cfg.StateFile, i, cs.Model)
		}
		rc := RoleConfig{Design: cs.Design, Options: cs.Options, Part: c.part, FrameBytes: cs.FrameBytes, FrameDigest: cs.FrameDigest}
		c.genSeq++
		role, err := model.New(&Env{chip: c, gen: c.genSeq}, rc)
		if err != nil {
			return fmt.Errorf("sim: state file %s: chip %d: role %q: %w", b.cfg.StateFile, i, cs.Model, err)
		}
		c.role, c.model, c.roleGen, c.roleCfg, c.pr.crc = role, model, c.genSeq, rc, cs.CRC
	}
	return nil
}
