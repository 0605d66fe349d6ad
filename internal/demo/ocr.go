package demo

import (
	"path/filepath"
	"strings"
)

// ocrText is the page the OCR step renders and reads, two lines.
const ocrText = "FPGA as a Service|Hello World 123"

// readText is step 12: examples/ocr, on a host without faasd, attaches an
// accelerator from the pool and reads a page it renders upside down with
// PP-OCR's detector, direction classifier and recogniser; then, with the
// models quantised to int8 on the attached accelerator, a page at another
// size, upright.
func (d *demo) readText(p *platform) error {
	d.begin("examples/ocr on an accelerator attached from the pool: PP-OCR reads a page it rendered upside down, then in int8")
	cpu := with(p.alice, "FAAS_AGENT=unix://"+filepath.Join(d.root, "no-faasd-here.sock"))
	common := []string{"-attach", "acme/" + load, "-models", filepath.Join(d.cfg.TestData, "ocr", "ppocrv4"), "-text", ocrText}
	for _, extra := range [][]string{{"-upside"}, {"-int8", "-size", "28"}} {
		args := append(append([]string{}, common...), extra...)
		d.printf("      $ FAAS_AGENT=(nothing there) ocr %s\n", strings.Join(quoteArgs(args), " "))
		out, err := d.run(cpu, "", "ocr", args...)
		d.printf("%s", indent(out))
		if err != nil {
			return err
		}
	}
	return nil
}

// quoteArgs quotes the arguments a shell would split.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for k, a := range args {
		out[k] = a
		if strings.ContainsAny(a, " |") {
			out[k] = "'" + a + "'"
		}
	}
	return out
}
