package shell

// BAR map of each chip (both chips are identical).
const (
	// UserBAR is the AXI-Lite window of the user BAR (/dev/xdmaN_user):
	// shell registers first, then the loaded role's registers.
	UserBAR     = 0
	UserBARSize = 1 << 20
	// ControlBAR is the XDMA IP's own register space (/dev/xdmaN_control).
	ControlBAR     = 1
	ControlBARSize = 64 << 10

	// ShellBase and ShellSize bound the shell registers inside the user BAR.
	ShellBase = 0x0_0000
	ShellSize = 0x1_0000
	// RoleBase is where the loaded role's registers start in the user BAR;
	// RoleSize bytes are decoded to the role, nothing else.
	RoleBase = 0x1_0000
	RoleSize = UserBARSize - RoleBase
)

// Access says how software may access a register.
type Access string

// Register access kinds.
const (
	RO   Access = "RO"   // read-only; writes are ignored
	RW   Access = "RW"   // read-write
	WO   Access = "WO"   // write-only; reads return 0
	RW1C Access = "RW1C" // read, write 1 to clear a bit
)

// Register is one 32-bit shell register. Multi-word values (UUID, serial,
// digest, 64-bit addresses) are Count consecutive words, least significant
// word first, each word little-endian as PCIe delivers it.
type Register struct {
	Name    string
	Offset  uint32 // byte offset in the user BAR
	Count   int    // number of consecutive 32-bit words (1 for plain registers)
	Access  Access
	Meaning string
}

// Width is the register's width in bits.
func (r Register) Width() int { return 32 * r.Count }

// Shell register offsets in the user BAR. Every access is 32 bits wide at a
// 4-byte aligned offset.
const (
	RegMagic       = 0x0000
	RegVersion     = 0x0004
	RegInterfaceID = 0x0008 // 4 words
	RegBoardSerial = 0x0018 // 4 words, ASCII, NUL padded
	RegBoardID     = 0x0028
	RegChipIndex   = 0x002c
	RegPartID      = 0x0030
	RegCaps        = 0x0034
	RegScratch     = 0x0038
	RegPowerCycles = 0x003c
	RegDDRSize     = 0x0040 // 2 words, bytes
	RegAlarm       = 0x0048

	RegPRControl   = 0x0100
	RegPRStatus    = 0x0104
	RegPRBytes     = 0x0108
	RegPRCRC       = 0x010c
	RegPRTime      = 0x0110
	RegPRCount     = 0x0114
	RegPRStreamLen = 0x0118

	RegRoleID      = 0x0200
	RegRoleVersion = 0x0204
	RegRoleName    = 0x0208 // 6 words, ASCII, NUL padded

	RegImageDigest = 0x0300 // 8 words

	RegTemperature = 0x0400
	RegVCCInt      = 0x0404
	RegPower       = 0x0408
	RegClock0      = 0x040c
	RegClock1      = 0x0410
	RegTempLimit   = 0x0414

	RegLinkStatus = 0x0500
	RegLinkErrors = 0x0504

	RegIRQMask   = 0x0600
	RegIRQStatus = 0x0604

	RegWindowControl = 0x0700 // bit n enables window n
	RegWindowFault   = 0x0704
	RegWindowFaultAt = 0x0708 // 2 words
	RegWindowBase    = 0x0740 // window n base at RegWindowBase + 16n (2 words)
	RegWindowLimit   = 0x0748 // window n limit at RegWindowLimit + 16n (2 words)

	RegScrubControl = 0x0800
	RegScrubStatus  = 0x0804
)

// Windows is the number of tenant DDR windows the shell enforces.
const Windows = 8

// WindowStride is the distance between two windows' registers.
const WindowStride = 16

// Caps bits.
const (
	CapPR     = 1 << 0 // partial reconfiguration controller present
	CapLink   = 1 << 1 // inter-chip link present
	CapWindow = 1 << 2 // tenant DDR windows enforced on role DMA
	CapScrub  = 1 << 3 // DDR scrubber present
)

// PR controller control bits (RegPRControl).
const (
	PRDecouple = 1 << 0 // isolate the PR region from the shell (role DMA and MMIO blocked)
	PRBegin    = 1 << 1 // self-clearing: reset the stream parser, status becomes busy
	PREnd      = 1 << 2 // self-clearing: end of stream, check and activate
	PRAbort    = 1 << 3 // self-clearing: drop the stream, keep the previous role
)

// PR controller states, bits 3:0 of RegPRStatus. The error cause is in bits 15:8.
const (
	PRIdle  = 0
	PRBusy  = 1
	PRDone  = 2
	PRError = 3
)

// PRCause is why the PR controller refused a bitstream (bits 15:8 of
// RegPRStatus). Each cause is distinct so that the agent can say exactly what
// was wrong with an image.
type PRCause uint8

