package ppocr_test

import (
	"image"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
)

// TestDict: the dictionary and the blank and space around it make the
// recogniser's 6625 classes.
func TestDict(t *testing.T) {
	d, err := ppocr.ReadDict(filepath.Join(testenv.TestData(t, "ocr", "ppocrv4"), ppocr.DictFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 6625 || d[0] != "" || d[len(d)-1] != " " {
		t.Errorf("%d classes, first %q, last %q: want 6625, the blank and the space", len(d), d[0], d[len(d)-1])
	}
	if _, err := ppocr.ReadDict(filepath.Join(t.TempDir(), "none.txt")); err == nil {
		t.Error("ReadDict of a missing file: no error")
	}
}

// TestDecode: repeats merge, blanks separate repeats and drop out.
func TestDecode(t *testing.T) {
	d := ppocr.Dict{"", "a", "b", " "}
	row := func(k int) []float32 {
		r := []float32{0.1, 0.1, 0.1, 0.1}
		r[k] = 0.7
		return r
	}
	var probs []float32
	for _, k := range []int{0, 1, 1, 0, 1, 2, 3, 2, 0} {
		probs = append(probs, row(k)...)
	}
	text, score, err := d.Decode(probs, 9)
	if err != nil || text != "aab b" || score < 0.69 || score > 0.71 {
		t.Errorf("Decode = %q, %v, %v; want \"aab b\", 0.7", text, score, err)
	}
	if _, _, err := d.Decode(probs, 8); err == nil {
		t.Error("Decode of 9 steps as 8: no error")
	}
}

// TestBoxes: two regions of a synthetic map, one too faint, grown by the
// unclip distance and clipped to the image, in reading order.
func TestBoxes(t *testing.T) {
	const h, w = 32, 64
	p := make([]float32, h*w)
	fill := func(r image.Rectangle, v float32) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				p[y*w+x] = v
			}
		}
	}
	fill(image.Rect(10, 20, 50, 26), 0.9) // 40×6: grown by 240·1.5/92 ≈ 4
	fill(image.Rect(2, 2, 20, 8), 0.9)    // 18×6: grown by 108·1.5/48 ≈ 3
	fill(image.Rect(40, 2, 60, 8), 0.5)   // below BoxThresh
	got, err := ppocr.Boxes(p, h, w, image.Rect(0, 0, 62, 30))
	if err != nil {
		t.Fatal(err)
	}
	want := []image.Rectangle{image.Rect(0, 0, 23, 11), image.Rect(6, 16, 54, 30)}
	if len(got) != len(want) {
		t.Fatalf("boxes %v, want %v", got, want)
	}
	for k := range want {
		if got[k].Rectangle != want[k] {
			t.Errorf("box %d %v, want %v", k, got[k].Rectangle, want[k])
		}
	}
	if _, err := ppocr.Boxes(p, h, w+1, image.Rect(0, 0, w, h)); err == nil {
		t.Error("Boxes of a map of the wrong size: no error")
	}
}

// TestEmptyLine: an empty crop is an error, not a panic.
func TestEmptyLine(t *testing.T) {
	empty := image.NewRGBA(image.Rect(0, 0, 0, 10))
	if _, err := ppocr.Rec(empty); err == nil {
		t.Error("Rec of an empty line: no error")
	}
	if _, err := ppocr.Cls(empty); err == nil {
		t.Error("Cls of an empty line: no error")
	}
}
