//go:build !linux

package launch

import (
	"io"
	"os"
)

// ttyStdin: only Linux's terminals are told apart; elsewhere gorun reads
// its standard input as any file.
func ttyStdin(f *os.File) *os.File { return nil }

type ttyReader struct{ f *os.File }

func (r ttyReader) Read(p []byte) (int, error) { return r.f.Read(p) }

var _ io.Reader = ttyReader{}