// PR error causes.
const (
	PROK           PRCause = 0
	PRBadHeader    PRCause = 1  // the .bit header is malformed
	PRPartMismatch PRCause = 2  // the header's part is not this chip's part
	PRNoSync       PRCause = 3  // no sync word in the configuration data
	PRTruncated    PRCause = 4  // the stream ended before the declared length
	PRBadCRC       PRCause = 5  // a CRC check in the configuration data failed
	PRNotPartial   PRCause = 6  // a full bitstream would overwrite the shell
	PRUnknownRole  PRCause = 7  // no role model for the design name
	PRNotDecoupled PRCause = 8  // BEGIN while the region is coupled
	PROverflow     PRCause = 9  // more data than the header declares
	PRBadPacket    PRCause = 10 // malformed configuration packet
	PRIDCode       PRCause = 11 // the IDCODE written by the stream is not this chip's
	PRNoCRC        PRCause = 12 // the stream never checks its CRC
	PRConfigError  PRCause = 13 // the configuration engine failed (INIT_B low)
	PROverTemp     PRCause = 14 // refused: chip above its temperature limit
	PRRoleFailed   PRCause = 15 // the role's model failed to start
	PRAborted      PRCause = 16 // software aborted the stream
)

var prCauseText = map[PRCause]string{
	PROK:           "ok",
	PRBadHeader:    "malformed .bit header",
	PRPartMismatch: "bitstream is for another part",
	PRNoSync:       "no sync word in configuration data",
	PRTruncated:    "bitstream truncated",
	PRBadCRC:       "configuration CRC mismatch",
	PRNotPartial:   "not a partial bitstream",
	PRUnknownRole:  "no role for the design name",
	PRNotDecoupled: "PR region not decoupled",
	PROverflow:     "more data than the header declares",
	PRBadPacket:    "malformed configuration packet",
	PRIDCode:       "IDCODE does not match the chip",
	PRNoCRC:        "bitstream has no CRC check",
	PRConfigError:  "configuration engine error",
	PROverTemp:     "chip over temperature",
	PRRoleFailed:   "role failed to start",
	PRAborted:      "aborted",
}

func (c PRCause) String() string {
	if s, ok := prCauseText[c]; ok {
		return s
	}
	return "unknown PR cause"
}

// PRCauses lists every defined cause in order.
func PRCauses() []PRCause {
	out := make([]PRCause, 0, len(prCauseText))
	for c := PROK; int(c) < len(prCauseText); c++ {
		out = append(out, c)
	}
	return out
}

// PRStatus decodes RegPRStatus.
func PRStatus(v uint32) (state uint32, cause PRCause) {
	return v & 0xf, PRCause(v >> 8)
}

// Alarm bits (RegAlarm); each also raises IRQAlarm.
const (
	AlarmOverTemp  = 1 << 0 // temperature at or above RegTempLimit; role decoupled
	AlarmLinkDown  = 1 << 1 // inter-chip link lost
	AlarmWindow    = 1 << 2 // a role DMA access fell outside its tenant window
	AlarmPowerLoss = 1 << 3 // the chip lost power since the bit was last cleared
)

// Link status bits (RegLinkStatus).
const (
	LinkUp        = 1 << 0
	LinkLanesMask = 0xff << 8 // trained lane count in bits 15:8
)

// Scrubber bits.
const (
	ScrubStart = 1 << 0 // RegScrubControl, self-clearing: zero the whole DDR
	ScrubBusy  = 1 << 0 // RegScrubStatus
	ScrubDone  = 1 << 1 // RegScrubStatus
)

// Window fault bits (RegWindowFault).
const (
	WindowFaultValid = 1 << 31 // a fault was recorded; write 1 to clear
	WindowFaultWrite = 1 << 30 // the faulting access was a write
	// bits 2:0 hold the window index used by the access
)

// IRQ lines. Each chip has 16 user interrupt lines, each readable through
// /dev/xdmaN_events_K. Lines 0-3 belong to the shell, 4-15 to the role.
const (
	IRQLines = 16
	IRQPR    = 0 // PR controller finished (done or error)
	IRQAlarm = 1 // a bit was set in RegAlarm
	IRQScrub = 2 // DDR scrub finished
	IRQRole0 = 4 // first line available to roles
)

