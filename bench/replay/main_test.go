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

func TestHindsight(t *testing.T) {
	a := map[int]map[string]float64{
		8:  {"ring": 10, "tree": 20},   // b finds tree faster by more than 15%
		16: {"ring": 10, "tree": 11},   // b finds tree faster, ring within 15%
		32: {"ring": 5, "linear": 9},   // b did not measure this size
		64: {"ring": 30, "linear": 10}, // b did not run linear
	}
	b := map[int]map[string]float64{
		8:  {"ring": 30, "tree": 20},
		16: {"ring": 10.5, "tree": 10},
		64: {"ring": 30},
	}
	if good, n := hindsight(a, b); good != 1 || n != 3 {
		t.Errorf("hindsight: %d of %d, want 1 of 3", good, n)
	}
	if good, n := hindsight(a, a); good != 4 || n != 4 {
		t.Errorf("a run judged by itself: %d of %d, want 4 of 4", good, n)
	}
}
