package validate

import (
	"os"
	"strings"
	"testing"
)

// TestCodesDoc keeps CODES.md and Codes() saying the same, in the same order.
func TestCodesDoc(t *testing.T) {
	b, err := os.ReadFile("CODES.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc []CodeInfo
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) != 3 {
			t.Errorf("CODES.md: malformed row %q", line)
			continue
		}
		doc = append(doc, CodeInfo{
			Code:        Code(strings.Trim(strings.TrimSpace(cells[0]), "`")),
			Severity:    Severity(cells[1]),
			Description: strings.TrimSpace(cells[2]),
		})
	}
	codes := Codes()
	for i := range max(len(doc), len(codes)) {
		switch {
		case i >= len(doc):
			t.Errorf("CODES.md lacks %+v", codes[i])
		case i >= len(codes):
			t.Errorf("CODES.md has %+v, which Codes() lacks", doc[i])
		case doc[i] != codes[i]:
			t.Errorf("row %d:\nCODES.md: %+v\nCodes():  %+v", i, doc[i], codes[i])
		}
	}
	seen := make(map[Code]bool)
	for _, ci := range codes {
		if seen[ci.Code] {
			t.Errorf("code %s listed twice", ci.Code)
		}
		seen[ci.Code] = true
	}
}
