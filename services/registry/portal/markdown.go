package portal

import (
	"bytes"
	"html/template"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// md renders listing descriptions. Raw HTML in the source is dropped
// (goldmark without html.WithUnsafe), and so are link and image
// destinations with dangerous schemes (javascript:, vbscript:, data: other
// than images); the CSP is the second wall.
var md = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(demoteHeadings{}, 100))),
	goldmark.WithRendererOptions(html.WithHardWraps()),
)

// demoteHeadings moves a description's headings one level down (h6 stays):
// the page's own <h1> is the listing's name, and a description's "# Title"
// must not be a second.
type demoteHeadings struct{}

func (demoteHeadings) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if h, ok := n.(*ast.Heading); ok && entering {
			h.Level = min(h.Level+1, 6)
		}
		return ast.WalkContinue, nil
	})
}

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
