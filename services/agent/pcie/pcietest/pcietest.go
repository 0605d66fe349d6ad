// Package pcietest builds fake Linux sysfs trees of PCI functions for tests
// of PCIe discovery (package pcie) and of the code built on it.
//
// A tree is described as a list of Func, each at its real device path under
// /sys/devices, and written by WriteSysfs the way the kernel lays it out:
//
//	devices/pci0000:00/0000:00:01.0/0000:01:00.0/...   function directories
//	bus/pci/devices/0000:01:00.0 -> ../../../devices/...
//	devices/.../driver -> ../../.../bus/pci/drivers/xdma
//	devices/.../xdma/xdma0_user/                        XDMA class devices
//
// Bridge, Chip and XDMANodes make the functions of a FaaS board: the on-card
// switch's bridges and the chips' XDMA endpoints.
package pcietest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/shell"
)

// Func is one PCI function of a fake sysfs tree.
type Func struct {
	// Path is the function's directory under /sys/devices, ending in its
	// BDF, e.g. "pci0000:00/0000:00:01.0/0000:01:00.0".
	Path                             string
	Vendor, Device                   uint16
	SubsystemVendor, SubsystemDevice uint16
	Class                            uint32
	NUMANode                         int
	// Driver is the name of the bound driver; "" makes no driver symlink.
	Driver string
	// XDMA lists the class devices under the function's xdma/ directory,
	// as XDMANodes makes them.
	XDMA []string
	// Override replaces (or adds) attribute files by name, e.g. to write a
	// malformed "vendor".
	Override map[string]string
}

// BDF returns the function's bus/device/function address, the last element
// of its path.
func (f Func) BDF() string { return filepath.Base(f.Path) }

// Bridge is a PCIe switch port (a PLX PEX 8724, class PCI-to-PCI bridge) at
// path: a root port, or an upstream or downstream port of a board's switch.
func Bridge(path string) Func {
	return Func{Path: path, Vendor: 0x10b5, Device: 0x8724, Class: 0x060400}
}

// Chip is one XDMA endpoint of a FaaS board of the given model at path, on
// NUMA node numa. xdmaNodes are its XDMA class devices (see XDMANodes); when
// nil, no driver is bound and the chip has none.
func Chip(path string, model shell.BoardModel, numa int, xdmaNodes []string) Func {
	f := Func{
		Path: path, Vendor: shell.VendorXilinx, Device: shell.DeviceID,
		SubsystemVendor: shell.SubsystemVendor, SubsystemDevice: model.SubsystemID,
		Class: shell.ClassCode, NUMANode: numa, XDMA: xdmaNodes,
	}
	if xdmaNodes != nil {
		f.Driver = "xdma"
	}
	return f
}

// XDMANodes lists the class devices the XDMA driver creates for its instance
// n ("xdma<n>_user", ...) with the given numbers of DMA channels in each
// direction and of user interrupt event lines.
func XDMANodes(n, channels, events int) []string {
	p := fmt.Sprintf("xdma%d_", n)
	nodes := []string{p + "user", p + "control", p + "xvc"}
	for k := range channels {
		nodes = append(nodes, fmt.Sprintf("%sh2c_%d", p, k), fmt.Sprintf("%sc2h_%d", p, k),
			fmt.Sprintf("%sbypass_h2c_%d", p, k))
	}
	for k := range events {
		nodes = append(nodes, fmt.Sprintf("%sevents_%d", p, k))
	}
	return nodes
}

// WriteSysfs builds a sysfs tree of funcs under a new temporary directory of
// t and returns that directory, the sysfs root: the real device directories
// under devices/ with their attribute files, the bus/pci/devices symlinks to
// them and the driver symlinks into bus/pci/drivers, all relative as the
// kernel makes them. bus/pci/devices exists even when funcs is empty.
func WriteSysfs(t testing.TB, funcs []Func) (root string) {
	t.Helper()
	root = t.TempDir()
	busDir := filepath.Join(root, "bus", "pci", "devices")
	mkdir(t, busDir)
	for _, f := range funcs {
		dir := filepath.Join(root, "devices", f.Path)
		mkdir(t, dir)
		files := map[string]string{
			"vendor":           fmt.Sprintf("0x%04x\n", f.Vendor),
			"device":           fmt.Sprintf("0x%04x\n", f.Device),
			"subsystem_vendor": fmt.Sprintf("0x%04x\n", f.SubsystemVendor),
			"subsystem_device": fmt.Sprintf("0x%04x\n", f.SubsystemDevice),
			"class":            fmt.Sprintf("0x%06x\n", f.Class),
			"irq":              "16\n",
			"numa_node":        fmt.Sprintf("%d\n", f.NUMANode),
			// 13 resources as the kernel lists them: BAR0, BAR1, then unused.
			"resource": "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200\n" +
				"0x00000000fc000000 0x00000000fc00ffff 0x0000000000040200\n" +
				strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 11),
		}
		for name, s := range f.Override {
			files[name] = s
		}
		for name, s := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		symlink(t, dir, filepath.Join(busDir, f.BDF()))
		if f.Driver != "" {
			drv := filepath.Join(root, "bus", "pci", "drivers", f.Driver)
			mkdir(t, drv)
			symlink(t, drv, filepath.Join(dir, "driver"))
		}
		for _, node := range f.XDMA {
			// A class device is a directory holding dev, uevent and so on.
			mkdir(t, filepath.Join(dir, "xdma", node))
		}
	}
	return root
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// symlink makes link point at target by a relative path.
func symlink(t testing.TB, target, link string) {
	t.Helper()
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		t.Fatal(err)
	}
}
