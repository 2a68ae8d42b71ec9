//go:build !linux

package launch

import "os"

// ttyStdin: only Linux's terminals are told apart; elsewhere gorun reads
// its standard input as any file.
func ttyStdin(f *os.File) bool { return false }

type ttyReader struct{ f *os.File }

func (r ttyReader) Read(p []byte) (int, error) { return r.f.Read(p) }
