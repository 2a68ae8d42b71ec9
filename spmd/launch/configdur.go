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
// TOML decoder would take the integer 5 as 5 nanoseconds. The error names
// name:line and says what to write.
func checkDurations(name string, b []byte) error {
	var p unstable.Parser
	p.Reset(b)
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
		key := string(kn.Data)
		v := e.Value()
		if keys.Next() || !durationKeys[key] || v.Kind == unstable.String {
			continue
		}
		line := p.Shape(kn.Raw).Start.Line
		what := key + " = " + string(p.Raw(v.Raw))
		if v.Raw.Length == 0 { // go-toml keeps no raw text for arrays and tables
			what = key + " is an " + strings.ToLower(v.Kind.String())
		}
		return errorf(ErrUsage, "%s:%d: %s: a duration is a string such as \"30s\", \"10m\" or \"1h30m\"", name, line, what)
	}
	return nil // a syntax error is the decoder's to report
}
