package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/internal/race"
)

// The measuring children re-execute this test binary.
func TestMain(m *testing.M) {
	if eval.IsChild() {
		os.Exit(eval.ChildMain())
	}
	os.Exit(m.Run())
}

func runCmd(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status = run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

// The scoreboard end to end in -quick mode, through its child processes:
// the JSON document has its schema, configuration, machine and structured
// targets, every cell passed its gates, and report and compare read it.
func TestScoreboardQuick(t *testing.T) {
	args := []string{"-quick", "-q", "-json", "-runs", "3", "-workloads", "steady-decode,churn-touch",
		"-contenders", "locus-inline,mutex-freelist,locus-handwritten"}
	cells := 4 // the baseline is added
	if testing.Short() || race.Enabled {
		args = []string{"-quick", "-q", "-json", "-runs", "3", "-workloads", "churn-touch", "-contenders", "mutex-freelist", "-passes", "unpaced"}
		cells = 2
	}
	status, out, errOut := runCmd(t, args...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var doc struct {
		Schema        string `json:"schema"`
		SchemaVersion int    `json:"schema_version"`
		Config        struct {
			Runs  int  `json:"runs"`
			Quick bool `json:"quick"`
		} `json:"config"`
		Machine struct {
			CPUModel   string `json:"cpu_model"`
			GOMAXPROCS int    `json:"gomaxprocs"`
			GoVersion  string `json:"go_version"`
		} `json:"machine"`
		Revision struct {
			VCS string `json:"vcs_revision"`
		} `json:"revision"`
		Passes []struct {
			Workloads []struct {
				Cells []struct {
					Contender string `json:"contender"`
					GatesOK   bool   `json:"gates_ok"`
				} `json:"cells"`
			} `json:"workloads"`
		} `json:"passes"`
		Targets []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Want   struct {
				Op string `json:"op"`
			} `json:"want"`
		} `json:"targets"`
		GatesOK bool `json:"gates_ok"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if _, _, err := eval.ParseDocument([]byte(out)); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if doc.Schema != eval.Schema || doc.SchemaVersion != eval.SchemaVersion || doc.Config.Runs != 3 || !doc.Config.Quick ||
		doc.Machine.CPUModel == "" || doc.Machine.GOMAXPROCS < 1 || doc.Machine.GoVersion == "" || doc.Revision.VCS == "" {
		t.Errorf("header: %+v", doc)
	}
	if !doc.GatesOK || len(doc.Passes) == 0 {
		t.Fatalf("gates %v, %d passes", doc.GatesOK, len(doc.Passes))
	}
	for _, p := range doc.Passes {
		for _, w := range p.Workloads {
			if len(w.Cells) != cells {
				t.Errorf("%d cells, want %d", len(w.Cells), cells)
			}
			for _, c := range w.Cells {
				if !c.GatesOK {
					t.Errorf("%s failed its gates", c.Contender)
				}
			}
		}
	}
	if len(doc.Targets) == 0 || doc.Targets[0].Status == "" || doc.Targets[0].Want.Op != "<=" {
		t.Errorf("targets: %+v", doc.Targets)
	}

	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	if err := os.WriteFile(run, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	status, md, errOut := runCmd(t, "report", "-svg", filepath.Join(dir, "fig"), run)
	if status, txt, _ := runCmd(t, "report", "-text", run); status != 0 || !strings.Contains(txt, "Legend") {
		t.Errorf("report -text: status %d\n%s", status, txt)
	}
	if status != 0 || !strings.Contains(md, "# Benchmarks") || !strings.Contains(md, "### churn-touch") {
		t.Fatalf("report: status %d %s\n%s", status, errOut, md)
	}
	if figs, _ := filepath.Glob(filepath.Join(dir, "fig", "*.svg")); len(figs) == 0 {
		t.Error("report -svg wrote no figures")
	}
	status, cmp, errOut := runCmd(t, "compare", run, run)
	if status != 0 || !strings.Contains(cmp, "consistent") {
		t.Fatalf("compare: status %d %s\n%s", status, errOut, cmp)
	}
}

func TestScoreboardText(t *testing.T) {
	dir := t.TempDir()
	status, out, errOut := runCmd(t, "-quick", "-runs", "3", "-passes", "paced", "-pace", "5us", "-workloads", "burst-storm",
		"-contenders", "mutex-freelist-checked", "-svg", dir)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"scoreboard —", "GOMAXPROCS=", "paced", "burst-storm", "locus-mailbox", "Targets", "Legend", "figures:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "process 3/3") || !strings.Contains(errOut, "done in") {
		t.Errorf("no progress lines on stderr:\n%s", errOut)
	}
}

func TestThreadQuick(t *testing.T) {
	exps := "0352,0357,0358"
	if !testing.Short() && !race.Enabled {
		exps = ""
	}
	status, out, errOut := runCmd(t, "thread", "-quick", "-q", "-json", "-runs", "3", "-exp", exps)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var doc eval.Thread
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if _, _, err := eval.ParseDocument([]byte(out)); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if doc.Schema != eval.ThreadSchema || len(doc.Ledger) == 0 || !doc.GatesOK {
		t.Fatalf("thread document: %+v", doc)
	}
	for _, r := range doc.Ledger {
		if r.Verdict == eval.Invalid || r.Prediction == "" || r.Rust == "" || r.Go == "" {
			t.Errorf("%s: bad row %+v", r.ID, r)
		}
	}
}

// Bad flags are refused before any measurement, with status 2.
func TestBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-runs", "2"},
		{"-pace", "0"},
		{"-pace", "-1ms"},
		{"-pace", "soon"},
		{"-passes", "sideways"},
		{"-passes", "paced", "-pace", "off"},
		{"-runs", "101"},
		{"-pace", "11ms"},
		{"-passes", "paced", "-pace", "1h"},
		{"-contenders", "sync-pool,sync-pool"},
		{"-contenders", ","},
		{"-contenders", "sync-pool,"},
		{"-contenders", "nope"},
		{"-workloads", ","},
		{"-workloads", "nope"},
		{"-workloads", "long-tail,long-tail"},
		{"-touch", "sideways"},
		{"-svg", filepath.Join(file, "dir")},
		{"stray"},
		{"thread", "-exp", "9999"},
		{"thread", "-exp", "0352,0352"},
		{"thread", "-exp", ","},
		{"thread", "-runs", "1"},
		{"thread", "-runs", "1000"},
		{"report"},
		{"report", file},
		{"frag", "-ops", "0"},
		{"frag", "-trials", "100000"},
		{"frag", "-pages", "1000000000"},
		{"frag", "stray"},
		{"chat", "-traces", "0"},
		{"chat", "-traces", "1001"},
		{"chat", "-blocks", "1000000000"},
		{"chat", "-conversations", "0"},
		{"chat", "-conversations", "100000000"},
		{"chat", "-turns", "100000"},
		{"chat", "-block-size", "0"},
		{"chat", "stray"},
		{"compare", file},
		{"frag", "-ops", "-1"},
		{"frag", "-pages", "0"},
		{"frag", "-max", "0"},
		{"frag", "-trials", "0"},
		{"chat", "-think", "-1"},
		{"chat", "-systems", "0"},
		{"chat", "-blocks", "0"},
		{"chat", "-hash", "md5"},
		{"scale", "-producers", "2,4"},
		{"scale", "-producers", "1,4,2"},
		{"scale", "-producers", "1,1"},
		{"scale", "-producers", "1,x"},
		{"scale", "-trace-workers", "0"},
		{"scale", "-trace-workers", "65"},
		{"scale", "-runs", "2"},
		{"scale", "stray"},
	} {
		status, _, errOut := runCmd(t, args...)
		if status != 2 {
			t.Errorf("%v: status %d, want 2 (%s)", args, status, errOut)
		}
		// The experiments' errors name the flag the user typed, not a struct.
		if sub := args[0]; (sub == "frag" || sub == "chat" || sub == "scale") && len(args) > 2 &&
			(!strings.Contains(errOut, args[1]) || strings.Contains(errOut, "{")) {
			t.Errorf("%v: the error does not name %s: %s", args, args[1], errOut)
		}
	}
}

// A bad flag, a bad document or a figure that cannot be drawn leaves no
// -svg directory behind.
func TestSVGDirNotCreatedOnError(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schema":"locus-eval/scoreboard","schema_version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-runs", "2", "-svg", "NEW/figs"},
		{"-contenders", ",", "-svg", "NEW/figs"},
		{"report", "-svg", "NEW/figs", bad},
		{"report", "-svg", "NEW/figs", filepath.Join(dir, "missing.json")},
	} {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "NEW", filepath.Join(dir, "new"))
		}
		status, _, errOut := runCmd(t, args...)
		if status != 2 {
			t.Errorf("%v: status %d, want 2 (%s)", args, status, errOut)
		}
		if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
			t.Fatalf("%v: created the -svg directory (%v)", args, err)
		}
	}
	// A directory that cannot be written is refused, and what it made removed.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writableDir(filepath.Join(file, "sub")); err == nil {
		t.Error("a directory under a file accepted")
	}
	if err := writableDir(filepath.Join(dir, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "a", "b")); len(entries) != 0 {
		t.Errorf("writableDir left %v", entries)
	}
}

// compare's exit status says what went wrong: 1 when the bar fails
// (intervals apart, or a cell that failed its gates), 2 when a document is
// invalid or the runs are not comparable.
func TestCompareStatus(t *testing.T) {
	dir := t.TempDir()
	doc, err := os.ReadFile(filepath.Join("internal", "eval", "testdata", "scoreboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, edit func(map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cell := func(m map[string]any, pass int, name string) map[string]any {
		w := m["passes"].([]any)[pass].(map[string]any)["workloads"].([]any)[0].(map[string]any)
		for _, c := range w["cells"].([]any) {
			if c := c.(map[string]any); c["contender"] == name {
				return c
			}
		}
		t.Fatalf("no cell %s", name)
		return nil
	}
	a := write("a.json", func(map[string]any) {})
	far := write("far.json", func(m map[string]any) {
		c := cell(m, 0, "sync-pool")
		c["ratio"], c["verdict"], c["rank"] = map[string]any{"point": 1000, "lo": 900, "hi": 1100}, "slower", 3
	})
	failed := write("failed.json", func(m map[string]any) {
		c := cell(m, 0, "sync-pool")
		c["gates_ok"], c["gate_errors"], c["verdict"], c["rank"] = false, []any{"process 2: freed twice"}, "n/a", 0
		c["ratio"] = map[string]any{"point": 0, "lo": 0, "hi": 0}
		m["gates_ok"] = false
	})
	quick := write("quick.json", func(m map[string]any) { m["config"].(map[string]any)["quick"] = false })
	for _, tc := range []struct {
		a, b   string
		status int
		say    string
	}{
		{a, a, 0, "consistent"},
		{a, far, 1, "the runs are not consistent"},
		{a, failed, 1, "cells failed their proof gates"},
		{a, quick, 2, "runs not comparable"},
		{a, filepath.Join(dir, "missing.json"), 2, "missing.json"},
	} {
		status, out, errOut := runCmd(t, "compare", tc.a, tc.b)
		if status != tc.status || !strings.Contains(out+errOut, tc.say) {
			t.Errorf("compare %s %s: status %d, want %d saying %q:\n%s%s", filepath.Base(tc.a), filepath.Base(tc.b),
				status, tc.status, tc.say, out, errOut)
		}
	}
}

func TestHelpListsSubcommands(t *testing.T) {
	status, _, errOut := runCmd(t, "-help")
	if status != 0 {
		t.Fatalf("status %d", status)
	}
	for _, want := range []string{"thread", "report", "compare", "frag", "chat", "scale", "-runs", "-pace", "Exit status"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("help lacks %q:\n%s", want, errOut)
		}
	}
}

func TestList(t *testing.T) {
	status, out, _ := runCmd(t, "-list")
	for _, want := range []string{"steady-decode", "locus-mailbox", "mutex-freelist-checked", "go-buffer-pool", "mcache"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
}

func FuzzPaceFlag(f *testing.F) {
	for _, s := range []string{"30us", "off", "0", "-1s", "1h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var p paceFlag
		if err := p.Set(s); err == nil && p.d < 0 {
			t.Fatalf("Set(%q) accepted a negative pace %v", s, p.d)
		} else if err == nil && p.d == 0 && s != "off" {
			t.Fatalf("Set(%q) gave pace 0", s)
		}
	})
}

// frag prints, at each checkpoint, a row per strategy's peak: size classes
// never fragment externally, and peaks lie in their [min, max] ranges.
func TestFrag(t *testing.T) {
	status, out, errOut := runCmd(t, "frag", "-quick", "-pages", "2048", "-max", "64", "-ops", "600")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"mean of 5 trials", "first-fit peak", "best-fit peak", "size classes peak", "material first-fit",
		"refused with enough pages free"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "100" || f[0] == "500" || f[0] == "600") {
			rows = append(rows, f[0])
			// ops, then per strategy "peak % [min %, max %] current %" (8 fields), then the
			// material's two figures ("-" where it reports none).
			if len(f) != 1+3*8+4 && (len(f) != 1+3*8+2 || f[len(f)-1] != "-") {
				t.Fatalf("row %q: %d fields", line, len(f))
			}
			if classes := f[1+2*8 : 1+3*8]; classes[0] != "0.0" || classes[6] != "0.0" {
				t.Errorf("size classes fragment externally: %q", line)
			}
		}
	}
	if strings.Join(rows, ",") != "100,500,600" {
		t.Errorf("checkpoint rows %v, want 100, 500 and 600 (the last operation):\n%s", rows, out)
	}
	if status, _, errOut := runCmd(t, "frag", "-h"); status != 0 || !strings.Contains(errOut, "slab-allocator material") || !strings.Contains(errOut, "-quick") {
		t.Errorf("frag -h: status %d\n%s", status, errOut)
	}
}

// chat's document: prefix sharing never holds more blocks than private
// tables, and the trace's shared system prompts hit the prefix cache.
func TestChat(t *testing.T) {
	args := []string{"chat", "-conversations", "8", "-turns", "3", "-systems", "2", "-system-tokens", "64", "-traces", "1"}
	status, out, errOut := runCmd(t, append(args, "-json")...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var doc chatDoc
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not the chat document: %v\n%s", err, out)
	}
	if doc.Schema != "locus-eval/chat" || doc.Requests != 8*3 || doc.Config.Conversations != 8 || doc.Config.Traces != 1 || doc.Steps < 1 {
		t.Errorf("header: %+v", doc)
	}
	if doc.PeakShared < 1 || doc.PeakShared > doc.PeakPrivate || doc.MeanShared > doc.MeanPrivate || float64(doc.PeakShared) < doc.MeanShared {
		t.Errorf("blocks held: %+v", doc)
	}
	if doc.HitTokens == 0 || doc.HitTokens > doc.PromptTokens || doc.HitRate != float64(doc.HitTokens)/float64(doc.PromptTokens) {
		t.Errorf("prefix hits: %+v", doc)
	}
	status, out, errOut = runCmd(t, args...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"8 conversations × 3 turns", "24 requests", "blocks held, peak", "blocks held, mean", "time per trace", "prefix hits"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if status, _, errOut := runCmd(t, "chat", "-h"); status != 0 || !strings.Contains(errOut, "kv.Manager") {
		t.Errorf("chat -h: status %d\n%s", status, errOut)
	}
}

// The scaling runs end to end in -quick mode: the document validates, has a
// row per cell with the per-producer cost, says which worker counts this
// machine could not measure, and report renders it as the "many cores"
// section beside a scoreboard.
func TestScaleQuick(t *testing.T) {
	status, out, errOut := runCmd(t, "scale", "-quick", "-q", "-json", "-runs", "3", "-producers", "1,2,16", "-trace-workers", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "scale.json")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := eval.ReadScale(path)
	if err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	wantCycle := map[int]bool{1: true, 2: true}
	if eval.MaxScaleWorkers(runtime.NumCPU()) >= 16 {
		wantCycle[16] = true
	} else if !slices.Equal(sc.Skipped, []int{16}) {
		t.Errorf("skipped %v, want [16] on %d CPUs", sc.Skipped, runtime.NumCPU())
	}
	for _, r := range sc.Cycle {
		if !wantCycle[r.Workers] || !r.GatesOK || r.PerProducerUS <= 0 || r.Growth <= 0 ||
			math.Abs(r.PerProducerUS*float64(r.Workers)-r.USPerTrace) > 1e-9*r.USPerTrace {
			t.Errorf("cycle row %+v", r)
		}
	}
	if len(sc.Cycle) != len(wantCycle)*7 || len(sc.Traces) != 3*5 || !sc.GatesOK || len(sc.Targets) != 4 {
		t.Fatalf("%d cycle rows, %d trace rows, gates %v, %d targets", len(sc.Cycle), len(sc.Traces), sc.GatesOK, len(sc.Targets))
	}
	// A tampered document is refused.
	bad := strings.Replace(out, `"gates_ok": true`, `"gates_ok": false`, 1)
	if err := os.WriteFile(path+".bad", []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := eval.ReadScale(path + ".bad"); !errors.Is(err, eval.ErrDocument) {
		t.Errorf("a document whose gates_ok contradicts its cells: %v", err)
	}
	status, text, errOut := runCmd(t, "report", "-text", path)
	if status != 0 || !strings.Contains(text, "Free-cycle") || !strings.Contains(text, "locus-sharded-chunk") {
		t.Fatalf("report -text: status %d: %s%s", status, text, errOut)
	}
	if status, _, _ := runCmd(t, "report", path); status != 2 {
		t.Errorf("report of a scaling document alone (no scoreboard): status %d, want 2", status)
	}
}

// The same scoreboard given twice is refused, not rendered as two machines.
func TestReportRefusesDuplicates(t *testing.T) {
	doc := filepath.Join("internal", "eval", "testdata", "scoreboard.json")
	copyPath := filepath.Join(t.TempDir(), "copy.json")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if status, _, errOut := runCmd(t, "report", doc); status != 0 {
		t.Fatalf("one document: status %d: %s", status, errOut)
	}
	status, _, errOut := runCmd(t, "report", doc, copyPath)
	if status != 2 || !strings.Contains(errOut, "already given") {
		t.Fatalf("the same run twice: status %d: %s", status, errOut)
	}
}
