package onnx

import (
	"errors"
	"fmt"
)

// ErrFormat is wrapped by every error about the content of a model or tensor:
// malformed protobuf, values out of range, or features this package does not
// support.
var ErrFormat = errors.New("onnx: invalid or unsupported format")

// Error locates and explains why a model or tensor was rejected.
type Error struct {
	File   string // the file read, if any
	Path   string // the offending field, e.g. `graph.node[3] (Conv "conv1").attribute[1] "pads".ints`
	Detail string // what is wrong with it
}

func (e *Error) Error() string {
	s := "onnx: "
	if e.File != "" {
		s += e.File + ": "
	}
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + e.Detail
}

// Unwrap returns ErrFormat.
func (e *Error) Unwrap() error { return ErrFormat }

func errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Detail: fmt.Sprintf(format, args...)}
}

// within prefixes the path of err, an *Error from decoding a field of the
// message at path, with path.
func within(path string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Path == "":
		e.Path = path
	case path != "":
		e.Path = path + "." + e.Path
	}
	return e
}
