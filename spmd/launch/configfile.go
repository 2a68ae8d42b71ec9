package launch

import (
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// durationKeys are the config keys whose values are Durations.
var durationKeys = func() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == reflect.TypeFor[Duration]() {
			keys[strings.Split(f.Tag.Get("toml"), ",")[0]] = true
		}
	}
	return keys
}()

// checkDurations fails on a duration key whose value is not a string: the
// TOML decoder would take the integer 5 as 5 nanoseconds. keys are the
// file's (topKeys); the error names name:line and says what to write.
func checkDurations(name string, keys []fileKey) error {
	for _, k := range keys {
		if !durationKeys[k.key] || k.kind == unstable.String {
			continue
		}
		what := k.key + " = " + k.raw
		if k.raw == "" { // go-toml keeps no raw text for arrays and tables
			what = k.key + " is an " + strings.ToLower(k.kind.String())
		}
		return errorf(ErrUsage, "%s:%d: %s: a duration is a string such as \"30s\", \"10m\" or \"1h30m\"", name, k.line, what)
	}
	return nil
}

// fileKey is a top-level key that a config file sets.
type fileKey struct {
	key  string
	line int
	kind unstable.Kind // its value's
	raw  string        // its value as written; "" for arrays and tables
}

// topKeys lists the top-level keys of the TOML bytes b (a dotted key
// a.b is not one), in the file's order, up to a syntax error, which is
// the decoder's to report.
func topKeys(b []byte) []fileKey {
	var p unstable.Parser
	p.Reset(b)
	var ks []fileKey
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.KeyValue {
			continue
		}
		keys := e.Key()
		if !keys.Next() {
			continue
		}
		kn := keys.Node()
		if keys.Next() {
			continue
		}
		v := e.Value()
		k := fileKey{key: string(kn.Data), line: p.Shape(kn.Raw).Start.Line, kind: v.Kind}
		if v.Raw.Length > 0 {
			k.raw = string(p.Raw(v.Raw))
		}
		ks = append(ks, k)
	}
	return ks
}

// configKind says what the config key key takes, for its errors: "a
// string in quotes", "a whole number", "true or false", "a list of
// strings"; "" for no key of Config.
func configKind(key string) string {
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag != key || tag == "-" {
			continue
		}
		switch {
		case f.Type == reflect.TypeFor[Duration]():
			return `a duration in quotes, such as "30s"`
		case f.Type.Kind() == reflect.String:
			return "a string in quotes"
		case f.Type.Kind() == reflect.Int:
			return "a whole number"
		case f.Type.Kind() == reflect.Bool:
			return "true or false"
		case f.Type.Kind() == reflect.Slice:
			return `a list of strings, such as ["A=1", "B"]`
		}
		return "a value"
	}
	return ""
}
