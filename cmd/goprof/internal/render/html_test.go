package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// checkXML walks every token of b as XML.
func checkXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
	}
}

func TestHTML(t *testing.T) {
	j := smallJob(t, 4, 3)
	r := analyze(j)
	var buf bytes.Buffer
	if err := HTML(&buf, j, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	checkXML(t, buf.Bytes())
	for _, s := range []string{
		`<section id="job">`, `<section id="problems"`, `<section id="timeline-section">`, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline"`,
		`<section id="charts">`, `id="chart-ranks"`, `id="chart-ops"`, `id="chart-steps"`,
		`<section id="ranks">`, `<section id="operations">`, `<section id="sites">`, `<section id="regions">`,
		`<section id="late-senders">`, `<section id="collective-waits">`, `<section id="stragglers">`,
		`<section id="efficiency">`, `<section id="bandwidth">`, `<section id="steps">`,
		"Missing rank: 3 of 4", "parallel efficiency", "allreduce", "forward",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
	// The steps' note partitions the step and puts the overlapped
	// communication inside the compute; its table has it beside compute.
	for _, s := range []string{" = compute ", " + exposed communication ", " + idle ", "communication overlapped ", "<th>compute</th><th>of it overlapped with comm</th><th>exposed comm</th>"} {
		if !strings.Contains(page, s) {
			t.Errorf("the steps section lacks %q", s)
		}
	}
	if strings.Index(page, `id="problems"`) > strings.Index(page, `id="timeline-section"`) {
		t.Error("the problems come after the timeline")
	}
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
		t.Error("the page refers to a URL")
	}
	for _, s := range []string{"<script", "<link", "src=", "@import", "url(http"} {
		if strings.Contains(page, s) {
			t.Errorf("the page is not self-contained: it has %q", s)
		}
	}
}

func TestHTMLComplete(t *testing.T) {
	j := smallJob(t, 2)
	var buf bytes.Buffer
	if err := HTML(&buf, j, analyze(j)); err != nil {
		t.Fatal(err)
	}
	checkXML(t, buf.Bytes())
	if strings.Contains(buf.String(), `id="problems"`) {
		t.Error("a complete job has problems")
	}
}
