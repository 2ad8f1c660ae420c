package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command's main path in -quick mode: the JSON document has the
// documented shape and every cell passes its gates.
func TestScoreboardJSON(t *testing.T) {
	args := []string{"-quick", "-q", "-json"}
	if testing.Short() {
		args = append(args, "-contenders", "locus-mailbox,locus-inline,sync-pool,mutex-freelist")
	}
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	for _, k := range []string{"suite", "go_version", "gomaxprocs", "touch", "results"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	results, _ := doc["results"].([]any)
	if len(results) == 0 {
		t.Fatal("no results")
	}
	keys := []string{"workload", "contender", "runs_us", "median_us", "ci_pct", "blocks_per_trace", "peak",
		"theoretical_peak", "quality", "gates_ok", "gc_per_trace", "bytes_per_trace"}
	for _, r := range results {
		m := r.(map[string]any)
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("result missing key %q: %v", k, m)
			}
		}
		if m["gates_ok"] != true {
			t.Errorf("%v/%v failed its gates: %v", m["workload"], m["contender"], m["gate_errors"])
		}
		if runs := m["runs_us"].([]any); len(runs) < 2 {
			t.Errorf("%v/%v: %d runs, want >= 2", m["workload"], m["contender"], len(runs))
		}
	}
}

func TestScoreboardTableAndSVG(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"-quick", "-q", "-svg", dir, "-workloads", "steady-decode,churn-touch",
		"-contenders", "locus-mailbox,locus-inline,sync-pool"}
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"GOMAXPROCS=", "go1", "touch=byte", "locus-mailbox", "Targets", "Legend"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	for _, f := range []string{"velocity.svg", "quality.svg", "touch-steady-decode.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("figure %s: %v", f, err)
			continue
		}
		if !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("%s is not SVG", f)
		}
	}
}

func TestThreadQuickJSON(t *testing.T) {
	args := []string{"thread", "-quick", "-q", "-json"}
	if testing.Short() {
		args = append(args, "-exp", "0352,0357,0358")
	}
	var out, errOut bytes.Buffer
	if err := run(args, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	var doc ThreadReport
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if len(doc.Ledger) == 0 {
		t.Fatal("empty ledger")
	}
	for _, r := range doc.Ledger {
		if r.Verdict == "invalid" || r.Prediction == "" || r.Rust == "" || r.Go == "" {
			t.Errorf("%s: bad row %+v", r.ID, r)
		}
	}
}

func TestBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{"-touch", "sideways"}, {"-workloads", "nope"}, {"-contenders", "nope"}, {"thread", "-exp", "9999"}} {
		if err := run(args, &out, &errOut); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
