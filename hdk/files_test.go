package hdk_test

import "os"

func writeAll(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
