// Command ocr reads the text of an image with PaddleOCR's PP-OCR models on
// the AliDNN engine simulated in this process, through the SDK: the DB
// detector's text boxes, each line's direction (0° or 180°) from the
// classifier, and its text from the SVTR recogniser decoded with the
// dictionary (see package ppocr). Each model is compiled once per input
// shape it meets; with -int8 each is quantised after training instead,
// calibrated on rendered lines of other text.
//
// Usage:
//
//	ocr [-models DIR] [-image FILE.png | -text "line|line" [-size PX] [-upside]] [-int8] [-json]
//
// Without -image it reads a page it renders itself with the Go fonts:
// -text's lines (separated by |) at -size pixels, turned by 180° with
// -upside. -models holds the models as testdata/ocr/ppocrv4 does (default
// $FAAS_TESTDATA/ocr/ppocrv4, else testdata/ocr/ppocrv4).
//
// Exit codes: 0 read (with -text: every line read as rendered); 1 a step
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
	"path/filepath"
	"strings"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/examples/ocr/ppocr"
	"github.com/fpga-faas/faas/sdk/alidnn"
)

func main() {
	models := flag.String("models", defaultModels(), "folder of the PP-OCR models and dictionary")
	imagePath := flag.String("image", "", "image to read (PNG or JPEG); default a rendered page")
	text := flag.String("text", "Hello World 123|FPGA as a Service", "lines of the rendered page, separated by |")
	size := flag.Float64("size", 24, "font size of the rendered page, in pixels")
	upside := flag.Bool("upside", false, "turn the rendered page by 180°")
	int8 := flag.Bool("int8", false, "quantise the models to int8 after training")
	asJSON := flag.Bool("json", false, "print one JSON object")
	flag.Parse()
	if flag.NArg() != 0 || *size < 6 || *size > 96 {
		flag.Usage()
		os.Exit(2)
	}
	img, want, err := input(*imagePath, *text, *size, *upside)
	if err == nil {
		err = run(*models, img, want, *int8, *asJSON)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ocr:", err)
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
	if upside {
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
	}
	return img, want, err
}

// run reads img on an in-process engine and prints what it read; with
// want, a line read otherwise is an error.
func run(models string, img image.Image, want []string, int8, asJSON bool) error {
	m, err := ppocr.ReadModels(models)
	if err != nil {
		return err
	}
	sim, err := model.NewLocal(0)
	if err != nil {
		return err
	}
	defer sim.Close()
	var r *ppocr.Runner
	if int8 {
		// Calibration loads programs on a simulated board of its own.
		calib, err := model.NewLocal(0)
		if err != nil {
			return err
		}
		defer calib.Close()
		r = ppocr.NewInt8Runner(alidnn.NewLocal(sim), calib, ppocr.Calibration(m))
	} else {
		r = ppocr.NewRunner(alidnn.NewLocal(sim))
	}
	ctx := context.Background()
	defer r.Close(ctx)
	start := time.Now()
	res, err := ppocr.Read(ctx, r, m, img)
	wall := time.Since(start)
	if err != nil {
		return err
	}
	var bad []string
	for k, l := range res {
		if want != nil && (k >= len(want) || l.Text != want[k]) {
			bad = append(bad, fmt.Sprintf("line %d read %q", k, l.Text))
		}
	}
	if want != nil && len(res) != len(want) {
		bad = append(bad, fmt.Sprintf("%d lines found, %d rendered", len(res), len(want)))
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"lines": res, "stats": r.Stats, "wall_ns": wall, "ok": len(bad) == 0}); err != nil {
			return err
		}
	} else {
		for _, l := range res {
			turned := ""
			if l.Upside {
				turned = " (turned 180°)"
			}
			fmt.Printf("%v %q%s, score %.3f\n", l.Box.Rectangle, l.Text, turned, l.Score)
		}
		s := r.Stats
		fmt.Printf("%d runs of %d programs: compile %v, host %v, engine %.1f ms modelled; %v in all\n",
			s.Runs, s.Compiles, s.Compile.Round(time.Millisecond), s.Host.Round(time.Millisecond), float64(s.DeviceNS)/1e6, wall.Round(time.Millisecond))
	}
	if len(bad) > 0 {
		return fmt.Errorf("misread the rendered page: %s", strings.Join(bad, "; "))
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
