package shell

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables of SPEC.md")

// specTables renders the parts of SPEC.md that must agree with the Go
// definitions, keyed by the name of their marker.
func specTables() map[string]string {
	var regs strings.Builder
	regs.WriteString("| Offset | Name | Width | Access | Meaning |\n|---|---|---|---|---|\n")
	for _, r := range Registers {
		fmt.Fprintf(&regs, "| 0x%04x | %s | %d | %s | %s |\n", r.Offset, r.Name, r.Width(), r.Access, r.Meaning)
	}
	var causes strings.Builder
	causes.WriteString("| Cause | Name | Meaning |\n|---|---|---|\n")
	for _, c := range PRCauses() {
		fmt.Fprintf(&causes, "| %d | %s | %s |\n", c, prCauseName(c), c)
	}
	var models strings.Builder
	models.WriteString("| Model | Subsystem ID | BOARD_ID | Part (both chips) | IDCODE | Config rate | DDR per chip |\n|---|---|---|---|---|---|---|\n")
	for _, m := range Models {
		p := m.Parts[0]
		fmt.Fprintf(&models, "| %s | 0x%04x | 0x%08x | %s | 0x%08x | %d MB/s | %d GiB |\n",
			m.Name, m.SubsystemID, m.ID, p.Name, p.IDCode, p.ConfigRate/1_000_000, m.DDRSize>>30)
	}
	ids := fmt.Sprintf("| Field | Value |\n|---|---|\n| Shell | %s v%d.%d |\n| MAGIC | 0x%08x |\n| Interface UUID | %x |\n| Vendor ID | 0x%04x |\n| Device ID | 0x%04x |\n| Subsystem vendor | 0x%04x |\n| Class | 0x%06x |\n| User BAR | BAR%d, %d KiB (shell 0x%05x-0x%05x, role 0x%05x-0x%05x) |\n| Control BAR | BAR%d, %d KiB |\n| DMA channels | %d H2C + %d C2H, memory mapped, %d-bit card addresses, alignment %d bytes |\n| PR stream port | card address 0x%x |\n| User IRQ lines | %d |\n| Tenant windows | %d |\n",
		Name, VersionMajor, VersionMinor, Magic, InterfaceUUID, VendorXilinx, DeviceID, SubsystemVendor, ClassCode,
		UserBAR, UserBARSize>>10, ShellBase, ShellBase+ShellSize-1, RoleBase, RoleBase+RoleSize-1,
		ControlBAR, ControlBARSize>>10, DMAChannels, DMAChannels, DMAAddressBits, DMAAlign, PRStreamAddr, IRQLines, Windows)
	return map[string]string{"identity": ids, "models": models.String(), "registers": regs.String(), "pr-causes": causes.String()}
}

// prCauseName is the constant's name without its "PR" prefix, upper-cased.
func prCauseName(c PRCause) string {
	names := map[PRCause]string{PROK: "OK", PRBadHeader: "BAD_HEADER", PRPartMismatch: "PART_MISMATCH",
		PRNoSync: "NO_SYNC", PRTruncated: "TRUNCATED", PRBadCRC: "BAD_CRC", PRNotPartial: "NOT_PARTIAL",
		PRUnknownRole: "UNKNOWN_ROLE", PRNotDecoupled: "NOT_DECOUPLED", PROverflow: "OVERFLOW",
		PRBadPacket: "BAD_PACKET", PRIDCode: "IDCODE", PRNoCRC: "NO_CRC", PRConfigError: "CONFIG_ERROR",
		PROverTemp: "OVER_TEMP", PRRoleFailed: "ROLE_FAILED", PRAborted: "ABORTED"}
	return names[c]
}

var marker = regexp.MustCompile(`(?s)<!-- begin:([a-z-]+) -->\n(.*?)<!-- end:([a-z-]+) -->`)

func TestSpecInSync(t *testing.T) {
	doc, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	want := specTables()
	seen := map[string]bool{}
	out := marker.ReplaceAllFunc(doc, func(m []byte) []byte {
		sub := marker.FindSubmatch(m)
		name, body := string(sub[1]), string(sub[2])
		seen[name] = true
		w, ok := want[name]
		if !ok {
			t.Errorf("SPEC.md has an unknown generated section %q", name)
			return m
		}
		if body != w && !*update {
			t.Errorf("SPEC.md section %q is out of date with the Go definitions; run `go test ./shell -run TestSpecInSync -update`\n got:\n%s\nwant:\n%s", name, body, w)
		}
		return []byte("<!-- begin:" + name + " -->\n" + w + "<!-- end:" + name + " -->")
	})
	for name := range want {
		if !seen[name] {
			t.Errorf("SPEC.md lacks the generated section %q (<!-- begin:%s --> … <!-- end:%s -->)", name, name, name)
		}
	}
	if *update && !bytes.Equal(out, doc) {
		if err := os.WriteFile("SPEC.md", out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRegistersWellFormed(t *testing.T) {
	var end uint32
	names := map[string]bool{}
	for i, r := range Registers {
		if r.Offset%4 != 0 {
			t.Errorf("%s at %#x is not 32-bit aligned", r.Name, r.Offset)
		}
		if i > 0 && r.Offset < end {
			t.Errorf("%s at %#x overlaps the previous register (ends at %#x)", r.Name, r.Offset, end)
		}
		if r.Offset+uint32(4*r.Count) > ShellBase+ShellSize {
			t.Errorf("%s at %#x runs past the shell's register space", r.Name, r.Offset)
		}
		if names[r.Name] {
			t.Errorf("register name %s used twice", r.Name)
		}
		names[r.Name] = true
		if r.Count < 1 || r.Meaning == "" {
			t.Errorf("%s: count %d, meaning %q", r.Name, r.Count, r.Meaning)
		}
		end = r.Offset + uint32(4*r.Count)
	}
	if WindowLimit(Windows-1)+8 > RegScrubControl {
		t.Errorf("window registers run into the scrubber")
	}
	for _, c := range PRCauses() {
		if prCauseName(c) == "" || c.String() == "unknown PR cause" {
			t.Errorf("PR cause %d lacks a name or text", c)
		}
	}
}

func TestXDMAAlignmentRoundTrip(t *testing.T) {
	v := XDMAAlignment(DMAAlign, DMAAlign, DMAAddressBits)
	a, l, b := ParseXDMAAlignment(v)
	if a != DMAAlign || l != DMAAlign || b != DMAAddressBits {
		t.Fatalf("alignment %#x decodes to %d,%d,%d", v, a, l, b)
	}
}
