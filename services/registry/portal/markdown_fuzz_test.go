package portal

import (
	"regexp"
	"strings"
	"testing"
)

// dangerous matches what must never come out of a description: script
// elements, event-handler attributes and script-bearing URLs in attributes.
var dangerous = regexp.MustCompile(`(?i)<\s*(script|iframe|object|embed|style|svg|math)|<[a-z][^>]*\son[a-z]+\s*=|(href|src)\s*=\s*"\s*(javascript|vbscript|data:text)`)

// FuzzMarkdown: whatever an ISV writes, the rendered description is inert.
func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{
		"# Title\n\n**bold** _it_ `code`",
		"<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>",
		"[x](javascript:alert(1))",
		"[x](JaVaScRiPt:alert(1))",
		"[x](java\tscript:alert(1))",
		"![x](javascript:alert(1))",
		"[x](data:text/html;base64,PHNjcmlwdD4=)",
		"<a href=\"javascript:alert(1)\">x</a>",
		"[x]: javascript:alert(1)\n\n[x]",
		"<svg onload=alert(1)>",
		"`<script>` in code",
		"| a | b |\n|---|---|\n| <script> | x |",
		"www.example.com/<script>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := string(markdown(src))
		if m := dangerous.FindString(out); m != "" {
			t.Fatalf("description %q renders %q:\n%s", src, m, out)
		}
		if strings.Contains(strings.ToLower(out), "<script") {
			t.Fatalf("script element from %q", src)
		}
		if strings.Contains(out, "<h1") {
			t.Fatalf("a second <h1> (the page has the listing's name) from %q", src)
		}
	})
}
