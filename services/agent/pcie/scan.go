package pcie

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/shell"
)

// Scanner finds FaaS boards in a sysfs tree.
type Scanner struct {
	// SysfsRoot is where sysfs is mounted; "" means "/sys". Tests point it
	// at a fake tree.
	SysfsRoot string
}

// Boards returns the well-formed boards sorted by ID. Boards that were found
// but cannot be used, and functions that could not be read, are reported in
// the error (an errors.Join of *BoardError and plain errors) alongside the
// boards that are fine, so one broken card does not take the host's other
// cards out of service. Devices other than shell.VendorXilinx:shell.DeviceID
// are ignored. The error alone is returned if sysfs cannot be listed or ctx
// is done.
func (s Scanner) Boards(ctx context.Context) ([]Board, error) {
	root := cmp.Or(s.SysfsRoot, "/sys")
	// Check the root itself so a wrong root is an error, while a mounted
	// sysfs without a PCI bus simply has no boards.
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("pcie: sysfs root: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("pcie: sysfs root %s is not a directory", root)
	}
	// We list the bus ourselves instead of using pci.NewBusReader: that globs
	// a fixed /sys/bus/pci/devices and gives up on the first device it cannot
	// read.
	busDir := filepath.Join(root, "bus", "pci", "devices")
	entries, err := os.ReadDir(busDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pcie: listing PCI functions: %w", err)
	}

	var errs []error
	byBoard := map[string][]function{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := readFunction(filepath.Join(busDir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if f != nil {
			// Usable or not, the function is reported with its board.
			byBoard[f.board] = append(byBoard[f.board], *f)
		}
	}

	var boards []Board
	for _, id := range slices.Sorted(maps.Keys(byBoard)) {
		b, err := assemble(id, byBoard[id])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		boards = append(boards, b)
	}
	return boards, errors.Join(errs...)
}

// function is one XDMA function found in sysfs.
type function struct {
	chip  Chip
	board string // BDF of the switch upstream port
	port  string // BDF of the switch downstream port
	err   error  // why the function could not be read; chip is partial
}

// readFunction reads the function whose /sys/bus/pci/devices entry is dir. It
// returns nil for functions other than FaaS chips. A FaaS chip that cannot be
// read is returned with the reason in f.err, so that its board reports it;
// err is for functions that cannot be placed on a board.
func readFunction(dir string) (*function, error) {
	bdf := filepath.Base(dir)
	// Read the IDs before anything else so that an unrelated device with
	// odd attributes never stands in the way of discovery.
	vendor, err := readHex(dir, "vendor", 16)
	if err != nil {
		return nil, fmt.Errorf("pcie: %s: %w", bdf, err)
	}
	device, err := readHex(dir, "device", 16)
	if err != nil {
		return nil, fmt.Errorf("pcie: %s: %w", bdf, err)
	}
	if vendor != shell.VendorXilinx || device != shell.DeviceID {
		return nil, nil
	}

	// The entry is a symlink to the real path, whose parent is the switch
	// downstream port and grandparent the upstream port naming the board.
	target, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("pcie: %s: %w", bdf, err)
	}
	f := &function{
		chip:  Chip{BDF: bdf, Vendor: uint16(vendor), Device: uint16(device), NUMANode: -1},
		port:  filepath.Base(filepath.Dir(target)),
		board: filepath.Base(filepath.Dir(filepath.Dir(target))),
	}
	if !isBDF(f.port) || !isBDF(f.board) {
		return nil, fmt.Errorf("pcie: %s: %s is not behind a PCIe switch", bdf, target)
	}
	f.err = f.chip.read(dir)
	return f, nil
}

// read fills in c from the function's sysfs directory.
func (c *Chip) read(dir string) error {
	// u-root parses the attributes every PCI function has; the subsystem
	// IDs, NUMA node and driver are not among them.
	if err := c.readIDs(dir); err != nil {
		return err
	}
	n, err := readHex(dir, "subsystem_vendor", 16)
	if err != nil {
		return err
	}
	c.SubsystemVendor = uint16(n)
	if n, err = readHex(dir, "subsystem_device", 16); err != nil {
		return err
	}
	c.SubsystemDevice = uint16(n)
	if c.NUMANode, err = readNUMANode(dir); err != nil {
		return err
	}
	link, err := os.Readlink(filepath.Join(dir, "driver"))
	switch {
	case err == nil:
		c.Driver = filepath.Base(link)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return c.readXDMA(filepath.Join(dir, "xdma"))
}

// readXDMA records the class devices the XDMA driver created under dir, one
// per /dev node: xdmaN_user, xdmaN_control, xdmaN_h2c_K and so on.
func (c *Chip) readXDMA(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no driver bound, or not the XDMA driver
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		instance, node, ok := strings.Cut(e.Name(), "_")
		if !ok || !isXDMAInstance(instance) {
			continue
		}
		if c.XDMA != "" && c.XDMA != instance {
			return fmt.Errorf("%s: nodes of two XDMA instances, %s and %s", dir, c.XDMA, instance)
		}
		c.XDMA = instance
		kind, k, ok := strings.Cut(node, "_")
		if !ok {
			continue // user, control, xvc
		}
		var chans *[]int
		switch kind {
		case "h2c":
			chans = &c.H2C
		case "c2h":
			chans = &c.C2H
		case "events":
			chans = &c.Events
		default:
			continue // bypass channels and whatever a newer driver adds
		}
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return fmt.Errorf("%s: bad channel number in %s", dir, e.Name())
		}
		*chans = append(*chans, n)
	}
	// ReadDir sorts by name, which puts h2c_10 before h2c_2.
	slices.Sort(c.H2C)
	slices.Sort(c.C2H)
	slices.Sort(c.Events)
	return nil
}

