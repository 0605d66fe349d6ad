package ppocr

import (
	"fmt"
	"os"
	"strings"
)

// Dict is the recogniser's classes: 0 the CTC blank, then the dictionary
// file's characters one a line, then the space, as PaddleOCR's
// CTCLabelDecode with use_space_char builds them.
type Dict []string

// ReadDict reads a PaddleOCR dictionary file (ppocr_keys_v1.txt).
func ReadDict(path string) (Dict, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the dictionary: %w", err)
	}
	chars := strings.Split(strings.TrimSuffix(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n"), "\n")
	return append(append(Dict{""}, chars...), " "), nil
}

// Decode is CTC's greedy decoding of probs [T, len(d)] (the recogniser's
// softmax, one row a step along the line): each step's most probable
// class, repeats merged and blanks dropped. score is the mean probability
// of the characters kept (0 for none).
func (d Dict) Decode(probs []float32, T int) (text string, score float64, err error) {
	C := len(d)
	if T < 0 || len(probs) != T*C {
		return "", 0, fmt.Errorf("CTC output of %d values for %d steps of %d classes", len(probs), T, C)
	}
	var sb strings.Builder
	prev, n := 0, 0
	for t := range T {
		row := probs[t*C : (t+1)*C]
		best := 0
		for k, p := range row {
			if p > row[best] {
				best = k
			}
		}
		if best != 0 && best != prev {
			sb.WriteString(d[best])
			score += float64(row[best])
			n++
		}
		prev = best
	}
	if n > 0 {
		score /= float64(n)
	}
	return sb.String(), score, nil
}
