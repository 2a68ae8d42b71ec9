package render

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// chromium returns the path of a Chromium on PATH, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// hexColor reads "#rrggbb".
func hexColor(t *testing.T, s string) [3]uint8 {
	t.Helper()
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil || len(s) != 7 {
		t.Fatalf("colour %q", s)
	}
	return [3]uint8{uint8(v >> 16), uint8(v >> 8), uint8(v)}
}

// TestScreenshot renders the page of a 4-rank job in headless Chromium
// and checks that the timeline shows: enough pixels of allreduce's exact
// colour near the top of the page.
func TestScreenshot(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not installed: apt-get install chromium (make test installs it)")
	}
	j := smallJob(t, 4)
	var page bytes.Buffer
	if err := HTML(&page, j, analyze(j)); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "report.html", page.Bytes())
	out := filepath.Join(t.TempDir(), "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1000", "--screenshot="+out, "file://"+path)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, msg)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, msg)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	want := hexColor(t, opColors["allreduce"])
	b := img.Bounds()
	exact, colored := 0, 0
	for y := b.Min.Y; y < b.Max.Y && y < b.Min.Y+1000; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)}
			if c == want {
				exact++
			}
			if c != [3]uint8{255, 255, 255} {
				colored++
			}
		}
	}
	t.Logf("screenshot %dx%d: %d pixels of allreduce's %s, %d not white", b.Dx(), b.Dy(), exact, opColors["allreduce"], colored)
	if exact < 300 {
		t.Errorf("%d pixels of allreduce's colour in the screenshot's first 1000 rows, want at least 300", exact)
	}
	if colored < 10000 {
		t.Errorf("the screenshot is nearly blank: %d pixels not white", colored)
	}
}
