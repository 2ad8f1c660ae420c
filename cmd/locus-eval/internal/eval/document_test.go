package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// realDocuments are documents written by locus-eval itself: a -quick
// scoreboard with both passes and a -quick thread replay.
var realDocuments = []string{"testdata/scoreboard.json", "testdata/thread.json"}

// Documents as locus-eval writes them parse, survive a round trip through
// JSON unchanged, and report, compare and draw without error.
func TestRealDocuments(t *testing.T) {
	for _, path := range realDocuments {
		sb, th, err := ReadDocument(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		checkValidDocument(t, sb, th)
	}
	sb, err := ReadScoreboard(realDocuments[0])
	if err != nil {
		t.Fatal(err)
	}
	files, err := WriteFigures(t.TempDir(), sb)
	if err != nil || len(files) != 4 {
		t.Fatalf("figures %v: %v", files, err)
	}
	if _, err := ReadScoreboard(realDocuments[1]); !errors.Is(err, ErrDocument) {
		t.Errorf("ReadScoreboard of a thread document: %v, want ErrDocument", err)
	}
}

// editJSON decodes the JSON object b, lets f change it and encodes it
// again.
func editJSON(t *testing.T, b []byte, f func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every way a document can be wrong gives an error matching ErrDocument,
// never a panic later, in the report, the figures or compare.
func TestBadDocuments(t *testing.T) {
	b, err := os.ReadFile(realDocuments[0])
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(doc map[string]any)) string { return string(editJSON(t, b, f)) }
	workload := func(doc map[string]any) map[string]any {
		return doc["passes"].([]any)[0].(map[string]any)["workloads"].([]any)[0].(map[string]any)
	}
	cell := func(doc map[string]any, i int) map[string]any {
		return workload(doc)["cells"].([]any)[i].(map[string]any)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"empty", ``, "unexpected end"},
		{"array", `[]`, "cannot unmarshal"},
		{"null", `null`, "not a locus-eval document"},
		{"other schema", `{"schema":"x","schema_version":1}`, "not a locus-eval document"},
		{"version 2", `{"schema":"locus-eval/scoreboard","schema_version":2}`, "schema version 2"},
		{"empty scoreboard", `{"schema":"locus-eval/scoreboard","schema_version":1}`, "config.runs"},
		{"empty thread", `{"schema":"locus-eval/thread","schema_version":1}`, "ledger"},
		{"trailing data", string(b) + "{}", "after top-level value"},
		{"unknown field", edit(func(d map[string]any) { d["extra"] = 1 }), "unknown field"},
		{"zero runs", edit(func(d map[string]any) { d["config"].(map[string]any)["runs"] = 0 }), "config.runs"},
		{"huge runs", edit(func(d map[string]any) { d["config"].(map[string]any)["runs"] = 1e6 }), "config.runs"},
		{"pace", edit(func(d map[string]any) { d["config"].(map[string]any)["pace_us"] = -1 }), "config.pace_us"},
		{"no passes", edit(func(d map[string]any) { d["passes"] = []any{} }), "passes: none"},
		{"null passes", edit(func(d map[string]any) { d["passes"] = nil }), "passes: none"},
		{"unknown pass", edit(func(d map[string]any) { d["passes"].([]any)[0].(map[string]any)["name"] = "sideways" }), "sideways"},
		{"unknown workload", edit(func(d map[string]any) { workload(d)["workload"] = "nope" }), "unknown workload"},
		{"duplicate workload", edit(func(d map[string]any) {
			p := d["passes"].([]any)[0].(map[string]any)
			p["workloads"] = append(p["workloads"].([]any), workload(d))
		}), "given twice"},
		{"no cells", edit(func(d map[string]any) { workload(d)["cells"] = []any{} }), "no cells"},
		{"no seconds", edit(func(d map[string]any) { workload(d)["seconds"] = []any{} }), "seconds"},
		{"no raw", edit(func(d map[string]any) { workload(d)["raw"] = map[string]any{} }), "raw.members"},
		{"ragged raw", edit(func(d map[string]any) {
			workload(d)["raw"].(map[string]any)["blocks_us"].([]any)[1] = []any{}
		}), "raw.blocks_us[1]"},
		{"no baseline", edit(func(d map[string]any) {
			cell(d, 0)["contender"] = "sync-pool"
		}), "given twice"},
		{"negative rank", edit(func(d map[string]any) { cell(d, 1)["rank"] = -3 }), "rank -3"},
		{"zero ratio", edit(func(d map[string]any) {
			cell(d, 1)["ratio"] = map[string]any{"point": 0, "lo": 0, "hi": 0}
		}), "ratio"},
		{"negative ratio", edit(func(d map[string]any) {
			cell(d, 1)["ratio"] = map[string]any{"point": 1, "lo": -1, "hi": 2}
		}), "ratio"},
		{"huge ratio", edit(func(d map[string]any) {
			cell(d, 1)["ratio"] = map[string]any{"point": 1e308, "lo": -1e308, "hi": 1e308}
		}), "ratio"},
		{"verdict against ratio", edit(func(d map[string]any) {
			cell(d, 1)["verdict"], cell(d, 1)["ratio"] = "faster", map[string]any{"point": 2, "lo": 1.5, "hi": 3}
		}), "verdict"},
		{"gates without errors", edit(func(d map[string]any) { cell(d, 1)["gates_ok"] = false }), "gates_ok false"},
		{"negative figures", edit(func(d map[string]any) { cell(d, 0)["bytes_per_trace"] = -5 }), "figures"},
		{"gates_ok", edit(func(d map[string]any) { d["gates_ok"] = false }), "gates_ok"},
		{"target", edit(func(d map[string]any) { d["targets"].([]any)[0].(map[string]any)["status"] = "great" }), "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, th, err := ParseDocument([]byte(tc.doc))
			if !errors.Is(err, ErrDocument) || sb != nil || th != nil {
				t.Fatalf("ParseDocument: %v, %v, %v; want an ErrDocument", sb, th, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			path := filepath.Join(t.TempDir(), "doc.json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ReadDocument(path); !errors.Is(err, ErrDocument) || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadDocument: %v; want an ErrDocument naming the file", err)
			}
		})
	}
}

