package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protowire"
)

// EncodeTensor encodes t as a TensorProto: dims, data_type, name and
// raw_data (string_data for STRING tensors). It fails if t's data does not
// match its dims.
func EncodeTensor(t *Tensor) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 32+len(t.Name)+len(t.raw)+10*len(t.Dims))
	// Dims unpacked, as onnx.proto (proto2) declares them and protobuf
	// writes them.
	for _, d := range t.Dims {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d))
	}
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(t.DataType))
	for _, s := range t.strs {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendBytes(b, s)
	}
	if t.Name != "" {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendString(b, t.Name)
	}
	if t.DataType != String {
		b = protowire.AppendTag(b, 9, protowire.BytesType)
		b = protowire.AppendBytes(b, t.raw)
	}
	return b, nil
}

// ReadModel reads and decodes the .onnx file at path.
func ReadModel(path string) (*Model, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Decode(b)
	return m, inFile(path, err)
}

// ReadTensor reads and decodes the TensorProto file (.pb) at path.
func ReadTensor(path string) (*Tensor, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTensor(b)
	return t, inFile(path, err)
}

// readFile reads path unless it is larger than MaxModelSize.
func readFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxModelSize {
		return nil, &Error{File: path, Detail: fmt.Sprintf("%d bytes, more than the protobuf limit of %d", fi.Size(), MaxModelSize)}
	}
	return os.ReadFile(path)
}

// inFile sets the file of err, if it is an *Error.
func inFile(path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.File = path
	}
	return err
}

// WriteTensor encodes t and writes it to path: to a temporary file in the
// same directory first, renamed to path once complete, so that path never
// holds a partial tensor.
func WriteTensor(path string, t *Tensor) error {
	b, err := EncodeTensor(t)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // CreateTemp makes it 0600
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("onnx: write %s: %w", path, err)
	}
	return nil
}