// assemble checks that the functions found behind one switch form a board.
func assemble(id string, fns []function) (Board, error) {
	slices.SortFunc(fns, func(a, b function) int {
		return cmp.Or(strings.Compare(a.port, b.port), strings.Compare(a.chip.BDF, b.chip.BDF))
	})
	var bdfs []string
	var errs []error
	for _, f := range fns {
		bdfs = append(bdfs, f.chip.BDF)
		if f.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.chip.BDF, f.err))
		}
	}
	if len(fns) != shell.ChipsPerBoard {
		errs = append(errs, fmt.Errorf("found %d of its %d chips", len(fns), shell.ChipsPerBoard))
	}
	b := Board{ID: id}
	for i, f := range fns {
		c := f.chip
		if f.err != nil {
			continue
		}
		if c.SubsystemVendor != shell.SubsystemVendor {
			errs = append(errs, fmt.Errorf("%s: subsystem vendor %#04x, want %#04x", c.BDF, c.SubsystemVendor, shell.SubsystemVendor))
			continue
		}
		m, err := shell.ModelBySubsystem(c.SubsystemDevice)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.BDF, err))
			continue
		}
		if b.Model.Name == "" {
			b.Model = m
		} else if m.Name != b.Model.Name {
			errs = append(errs, fmt.Errorf("%s is a %s chip, %s a %s chip", b.Chips[0].BDF, b.Model.Name, c.BDF, m.Name))
		}
		c.Index = i
		b.Chips = append(b.Chips, c)
	}
	if len(errs) > 0 {
		return Board{}, &BoardError{ID: id, BDFs: bdfs, Err: errors.Join(errs...)}
	}
	return b, nil
}

// readHex reads a sysfs attribute holding one hexadecimal number, "0x10ee\n".
func readHex(dir, name string, bits int) (uint64, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimPrefix(strings.TrimSpace(string(b)), "0x")
	n, err := strconv.ParseUint(s, 16, bits)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return n, nil
}

// readNUMANode reads numa_node, which kernels without NUMA support lack.
func readNUMANode(dir string) (int, error) {
	path := filepath.Join(dir, "numa_node")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return n, nil
}

// isBDF reports whether s is a PCI address as sysfs spells it,
// domain:bus:device.function, e.g. "0000:03:00.0".
func isBDF(s string) bool {
	if len(s) != len("0000:00:00.0") || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, r := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// isXDMAInstance reports whether s names an XDMA driver instance, "xdma0".
func isXDMAInstance(s string) bool {
	n, ok := strings.CutPrefix(s, "xdma")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}
