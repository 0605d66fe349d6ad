package xdma_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/services/agent/device/devicetest"
	"github.com/fpga-faas/faas/services/agent/device/xdma"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

// nodes names the device nodes of chip i the way the driver does.
func nodes(dir string, i int, ddrFile string) xdma.Nodes {
	p := func(s string) string { return filepath.Join(dir, fmt.Sprintf("xdma%d_%s", i, s)) }
	n := xdma.Nodes{User: p("user"), Control: p("control")}
	for k := range shell.DMAChannels {
		n.H2C = append(n.H2C, p(fmt.Sprintf("h2c_%d", k)))
		n.C2H = append(n.C2H, p(fmt.Sprintf("c2h_%d", k)))
	}
	if ddrFile != "" {
		n.H2C, n.C2H = []string{ddrFile}, []string{ddrFile}
	}
	for k := range shell.IRQLines {
		n.Events = append(n.Events, p(fmt.Sprintf("events_%d", k)))
	}
	return n
}

// TestConformanceOnSimulator runs the xdma backend against the simulator's
// driver personality: the whole suite, through the same pread/pwrite/read
// calls the backend makes on /dev/xdma*.
func TestConformanceOnSimulator(t *testing.T) {
	devicetest.Run(t, &devicetest.SimHarness{OpenBoard: func(t *testing.T, sb *sim.Board) *device.Board {
		open := func(path string, write bool) (xdma.File, error) {
			base := filepath.Base(path) // xdma<i>_<node>
			var chip int
			var name string
			if _, err := fmt.Sscanf(base, "xdma%d_", &chip); err != nil || chip < 0 || chip > 1 {
				return nil, &os.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
			}
			_, name, _ = strings.Cut(base, "_")
			return sb.Chip(chip).Node(name)
		}
		b, err := xdma.OpenBoard("sim", sb.Model(), open, []xdma.Nodes{nodes("/dev", 1, ""), nodes("/dev", 0, "")})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}})
}

// filesHarness stands regular files and FIFOs in for the device nodes, as on
// a machine without the driver: the user BAR is a file holding a register
// image of shell v1, DDR a sparse file, event lines FIFOs.
type filesHarness struct {
	writers map[string]*os.File // FIFO write ends, by event node path
}

const filesDDR = 1 << 30

func (h *filesHarness) Open(t *testing.T) *device.Board {
	dir := t.TempDir()
	model := shell.ModelVU9PDual
	var all []xdma.Nodes
	for i := range shell.ChipsPerBoard {
		ddr := filepath.Join(dir, fmt.Sprintf("ddr%d", i))
		n := nodes(dir, i, ddr)
		user := make([]byte, shell.UserBARSize)
		put := func(off uint32, v uint32) { binary.LittleEndian.PutUint32(user[off:], v) }
		put(shell.RegMagic, shell.Magic)
		put(shell.RegVersion, shell.Version)
		put(shell.RegChipIndex, uint32(i))
		put(shell.RegPartID, model.Parts[i].IDCode)
		put(shell.RegDDRSize, filesDDR)
		copy(user[shell.RegBoardSerial:], "FILES01")
		control := make([]byte, shell.ControlBARSize)
		binary.LittleEndian.PutUint32(control[shell.XDMAH2CChannel+shell.XDMAAlignments:], shell.XDMAAlignment(shell.DMAAlign, shell.DMAAlign, 64))
		for path, data := range map[string][]byte{n.User: user, n.Control: control} {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Create(ddr)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(filesDDR)
		f.Close()
		for _, ev := range n.Events {
			if err := syscall.Mkfifo(ev, 0o600); err != nil {
				t.Fatal(err)
			}
			// Holding a write end lets the backend open the read end
			// without blocking, and lets Interrupt write to it.
			w, err := os.OpenFile(ev, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Close() })
			h.writers[ev] = w
		}
		all = append(all, n)
	}
	b, err := xdma.OpenBoard(dir, model, xdma.OS, all)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func (h *filesHarness) Interrupt(t *testing.T, b *device.Board, chip, line int) {
	path := filepath.Join(b.ID, fmt.Sprintf("xdma%d_events_%d", chip, line))
	if _, err := h.writers[path].Write([]byte{1, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
}

var _ devicetest.Interrupter = (*filesHarness)(nil)

// TestConformanceOnFiles runs the suite's driver-level tests against real
// files: MMIO by pread/pwrite of single words, DMA by card address into a
// sparse file, event reads on FIFOs.
func TestConformanceOnFiles(t *testing.T) {
	devicetest.Run(t, &filesHarness{writers: map[string]*os.File{}})
}

// TestNotAShell checks that an endpoint without a FaaS shell is refused.
func TestNotAShell(t *testing.T) {
	dir := t.TempDir()
	n := nodes(dir, 0, filepath.Join(dir, "ddr"))
	for _, p := range []string{n.User, n.Control, n.H2C[0]} {
		if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := xdma.OpenChip(xdma.OS, n)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := device.OpenChip(p); !errors.Is(err, device.ErrNotShell) || !strings.Contains(err.Error(), "magic") {
		t.Errorf("OpenChip on a zeroed BAR = %v, want ErrNotShell naming the magic", err)
	}
}

// TestMissingNode checks that a missing device node is reported by path.
func TestMissingNode(t *testing.T) {
	n := nodes(t.TempDir(), 0, "")
	_, err := xdma.OpenChip(xdma.OS, n)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), n.User) {
		t.Errorf("OpenChip without nodes = %v, want not-exist naming %s", err, n.User)
	}
}

// TestOpenFailureClosesWhatOpened checks that a failed open closes the nodes
// already open and never touches the typed nil an Opener returns with its
// error.
func TestOpenFailureClosesWhatOpened(t *testing.T) {
	sb, err := sim.NewBoard(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var opened []*sim.Node
	open := func(path string, write bool) (xdma.File, error) {
		name := strings.TrimPrefix(filepath.Base(path), "xdma0_")
		n, err := sb.Chip(0).Node(name)
		if err != nil || name == "c2h_1" {
			var none *sim.Node
			return none, &os.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
		}
		opened = append(opened, n)
		return n, nil
	}
	if _, err := xdma.OpenChip(open, nodes("/dev", 0, "")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenChip with a missing c2h_1 = %v, want not-exist", err)
	}
	for _, n := range opened {
		if _, err := n.ReadAt(make([]byte, 4), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s still open after the failed OpenChip (%v)", n.Name(), err)
		}
	}
	if len(opened) != 5 {
		t.Errorf("opened %d nodes before c2h_1, want 5 (user, control, 2 h2c, c2h_0)", len(opened))
	}
}
