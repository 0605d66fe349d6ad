package bitfile

import "fmt"

// Words of the configuration data.
const (
	dummyWord    = 0xFFFFFFFF
	busWidthWord = 0x000000BB // followed by busWidthTest: the 32-bit bus-width pattern
	busWidthTest = 0x11220044
	syncWord     = 0xAA995566
	noopWord     = 0x20000000 // type 1 NOOP, count 0
)

// Packet header fields.
const (
	type1 = 1
	type2 = 2

	opNOOP  = 0
	opRead  = 1
	opWrite = 2

	maxType1Words = 1<<11 - 1
	maxType2Words = 1<<27 - 1
)

func type1Write(r register, words int) uint32 {
	return type1<<29 | opWrite<<27 | uint32(r)<<13 | uint32(words)
}

func type2Write(words int) uint32 {
	return type2<<29 | opWrite<<27 | uint32(words)
}

// register is a configuration register address (5 bits in 7-series and
// UltraScale).
type register uint8

const (
	regCRC     register = 0x00
	regFAR     register = 0x01
	regFDRI    register = 0x02
	regFDRO    register = 0x03
	regCMD     register = 0x04
	regCTL0    register = 0x05
	regMASK    register = 0x06
	regSTAT    register = 0x07
	regLOUT    register = 0x08
	regCOR0    register = 0x09
	regMFWR    register = 0x0a
	regCBC     register = 0x0b
	regIDCODE  register = 0x0c
	regAXSS    register = 0x0d
	regCOR1    register = 0x0e
	regWBSTAR  register = 0x10
	regTIMER   register = 0x11
	regBOOTSTS register = 0x16
	regCTL1    register = 0x18
	regBSPI    register = 0x1f
)

// registerNames names the known registers; the others have no name.
var registerNames = [32]string{
	regCRC: "CRC", regFAR: "FAR", regFDRI: "FDRI", regFDRO: "FDRO", regCMD: "CMD",
	regCTL0: "CTL0", regMASK: "MASK", regSTAT: "STAT", regLOUT: "LOUT", regCOR0: "COR0",
	regMFWR: "MFWR", regCBC: "CBC", regIDCODE: "IDCODE", regAXSS: "AXSS", regCOR1: "COR1",
	regWBSTAR: "WBSTAR", regTIMER: "TIMER", regBOOTSTS: "BOOTSTS", regCTL1: "CTL1", regBSPI: "BSPI",
}

func (r register) String() string {
	if r.known() {
		return registerNames[r]
	}
	return fmt.Sprintf("register 0x%02x", uint8(r))
}

func (r register) known() bool {
	return int(r) < len(registerNames) && registerNames[r] != ""
}

// writable reports whether a bitstream may write r: it is a known register
// and not one of the read-only ones.
func (r register) writable() bool {
	return r.known() && r != regFDRO && r != regSTAT && r != regBOOTSTS
}

// Command is a value written to the CMD register.
type Command uint32

// Commands of the 7-series and UltraScale configuration engines.
const (
	CmdNULL     Command = 0
	CmdWCFG     Command = 1 // write configuration data
	CmdMFW      Command = 2 // multiple frame write
	CmdLFRM     Command = 3 // last frame
	CmdRCFG     Command = 4 // read configuration data
	CmdSTART    Command = 5 // begin the startup sequence
	CmdRCAP     Command = 6 // reset the capture signal
	CmdRCRC     Command = 7 // reset the CRC
	CmdAGHIGH   Command = 8 // assert GHIGH_B
	CmdSWITCH   Command = 9 // switch the configuration clock
	CmdGRESTORE Command = 10
	CmdSHUTDOWN Command = 11
	CmdGCAPTURE Command = 12
	CmdDESYNC   Command = 13 // end of configuration data: back to hunting for sync
	CmdIPROG    Command = 15 // reboot the chip from its configuration memory
	CmdCRCC     Command = 16 // compute the readback CRC
	CmdLTIMER   Command = 17 // reload the watchdog timer
	CmdBSPIREAD Command = 18 // read the SPI flash
	CmdFALLEDGE Command = 19 // switch to the falling clock edge
)

// commandNames names the known commands; the others have no name.
var commandNames = [20]string{
	CmdNULL: "NULL", CmdWCFG: "WCFG", CmdMFW: "MFW", CmdLFRM: "LFRM", CmdRCFG: "RCFG",
	CmdSTART: "START", CmdRCAP: "RCAP", CmdRCRC: "RCRC", CmdAGHIGH: "AGHIGH", CmdSWITCH: "SWITCH",
	CmdGRESTORE: "GRESTORE", CmdSHUTDOWN: "SHUTDOWN", CmdGCAPTURE: "GCAPTURE", CmdDESYNC: "DESYNC",
	CmdIPROG: "IPROG", CmdCRCC: "CRCC", CmdLTIMER: "LTIMER", CmdBSPIREAD: "BSPI_READ", CmdFALLEDGE: "FALL_EDGE",
}

func (c Command) String() string {
	if c.known() {
		return commandNames[c]
	}
	return fmt.Sprintf("Command(%d)", uint32(c))
}

func (c Command) known() bool {
	return c < Command(len(commandNames)) && commandNames[c] != ""
}
