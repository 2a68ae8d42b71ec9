package launch

import (
	"runtime"
	"runtime/debug"
)

// Version says which build of gorun this is: the module version, or the
// commit it was built from (with "-dirty" for uncommitted changes), and
// the Go release, as gorun --version prints it. An agent tells the
// launcher its Version in its hello.
func Version() string {
	v := "(unknown)"
	info, ok := debug.ReadBuildInfo()
	if ok {
		v = info.Main.Version
		var rev, dirty string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && (v == "" || v == "(devel)") {
			v = rev + dirty
		}
	}
	return v + " (" + runtime.Version() + ")"
}
