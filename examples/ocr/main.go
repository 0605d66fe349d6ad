// Command ocr reads the text of an image with PaddleOCR's PP-OCR models on
// an AliDNN slot, the way a tenant's program would: the DB detector's text
// boxes, each line's direction (0° or 180°) from the classifier, and its
// text from the SVTR recogniser decoded with the dictionary, all through
// the SDK (package sdk/alidnn/ppocr). Each model is compiled once per input
// shape it meets.
//
// Usage:
//
//	ocr [-agent TARGET] [-slot N] [-models DIR] [-int8] [-image FILE.png | -text "line|line" [-size PX] [-upside]] [-json]
//	ocr -attach LISTING[:VERSION] [-registry URL] [...]
//
// Without -image it reads a page it renders itself with the Go fonts:
// -text's lines (separated by |) at -size pixels, turned by 180° with
// -upside, and checks that every line reads as rendered. -models holds the
// models as testdata/ocr/ppocrv4 does (default $FAAS_TESTDATA/ocr/ppocrv4,
// else testdata/ocr/ppocrv4). -int8 quantises the three models after
// training, calibrated on the same accelerator on rendered text (see
// ppocr.Calibration). The slot and the token are found as examples/mnist
// finds them.
//
// Exit codes: 0 read (a rendered page: every line as rendered); 1 a step
// failed or a rendered line was misread; 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
	"github.com/fpga-faas/faas/sdk/faas"
)

func main() {
	agent := flag.String("agent", "", "faasd: unix socket path, unix:///path or https://host:port (default $FAAS_AGENT or /run/faas/faasd.sock)")
	slot := flag.Int("slot", 0, "slot loaded with the AliDNN engine")
	attach := flag.String("attach", "", "attach an accelerator of the registry's pool running LISTING[:VERSION] instead of opening -slot")
	registry := flag.String("registry", "", "with -attach: the registry (default $FAAS_REGISTRY or the one faas login stored)")
	models := flag.String("models", defaultModels(), "folder of the PP-OCR models and dictionary")
	imagePath := flag.String("image", "", "image to read (PNG or JPEG); default a rendered page")
	text := flag.String("text", "Hello World 123|FPGA as a Service", "lines of the rendered page, separated by |")
	size := flag.Float64("size", 24, "font size of the rendered page, in pixels")
	upside := flag.Bool("upside", false, "turn the rendered page by 180°")
	asJSON := flag.Bool("json", false, "print one JSON object")
	int8 := flag.Bool("int8", false, "quantise the models to int8 after training, calibrated on the accelerator")
	flag.Parse()
	if flag.NArg() != 0 || *slot < 0 || *size < 6 || *size > 96 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := func() error {
		img, want, err := input(*imagePath, *text, *size, *upside)
		if err != nil {
			return err
		}
		m, err := ppocr.ReadModels(*models)
		if err != nil {
			return err
		}
		dev, where, closeDev, err := open(ctx, *agent, *slot, *attach, *registry)
		if err != nil {
			return err
		}
		defer closeDev()
		eng := alidnn.Agent(dev)
		r := ppocr.NewRunner(eng)
		if *int8 {
			// faasd allocates per session: the calibration runs beside
			// the programs on the same accelerator.
			r = ppocr.NewInt8Runner(eng, eng, ppocr.Calibration(m))
		}
		defer r.Close(ctx)
		out, err := read(ctx, r, m, img, want)
		if err != nil {
			return fmt.Errorf("on %s: %w", where, err)
		}
		return out.print(os.Stdout, where, *asJSON)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ocr:", err)
		if h := faas.Hint(err); h != "" {
			fmt.Fprintln(os.Stderr, "hint:", h)
		}
		os.Exit(1)
	}
}

// input is the image to read: the file at path, or a page rendered from
// text's lines, whose expected reading it also returns.
func input(path, text string, size float64, upside bool) (image.Image, []string, error) {
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		img, _, err := image.Decode(f)
		if err != nil {
			return nil, nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		return img, nil, nil
	}
	want := strings.Split(text, "|")
	var lines []ppocr.Line
	y, w := int(size)/2, 0
	for _, s := range want {
		lines = append(lines, ppocr.Line{Text: s, Size: size, X: int(size) / 2, Y: y})
		y += int(size * 1.8)
		w = max(w, int(float64(len(s))*size*0.7)+int(2*size))
	}
	img, err := ppocr.Render(w, y+int(size)/2, lines, upside, 8, 1)
	if upside { // the page's reading order, turned with it
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
	}
	return img, want, err
}

// outcome is what read found.
type outcome struct {
	Lines []ppocr.Result
	Stats ppocr.RunStats
	Wall  time.Duration
	// Misread lists the lines of a rendered page read otherwise.
	Misread []string
}

// read reads img with r; with want (a rendered page's lines), a line read
// otherwise is listed in the outcome's Misread.
func read(ctx context.Context, r *ppocr.Runner, m *ppocr.Models, img image.Image, want []string) (*outcome, error) {
	start := time.Now()
	res, err := ppocr.Read(ctx, r, m, img)
	if err != nil {
		return nil, err
	}
	out := &outcome{Lines: res, Stats: r.Stats, Wall: time.Since(start)}
	if want == nil {
		return out, nil
	}
	for k, l := range res {
		if k >= len(want) || l.Text != want[k] {
			out.Misread = append(out.Misread, fmt.Sprintf("line %d read %q", k, l.Text))
		}
	}
	if len(res) != len(want) {
		out.Misread = append(out.Misread, fmt.Sprintf("%d lines found, %d rendered", len(res), len(want)))
	}
	return out, nil
}

// print writes the outcome, and fails if a rendered line was misread.
func (o *outcome) print(f *os.File, where string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"on": where, "lines": o.Lines, "stats": o.Stats, "wall_ns": o.Wall, "ok": len(o.Misread) == 0}); err != nil {
			return err
		}
	} else {
		for _, l := range o.Lines {
			turned := ""
			if l.Upside {
				turned = " (turned 180°)"
			}
			fmt.Fprintf(f, "%v %q%s, score %.3f\n", l.Box.Rectangle, l.Text, turned, l.Score)
		}
		s := o.Stats
		fmt.Fprintf(f, "%d runs of %d programs on %s: compile %v, host %v, engine %.1f ms modelled; %v in all\n",
			s.Runs, s.Compiles, where, s.Compile.Round(time.Millisecond), s.Host.Round(time.Millisecond), float64(s.DeviceNS)/1e6, o.Wall.Round(time.Millisecond))
	}
	if len(o.Misread) > 0 {
		return fmt.Errorf("misread the rendered page: %s", strings.Join(o.Misread, "; "))
	}
	return nil
}

func defaultModels() string {
	dir := os.Getenv("FAAS_TESTDATA")
	if dir == "" {
		dir = "testdata"
	}
	return filepath.Join(dir, "ocr", "ppocrv4")
}
