package launch

import (
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// TestConfigManPage keeps gorun.toml(5) true: every key of Config is
// documented, the example file decodes, and mandoc finds nothing to say.
func TestConfigManPage(t *testing.T) {
	const page = "../../man/gorun.toml.5"
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	ct := reflect.TypeOf(Config{})
	for i := 0; i < ct.NumField(); i++ {
		key := strings.Split(ct.Field(i).Tag.Get("toml"), ",")[0]
		if key == "" || key == "-" {
			continue
		}
		if !strings.Contains(text, "\n.B "+key+"\n") {
			t.Errorf("%s does not document the key %q (as a .B line under KEYS)", page, key)
		}
	}
	example := manExample(text, "EXAMPLES")
	cfg := DefaultConfig()
	if err := cfg.DecodeTOML(page+" EXAMPLES", []byte(example)); err != nil {
		t.Errorf("the example of %s does not decode: %v\n%s", page, err, example)
	}
	if cfg.MapBy != "node" || !cfg.TagOutput || len(cfg.Export) != 2 {
		t.Errorf("the example decoded to %+v", cfg)
	}
	lintManPage(t, page)
}

// manExample returns the first .nf/.fi block after the section heading, as
// a reader sees it (man's escapes undone).
func manExample(page, section string) string {
	_, rest, ok := strings.Cut(page, "\n.SH "+section+"\n")
	if !ok {
		return ""
	}
	_, rest, _ = strings.Cut(rest, ".nf\n")
	block, _, _ := strings.Cut(rest, ".fi\n")
	return strings.NewReplacer(`\-`, "-", `\(dq`, `"`, `\e`, `\`).Replace(block)
}

// lintManPage fails t when mandoc -Tlint warns about page; without mandoc
// it says so and passes (make test installs it).
func lintManPage(t *testing.T, page string) {
	t.Helper()
	mandoc, err := exec.LookPath("mandoc")
	if err != nil {
		t.Logf("mandoc not installed: %s not linted", page)
		return
	}
	if out, err := exec.Command(mandoc, "-Tlint", "-W", "warning", page).CombinedOutput(); err != nil {
		t.Errorf("mandoc -Tlint %s: %v\n%s", page, err, out)
	}
}
