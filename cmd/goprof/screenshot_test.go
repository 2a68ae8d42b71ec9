package main

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// screenshot opens page in headless Chromium and checks that the timeline
// shows: enough pixels in the colours of the all-reduce calls and of the
// outermost regions (render's palette: #1f5fbf and #2e7d32). Without
// Chromium it skips, saying how to get it.
func screenshot(t *testing.T, page string) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Log("screenshot skipped: chromium not installed (apt-get install chromium; make test installs it)")
		return
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size=1400,1400", "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	var allreduce, region, other int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case r == 0x1f && g == 0x5f && bl == 0xbf:
				allreduce++
			case r == 0x2e && g == 0x7d && bl == 0x32:
				region++
			case r != 0xff || g != 0xff || bl != 0xff:
				other++
			}
		}
	}
	if allreduce < 100 || region < 100 {
		t.Errorf("the timeline does not show in the screenshot: %d all-reduce pixels, %d region pixels, %d others", allreduce, region, other)
	}
}
