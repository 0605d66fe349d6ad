// Package web holds the portal's templates and static assets, embedded into
// the registry binary; package portal (services/registry/portal) renders
// and serves them.
//
// Third-party files are vendored from their npm packages at pinned
// versions, with their licences next to them (static/*.LICENSE; see
// static/README.md); nothing is fetched from a CDN and no Node toolchain
// runs at build or run time.
package web

import "embed"

// Templates are the html/template sources: layout.html and one file a page.
//
//go:embed templates/*.html
var Templates embed.FS

// Static are the files served under /static/.
//
//go:embed static/*
var Static embed.FS
