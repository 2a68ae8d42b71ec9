package render

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// markup writes SVG or HTML, keeping the first error.
type markup struct {
	w   *bufio.Writer
	err error
}

func newMarkup(w io.Writer) *markup { return &markup{w: bufio.NewWriterSize(w, 64<<10)} }

func (m *markup) raw(s string) {
	if m.err == nil {
		_, m.err = m.w.WriteString(s)
	}
}

func (m *markup) bytes(b []byte) {
	if m.err == nil {
		_, m.err = m.w.Write(b)
	}
}

func (m *markup) printf(format string, a ...any) {
	if m.err == nil {
		_, m.err = fmt.Fprintf(m.w, format, a...)
	}
}

// text writes s escaped, as element text or an attribute's value.
func (m *markup) text(s string) { m.raw(esc(s)) }

// flush writes what is buffered and returns the first error.
func (m *markup) flush() error {
	if m.err == nil {
		m.err = m.w.Flush()
	}
	return m.err
}

// esc escapes s for XML and HTML text and attribute values, dropping the
// control characters and invalid UTF-8 that XML does not allow.
func esc(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' && c != '\n' || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if !clean {
		s = strings.Map(func(r rune) rune {
			switch {
			case r == utf8.RuneError, r < 0x20 && r != '\t' && r != '\n', r == 0xfffe, r == 0xffff:
				return -1
			}
			return r
		}, strings.ToValidUTF8(s, ""))
	}
	return html.EscapeString(s)
}

// num formats a coordinate: two decimals at most, no trailing zeros.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// appendNum appends num(v) to b.
func appendNum(b []byte, v float64) []byte {
	n := len(b)
	b = strconv.AppendFloat(b, v, 'f', 2, 64)
	for len(b) > n && b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if len(b) > n && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	if string(b[n:]) == "-0" {
		b = append(b[:n], '0')
	}
	return b
}

// truncate shortens s to at most n runes, ending it with an ellipsis.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
