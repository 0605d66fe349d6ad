// Package web holds the ISV portal's assets and templates, embedded into the
// registry binary.
package web
