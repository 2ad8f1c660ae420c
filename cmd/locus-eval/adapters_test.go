package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

// The adapters subcommand end to end in -quick mode: the document parses
// strictly and validates, every load row and target is there, every
// acquire of the scale part is timed, both batcher orders ran, and report
// renders it.
func TestAdaptersQuick(t *testing.T) {
	status, out, errOut := runCmd(t, "adapters", "-quick", "-q", "-json", "-rounds", "3", "-zipf-acquires", "300", "-batcher-steps", "15")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	d, err := eval.ParseAdapters([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Quick || d.Machine.NumCPU < 1 || d.Loads.Rounds != 3 || d.Zipf.Acquires != 300 || d.Batcher.Steps != 15 {
		t.Errorf("quick %v, %d CPUs, %d rounds, %d acquires, %d steps", d.Quick, d.Machine.NumCPU, d.Loads.Rounds, d.Zipf.Acquires, d.Batcher.Steps)
	}
	var names []string
	for _, r := range d.Loads.Rows {
		names = append(names, r.Name)
		if r.NS.Median <= 0 {
			t.Errorf("%s: median %v", r.Name, r.NS.Median)
		}
	}
	if got, want := strings.Join(names, ","), "hot acquire,warm exact,warm int8,cold file,cold disk tier,memmove,file read"; got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	if len(d.Targets) != 5 {
		t.Errorf("%d targets, want 5", len(d.Targets))
	}
	for _, r := range d.Loads.Rows {
		if r.Name == "cold disk tier" && (r.Limit != "file read" || r.GBps <= 0) {
			t.Errorf("the disk tier row %+v", r)
		}
	}
	if z := d.Zipf; z.Registered != 10_000 || z.HotSlots != 100 || z.WarmSlots != 1000 || z.BytesPerRegistered <= 0 || z.HotHitRate <= 0 {
		t.Errorf("scale %+v", z)
	}
	if len(d.Batcher.Runs) != 2 || d.Batcher.Runs[0].Order != "residency-first" || d.Batcher.Runs[1].Order != "largest-queue-first" {
		t.Errorf("batcher runs %+v", d.Batcher.Runs)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "adapters.json")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	status, md, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", path)
	if status != 0 || !strings.Contains(md, "\n## Adapters: ADR-006's residency targets") {
		t.Fatalf("report: status %d: %s\n%s", status, errOut, md)
	}
	if status, txt, errOut := runCmd(t, "report", "-text", "internal/eval/testdata/scoreboard.json", path); status != 0 || !strings.Contains(txt, "Targets (ADR-006") {
		t.Fatalf("report -text: status %d: %s\n%s", status, errOut, txt)
	}
}

// The tables without -json.
func TestAdaptersText(t *testing.T) {
	status, out, errOut := runCmd(t, "adapters", "-quick", "-q", "-rounds", "3", "-zipf-acquires", "10", "-batcher-steps", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"hot acquire", "warm int8", "cold disk tier", "file read", "p99.9", "largest-queue-first", "Targets (ADR-006", "(disk tier) < 10 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

// Bad flags: exit status 2, naming the flag and the range.
func TestAdaptersBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds 0; want 3 to 10000"},
		{[]string{"-rounds", "-1"}, "-rounds -1; want 3 to 10000"},
		{[]string{"-rounds", "2"}, "-rounds 2; want 3 to 10000"},
		{[]string{"-rounds", "10001"}, "-rounds 10001; want 3 to 10000"},
		{[]string{"-zipf-acquires", "0"}, "-zipf-acquires 0; want 1 to 10000000"},
		{[]string{"-zipf-acquires", "-5"}, "-zipf-acquires -5; want 1 to 10000000"},
		{[]string{"-batcher-steps", "0"}, "-batcher-steps 0; want 1 to 100000"},
		{[]string{"-batcher-steps", "100001"}, "-batcher-steps 100001; want 1 to 100000"},
		{[]string{"-dir", filepath.Join(file, "nope")}, "-dir"},
		{[]string{"-dir", file}, "not a directory"},
		{[]string{"-rounds", "x"}, "-rounds"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		status, _, errOut := runCmd(t, append([]string{"adapters", "-q"}, c.args...)...)
		if status != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", c.args, status, errOut, c.want)
		}
	}
	if status, _, errOut := runCmd(t, "adapters", "-help"); status != 0 || !strings.Contains(errOut, "ADR-006") {
		t.Errorf("-help: status %d: %s", status, errOut)
	}
}
