package main

import "testing"

func TestParse(t *testing.T) {
	report := `# 4 ranks on 1 host
host 0  vm (vm:d1cb44c1)  4 ranks:  0 1 2 3

# model
same host   alpha 1.48 us                  beta 0.4455 ns/B (2.24 GB/s)  measured
other host  alpha 50.00 us                 beta 0.9091 ns/B (1.10 GB/s)  assumed
reduction   gamma 0.2911 ns/B (3.44 GB/s)
cores       2 per host                     wake 4.09 us per rank beyond them
`
	m, err := parse(report)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return a > b*0.999 && a < b*1.001 }
	if !near(m.Local.Alpha, 1.48e-6) || !near(m.Local.Beta, 0.4455e-9) || !near(m.Gamma, 0.2911e-9) || !near(m.Wake, 4.09e-6) || m.Cores != 2 {
		t.Errorf("parsed %+v", m)
	}
	if _, err := parse("gorun: no such flag"); err == nil {
		t.Error("a report without a model parsed")
	}
}