// checkValidDocument checks what a valid document must allow: it
// re-encodes to a document that parses to the same, and a scoreboard
// reports, compares with itself and draws without a panic.
func checkValidDocument(t *testing.T, sb *Scoreboard, th *Thread) {
	t.Helper()
	if (sb == nil) == (th == nil) {
		t.Fatal("not exactly one document")
	}
	var doc any = th
	if sb != nil {
		doc = sb
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	sb2, th2, err := ParseDocument(b)
	if err != nil {
		t.Fatalf("the re-encoded document: %v", err)
	}
	var doc2 any = th2
	if sb2 != nil {
		doc2 = sb2
	}
	if b2, err := json.Marshal(doc2); err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("the document changed in a round trip (%v):\n%s\n%s", err, b, b2)
	}
	if th != nil {
		WriteLedger(io.Discard, th)
		return
	}
	if c, err := Compare(sb, sb); err != nil && !errors.Is(err, ErrIncomparable) {
		t.Fatalf("Compare with itself: %v", err)
	} else if err == nil && len(c.Cells) > 0 && len(c.Invalid) == 0 && !c.OK {
		t.Fatalf("a run does not match itself: %+v", c)
	}
	if err := WriteMarkdown(io.Discard, []*Scoreboard{sb, sb}, nil, nil, nil, "x"); err != nil {
		t.Fatalf("WriteMarkdown: %v", err)
	}
	WriteText(io.Discard, sb)
	err = renderFigures(sb, func(_ string, render func(io.Writer) error) error { return render(io.Discard) })
	if err != nil && !errors.Is(err, ErrDocument) {
		t.Fatalf("figures: %v", err)
	}
}

// FuzzParseDocument: no input panics; a document ParseDocument accepts
// re-encodes to itself and reports, compares and draws without a panic;
// every input it refuses gives an ErrDocument. The seeds are documents of
// several kilobytes, and every valid input draws its figures, so give the
// minimizer a bound, or it spends the whole run shrinking the first new
// input:
//
//	go test -run '^$' -fuzz '^FuzzParseDocument$' -fuzztime 10s -fuzzminimizetime 10x ./cmd/locus-eval/internal/eval
func FuzzParseDocument(f *testing.F) {
	for _, path := range realDocuments {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	b, _ := json.Marshal(scoreboardOf(4, synthetic(factors, 3, 4, 0)))
	f.Add(b)
	f.Add([]byte(`{"schema":"locus-eval/thread","schema_version":1,"ledger":[{"id":"0351"}]}`))
	f.Add([]byte(`{"schema":"locus-eval/scoreboard","schema_version":1,"passes":[{"workloads":[{"cells":[{"contender":"a","gates_ok":true}],"raw":{"members":["a","b"],"blocks_us":[[[1]]]}}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, th, err := ParseDocument(b)
		if err != nil {
			if !errors.Is(err, ErrDocument) || sb != nil || th != nil {
				t.Fatalf("refused with %v, %v, %v; want nil, nil, an ErrDocument", sb, th, err)
			}
			return
		}
		checkValidDocument(t, sb, th)
	})
}

// The schema in BENCHMARKS.md names every field the documents can hold,
// and no field is left out of a document when empty (no omitempty): what
// the schema promises is what -json writes.
func TestSchemaDocumented(t *testing.T) {
	inBraces := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{([^}]*)\}`).FindAllStringSubmatch(schemaMD, -1) {
		for _, name := range strings.Split(m[1], ", ") {
			inBraces[name] = true
		}
	}
	documented := func(name string) bool {
		return strings.Contains(schemaMD, "`"+name+"`") || strings.Contains(schemaMD, "`"+name+"[") || inBraces[name]
	}
	seen := map[reflect.Type]bool{}
	var walk func(where string, typ reflect.Type)
	walk = func(where string, typ reflect.Type) {
		for typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s: no JSON name (%q)", where, f.Name, tag)
				continue
			}
			if strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") {
				t.Errorf("%s.%s: %q leaves the field out when empty", where, name, tag)
			}
			if !documented(name) {
				t.Errorf("%s.%s: not in the schema", where, name)
			}
			walk(where+"."+name, f.Type)
		}
	}
	walk("scoreboard", reflect.TypeFor[Scoreboard]())
	walk("thread", reflect.TypeFor[Thread]())

	// And the real documents hold every field, none null.
	for _, path := range realDocuments {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("null")) {
			t.Errorf("%s: holds a null", path)
		}
	}
}