// Registers is the shell v1 register map in offset order. SPEC.md is checked
// against it.
var Registers = []Register{
	{"MAGIC", RegMagic, 1, RO, `Shell magic, 0x46414153 ("FAAS").`},
	{"VERSION", RegVersion, 1, RO, "Shell version: major in bits 31:16, minor in bits 15:0."},
	{"INTERFACE_ID", RegInterfaceID, 4, RO, "PR interface UUID (16 bytes, byte 0 in the low byte of word 0); roles are built against it."},
	{"BOARD_SERIAL", RegBoardSerial, 4, RO, "Board serial number, ASCII, NUL padded; equal on both chips of a board."},
	{"BOARD_ID", RegBoardID, 1, RO, "Board model identifier."},
	{"CHIP_INDEX", RegChipIndex, 1, RO, "Index of this chip on the board, 0 or 1."},
	{"PART_ID", RegPartID, 1, RO, "JTAG IDCODE of this chip's part."},
	{"CAPS", RegCaps, 1, RO, "Capabilities: bit 0 PR, bit 1 inter-chip link, bit 2 tenant windows, bit 3 DDR scrubber."},
	{"SCRATCH", RegScratch, 1, RW, "Free for software; reset to 0 at power-on."},
	{"POWER_CYCLES", RegPowerCycles, 1, RO, "Number of times this chip was powered up; a change means role and DDR contents were lost."},
	{"DDR_SIZE", RegDDRSize, 2, RO, "Bytes of DDR attached to this chip (64-bit)."},
	{"ALARM", RegAlarm, 1, RW1C, "Latched alarms: bit 0 over-temperature, bit 1 link down, bit 2 window fault, bit 3 power loss."},
	{"PR_CONTROL", RegPRControl, 1, RW, "Bit 0 DECOUPLE (RW); bits 1 BEGIN, 2 END, 3 ABORT are self-clearing commands."},
	{"PR_STATUS", RegPRStatus, 1, RO, "Bits 3:0 state (0 idle, 1 busy, 2 done, 3 error); bits 15:8 error cause."},
	{"PR_BYTES", RegPRBytes, 1, RO, "Bytes of the current or last stream accepted by the PR controller."},
	{"PR_CRC", RegPRCRC, 1, RO, "Configuration CRC computed over the last stream."},
	{"PR_TIME_US", RegPRTime, 1, RO, "Time the configuration port took for the last stream, in microseconds."},
	{"PR_COUNT", RegPRCount, 1, RO, "Number of successful partial reconfigurations since power-up."},
	{"PR_STREAM_LEN", RegPRStreamLen, 1, RW, "Optional: total bytes software will stream; 0 means take the length from the .bit header."},
	{"ROLE_ID", RegRoleID, 1, RO, "Identifier of the loaded role; 0 when the region is empty."},
	{"ROLE_VERSION", RegRoleVersion, 1, RO, "Version of the loaded role: major in bits 31:16, minor in bits 15:0."},
	{"ROLE_NAME", RegRoleName, 6, RO, "Design name of the loaded role, ASCII, NUL padded (24 bytes)."},
	{"IMAGE_DIGEST", RegImageDigest, 8, RW, "Scratch for the SHA-256 digest of the loaded image; written by the agent after a load, cleared by PR and power-up."},
	{"TEMPERATURE", RegTemperature, 1, RO, "Die temperature in milli-degrees Celsius (signed)."},
	{"VCCINT", RegVCCInt, 1, RO, "Core supply voltage in millivolts."},
	{"POWER", RegPower, 1, RO, "Chip power in milliwatts."},
	{"CLOCK0", RegClock0, 1, RO, "Frequency of role clock 0 in kHz."},
	{"CLOCK1", RegClock1, 1, RO, "Frequency of role clock 1 in kHz."},
	{"TEMP_LIMIT", RegTempLimit, 1, RW, "Temperature in milli-degrees Celsius at which the shell decouples the role and refuses PR."},
	{"LINK_STATUS", RegLinkStatus, 1, RO, "Inter-chip link: bit 0 up, bits 15:8 trained lanes."},
	{"LINK_ERRORS", RegLinkErrors, 1, RO, "Count of inter-chip link losses since power-up."},
	{"IRQ_MASK", RegIRQMask, 1, RW, "Bit n set enables user IRQ line n; reset value 0xffff."},
	{"IRQ_STATUS", RegIRQStatus, 1, RW1C, "Bit n set when line n fired since last cleared."},
	{"WINDOW_CONTROL", RegWindowControl, 1, RW, "Bit n enables tenant DDR window n; role DMA through a disabled window faults."},
	{"WINDOW_FAULT", RegWindowFault, 1, RW1C, "Bit 31 a fault was recorded, bit 30 it was a write, bits 2:0 the window."},
	{"WINDOW_FAULT_ADDR", RegWindowFaultAt, 2, RO, "Card address of the first faulting role access (64-bit)."},
	{"WINDOW_BASE", RegWindowBase, 2, RW, "Window n base card address at 0x0740 + 16n (64-bit, n = 0..7)."},
	{"WINDOW_LIMIT", RegWindowLimit, 2, RW, "Window n limit at 0x0748 + 16n: first card address past the window (64-bit)."},
	{"SCRUB_CONTROL", RegScrubControl, 1, WO, "Bit 0 START: zero the whole DDR of this chip."},
	{"SCRUB_STATUS", RegScrubStatus, 1, RO, "Bit 0 busy, bit 1 done since START."},
}

// WindowBase returns the offset of window n's base register.
func WindowBase(n int) uint32 { return RegWindowBase + uint32(n)*WindowStride }

// WindowLimit returns the offset of window n's limit register.
func WindowLimit(n int) uint32 { return RegWindowLimit + uint32(n)*WindowStride }
