package portal

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
)

// md renders listing descriptions. Raw HTML in the source is dropped
// (goldmark without html.WithUnsafe), and so are link and image
// destinations with dangerous schemes (javascript:, vbscript:, data: other
// than images); the CSP is the second wall.
var md = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// maxDescription bounds the Markdown rendered for one page.
const maxDescription = 64 << 10

// markdown renders src as safe HTML.
func markdown(src string) template.HTML {
	if len(src) > maxDescription {
		src = src[:maxDescription]
	}
	var b bytes.Buffer
	if err := md.Convert([]byte(src), &b); err != nil {
		return template.HTML(template.HTMLEscapeString(src))
	}
	return template.HTML(b.String()) //nolint:gosec // goldmark without WithUnsafe escapes raw HTML
}
