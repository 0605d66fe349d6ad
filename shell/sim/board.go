package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// Config describes a simulated board. The zero value is a faas-vu9p-dual
// board with serial "SIM0000", 16 GiB of DDR per chip, no roles, a 10 s DMA
// timeout and no real-time delays.
type Config struct {
	// Model is the board model; zero means shell.ModelVU9PDual.
	Model shell.BoardModel
	// Serial is the board serial number (at most 16 ASCII bytes).
	Serial string
	// DDRSize overrides the model's DDR size per chip, in bytes.
	DDRSize uint64
	// Roles holds the role models the PR controller can instantiate.
	Roles *Registry
	// DMATimeout is how long a DMA transfer may take before it fails with
	// ETIMEDOUT, like the XDMA driver's h2c/c2h_timeout module parameters.
	// Zero means 10 s.
	DMATimeout time.Duration
	// RealTime makes modeled durations (programming, scrubbing) take wall
	// time; otherwise they are only reported.
	RealTime bool
	// ShellMinor is added to the shell's minor version: a board running a
	// later minor release of shell v1, for tests of images that accept only
	// some releases.
	ShellMinor uint16
	// StateFile, if set, keeps each chip's configured role and
	// IMAGE_DIGEST across processes, as a real board keeps them when the
	// host process dies (see persist.go). NewBoard restores from it.
	StateFile string
}

// Board is a simulated dual-chip FPGA board.
type Board struct {
	cfg    Config
	chips  [shell.ChipsPerBoard]*Chip
	closed chan struct{}
	once   sync.Once

	saveMu sync.Mutex // serialises state file writes

	mu         sync.Mutex
	linkUp     bool
	linkErrors uint32
}

// NewBoard powers up a simulated board: both chips with empty PR regions and
// the inter-chip link trained.
func NewBoard(cfg Config) (*Board, error) {
	if cfg.Model.Name == "" {
		cfg.Model = shell.ModelVU9PDual
	}
	if cfg.Serial == "" {
		cfg.Serial = "SIM0000"
	}
	if len(cfg.Serial) > 16 {
		return nil, fmt.Errorf("sim: serial %q longer than 16 bytes", cfg.Serial)
	}
	if cfg.DDRSize == 0 {
		cfg.DDRSize = cfg.Model.DDRSize
	}
	if cfg.DDRSize%pageSize != 0 {
		return nil, fmt.Errorf("sim: DDR size %d is not a multiple of %d", cfg.DDRSize, pageSize)
	}
	if cfg.DMATimeout == 0 {
		cfg.DMATimeout = 10 * time.Second
	}
	if cfg.Roles == nil {
		cfg.Roles = &Registry{}
	}
	b := &Board{cfg: cfg, closed: make(chan struct{}), linkUp: true}
	for i := range b.chips {
		b.chips[i] = newChip(b, i, cfg.Model.Parts[i])
	}
	if err := b.restore(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Chip returns chip i (0 or 1).
func (b *Board) Chip(i int) *Chip { return b.chips[i] }

// Model returns the board model.
func (b *Board) Model() shell.BoardModel { return b.cfg.Model }

// Serial returns the board serial number.
func (b *Board) Serial() string { return b.cfg.Serial }

// Close stops both chips' roles and fails every blocked call with ErrClosed.
func (b *Board) Close() error {
	b.once.Do(func() {
		close(b.closed)
		for _, c := range b.chips {
			c.unloadRole()
		}
	})
	return nil
}

// DropLink injects a loss of the inter-chip link: LINK_STATUS goes down on both
// chips, LINK_ERRORS counts it and both raise the link-down alarm.
func (b *Board) DropLink() {
	b.mu.Lock()
	wasUp := b.linkUp
	b.linkUp = false
	if wasUp {
		b.linkErrors++
	}
	b.mu.Unlock()
	if wasUp {
		for _, c := range b.chips {
			c.setAlarm(shell.AlarmLinkDown)
		}
	}
}

// RestoreLink retrains the inter-chip link. The latched alarm stays until
// software clears it.
func (b *Board) RestoreLink() {
	b.mu.Lock()
	b.linkUp = true
	b.mu.Unlock()
}

func (b *Board) link() (up bool, errs uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.linkUp, b.linkErrors
}
