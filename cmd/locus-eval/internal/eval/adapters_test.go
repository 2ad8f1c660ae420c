package eval

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// The fixture is a -quick adapters document with its figures replaced by
// round ones.
const adaptersFixture = "testdata/adapters.json"

func readAdaptersFixture(t *testing.T) (*Adapters, []byte) {
	t.Helper()
	b, err := os.ReadFile(adaptersFixture)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseAdapters(b)
	if err != nil {
		t.Fatal(err)
	}
	return d, b
}

// The adapters section of BENCHMARKS.md: its heading, run table, targets,
// the three tables and the notes, from the fixture's figures.
func TestAdaptersMarkdown(t *testing.T) {
	d, _ := readAdaptersFixture(t)
	var b bytes.Buffer
	WriteAdaptersMarkdown(&b, d)
	md := b.String()
	for _, want := range []string{
		"\n## Adapters: ADR-006's residency targets (",
		"| date | 2026-01-02 03:04 UTC |",
		"| revision | github.com/locus-go/locus `0123456789abcdef` |",
		"QUICK (a smoke test: the figures mean nothing)",
		"| met | ADR-006: acquire of a hot adapter < 100 µs | < 100 µs | median hot acquire |",
		"| missed | ADR-006: warm load of a 16 MiB adapter, int8 < 1 ms | < 1 ms | median warm int8 |",
		"| met | ADR-006: cold load of a 16 MiB adapter (file) < 10 ms | < 10 ms | median cold file |",
		"| hot acquire | 130 ns | [117 ns, 143 ns] | 117 ns | 143 ns | 143 ns |  |  |",
		"| warm exact | 2.4 ms | [2.16 ms, 2.64 ms] | 2.16 ms | 2.64 ms | 2.64 ms | 6.99 | 1.30× [1.17, 1.43] of memmove |",
		"| cold file | 2.5 ms | [2.25 ms, 2.75 ms] | 2.25 ms | 2.75 ms | 2.75 ms | 6.71 | 1.40× [1.26, 1.54] of file read |",
		"| memmove | 1.8 ms |",
		"files on ext4 on /dev/test",
		"Heap per registered adapter: **430 B** (2.0 objects)",
		"| all | 200 |",
		"| residency-first | ",
		"| largest-queue-first | ",
		"\n- batcher: ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "|") && !strings.HasSuffix(line, "|") {
			t.Errorf("a table row does not end its last cell: %q", line)
		}
	}
	var txt bytes.Buffer
	if err := WriteAdaptersText(&txt, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Adapters: ADR-006's residency targets", "hot acquire", "MISSED", "residency-first", "Notes:"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, txt.String())
		}
	}
}

// Documents a run cannot have written are refused with ErrDocument.
func TestAdaptersBadDocuments(t *testing.T) {
	_, good := readAdaptersFixture(t)
	edit := func(f func(m map[string]any)) []byte { return editJSON(t, good, f) }
	rows := func(m map[string]any) []any { return m["loads"].(map[string]any)["rows"].([]any) }
	for name, b := range map[string][]byte{
		"not JSON":      []byte("{"),
		"trailing data": append(append([]byte{}, good...), []byte(" {}")...),
		"unknown field": edit(func(m map[string]any) { m["extra"] = 1 }),
		"schema":        edit(func(m map[string]any) { m["schema"] = ScaleSchema }),
		"version":       edit(func(m map[string]any) { m["schema_version"] = 2 }),
		"no CPUs":       edit(func(m map[string]any) { m["machine"].(map[string]any)["num_cpu"] = 0 }),
		"repeated row":  edit(func(m map[string]any) { rows(m)[1].(map[string]any)["name"] = "hot acquire" }),
		"row kind":      edit(func(m map[string]any) { rows(m)[0].(map[string]any)["kind"] = "guess" }),
		"limit":         edit(func(m map[string]any) { rows(m)[1].(map[string]any)["limit"] = "nothing" }),
		"spread order":  edit(func(m map[string]any) { rows(m)[0].(map[string]any)["ns"].(map[string]any)["lo"] = 1e9 }),
		"spread count":  edit(func(m map[string]any) { rows(m)[0].(map[string]any)["ns"].(map[string]any)["n"] = 2 }),
		"hit rate":      edit(func(m map[string]any) { m["zipf"].(map[string]any)["hot_hit_rate"] = 1.5 }),
		"residencies":   edit(func(m map[string]any) { m["zipf"].(map[string]any)["by_residency"] = []any{} }),
		"target status": edit(func(m map[string]any) { m["targets"].([]any)[0].(map[string]any)["status"] = "fine" }),
		"batcher waits": edit(func(m map[string]any) {
			m["batcher"].(map[string]any)["runs"].([]any)[0].(map[string]any)["wait_p50_steps"] = 1e6
		}),
	} {
		if _, err := ParseAdapters(b); !errors.Is(err, ErrDocument) {
			t.Errorf("%s: %v, want ErrDocument", name, err)
		}
	}
}

func TestSpread(t *testing.T) {
	if s := NewSpread(nil); s != (Spread{}) {
		t.Errorf("NewSpread(nil) = %+v", s)
	}
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = float64(100 - i) // reversed: NewSpread sorts a copy
	}
	s := NewSpread(xs)
	// n = 101: the interval is the order statistics 50.5 ∓ 12.94 → 37 and 64.
	if want := (Spread{N: 101, Median: 50, Lo: 37, Hi: 64, Min: 0, P90: 90, Max: 100}); s != want {
		t.Errorf("NewSpread = %+v, want %+v", s, want)
	}
	if xs[0] != 100 {
		t.Error("NewSpread changed its argument")
	}
	if iv := MedianInterval([]float64{1, 2, 3, 4}); iv.Point != 2.5 || iv.Lo != 1 || iv.Hi != 4 {
		t.Errorf("MedianInterval of 4 = %+v", iv)
	}
	l := NewAdapterLatency("hot", []float64{4, 1, 3, 2})
	if l.Count != 4 || l.Mean != 2.5 || l.P50 != 2 || l.P99 != 4 || l.Max != 4 {
		t.Errorf("NewAdapterLatency = %+v", l)
	}
	for _, c := range []struct {
		s     Spread
		bound float64
		want  string
	}{
		{Spread{Lo: 1, Median: 2, Hi: 3}, 4, "met"},
		{Spread{Lo: 1, Median: 2, Hi: 3}, 3, "undecided"},
		{Spread{Lo: 1, Median: 2, Hi: 3}, 1, "missed"},
	} {
		if got := JudgeBelow(c.s, c.bound); got != c.want {
			t.Errorf("JudgeBelow(%+v, %v) = %s, want %s", c.s, c.bound, got, c.want)
		}
	}
	if FmtNS(math.NaN()) != "n/a" || FmtNS(812) != "812 ns" || FmtNS(3.41e6) != "3.41 ms" || FmtNS(2e9) != "2 s" {
		t.Error("FmtNS")
	}
}
