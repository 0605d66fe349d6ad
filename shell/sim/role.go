package sim

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/fpga-faas/faas/shell"
)

// Role is the functional model of a role loaded into a chip's PR region.
//
// The simulator serialises nothing on the role's behalf: ReadReg and WriteReg
// may be called concurrently with the role's own goroutines, so a role guards
// its state itself.
type Role interface {
	// ReadReg and WriteReg serve MMIO to the role's register window. off is
	// relative to shell.RoleBase, 4-byte aligned and below shell.RoleSize.
	ReadReg(off uint32) uint32
	WriteReg(off uint32, v uint32)
	// Close stops the role when it is replaced, loses power or the board
	// closes. It returns after the role's goroutines have stopped; the role
	// must not use its Env afterwards.
	Close()
}

// RegsReader is an optional capability of a Role: reading consecutive
// registers from off (relative to shell.RoleBase, inside the role window)
// in one access, as one consistent snapshot.
type RegsReader interface {
	ReadRegs(off uint32, dst []uint32)
}

// RoleModel describes a role the simulator can instantiate. Role packages in
// bitstreams/ export one; mains register the ones they want in a Registry.
type RoleModel struct {
	// Name is the design name the role's bitstreams carry in the .bit header
	// (the part of field 'a' before the first ';').
	Name    string
	ID      uint32 // value of the shell's ROLE_ID register once loaded; never 0
	Version uint32 // ROLE_VERSION: major in bits 31:16, minor in bits 15:0
	// New starts the role. It must not block on DMA or IRQs: the PR
	// controller calls it while activating the region.
	New func(env *Env, cfg RoleConfig) (Role, error)
}

// RoleConfig is what the bitstream told the PR controller about the role.
type RoleConfig struct {
	Design      string            // full design field, options included
	Options     map[string]string // the ;key=value options of the design field, keys as written
	Part        shell.Part        // the chip's part
	FrameBytes  int64             // bytes of configuration frames in the bitstream
	FrameDigest [32]byte          // SHA-256 of the frames, for roles that derive parameters from them
}

// Registry maps design names to role models. It is safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	models map[string]RoleModel
}

// NewRegistry returns a registry holding the given models.
func NewRegistry(models ...RoleModel) (*Registry, error) {
	r := &Registry{models: map[string]RoleModel{}}
	for _, m := range models {
		if err := r.Register(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a role model. Names are unique and IDs non-zero.
func (r *Registry) Register(m RoleModel) error {
	if m.Name == "" || m.New == nil || m.ID == 0 {
		return fmt.Errorf("sim: role model %q: needs a name, a non-zero ID and a constructor", m.Name)
	}
	if len(m.Name) > roleNameBytes {
		return fmt.Errorf("sim: role model %q: name longer than %d bytes", m.Name, roleNameBytes)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.models == nil {
		r.models = map[string]RoleModel{}
	}
	if _, dup := r.models[m.Name]; dup {
		return fmt.Errorf("sim: role model %q registered twice", m.Name)
	}
	r.models[m.Name] = m
	return nil
}

// Lookup returns the model registered under a design name.
func (r *Registry) Lookup(name string) (RoleModel, bool) {
	if r == nil {
		return RoleModel{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.models[name]
	return m, ok
}

// Names lists the registered design names in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.models))
	for n := range r.models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// roleNameBytes is the size of the ROLE_NAME register.
const roleNameBytes = 24

// Errors a role sees on DMA through the shell.
var (
	// ErrWindow means the access was not wholly inside an enabled tenant
	// window; no byte was moved.
	ErrWindow = errors.New("access outside the tenant window")
	// ErrDecoupled means the PR region is decoupled (being reprogrammed,
	// over temperature or powered off); no byte was moved.
	ErrDecoupled = errors.New("PR region decoupled")
)

// Env is the shell as a role sees it: DDR through tenant windows, interrupt
// lines and the chip's identity. An Env is valid from the role's New until its
// Close returns.
type Env struct {
	chip *Chip
	gen  uint64 // role generation: a replaced role's Env goes dead
}

// Chip returns the index of the chip the role runs on.
func (e *Env) Chip() int { return e.chip.index }

// ReadAt reads DDR at card address addr through tenant window win.
func (e *Env) ReadAt(win int, p []byte, addr uint64) error {
	if err := e.chip.roleAccess(e.gen, win, addr, uint64(len(p)), false); err != nil {
		return err
	}
	e.chip.ddr.ReadAt(p, addr)
	return nil
}

// WriteAt writes DDR at card address addr through tenant window win.
func (e *Env) WriteAt(win int, p []byte, addr uint64) error {
	if err := e.chip.roleAccess(e.gen, win, addr, uint64(len(p)), true); err != nil {
		return err
	}
	e.chip.ddr.WriteAt(p, addr)
	return nil
}

// Raise fires the role's interrupt line n (0 is shell.IRQRole0). Lines of a
// decoupled region are masked.
func (e *Env) Raise(n int) {
	line := shell.IRQRole0 + n
	if n < 0 || line >= shell.IRQLines {
		return
	}
	e.chip.raiseFromRole(e.gen, line)
}
