package frag_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval/frag"
	"github.com/locus-go/locus/pool"
)

func small() frag.Config {
	return frag.Config{Pages: 2048, MaxPages: 64, Ops: 600, Trials: 3, Seed: 9, AllocProb: 0.55, Checkpoints: []int{100, 500, 600}}
}

// TestRunInvariants checks what every result must satisfy: peaks never
// fall and never trail the current value, size classes have no external
// fragmentation, fractions stay in [0, 1], the page strategies waste
// nothing inside a run, and a seed reproduces its result.
func TestRunInvariants(t *testing.T) {
	res, err := frag.Run(small())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Series) != 3 {
		t.Fatalf("%d series", len(res.Series))
	}
	for _, s := range res.Series {
		for i := range s.Peak {
			if s.Peak[i] < s.Now[i]-1e-12 || (i > 0 && s.Peak[i] < s.Peak[i-1]-1e-12) {
				t.Fatalf("%s: op %d peak %v now %v previous peak %v", s.Strategy, i, s.Peak[i], s.Now[i], s.Peak[max(i-1, 0)])
			}
			if s.Now[i] < 0 || s.Peak[i] > 1 || s.Utilization[i] < 0 || s.Utilization[i] > 1 {
				t.Fatalf("%s: op %d out of range: %v %v %v", s.Strategy, i, s.Now[i], s.Peak[i], s.Utilization[i])
			}
		}
		for _, cp := range res.Config.Checkpoints {
			if s.PeakMin[cp] > s.Peak[cp-1]+1e-12 || s.PeakMax[cp] < s.Peak[cp-1]-1e-12 {
				t.Fatalf("%s: checkpoint %d mean %v outside [%v, %v]", s.Strategy, cp, s.Peak[cp-1], s.PeakMin[cp], s.PeakMax[cp])
			}
		}
		if s.RefusedWithRoom > s.Refused || s.Refused > s.Attempts {
			t.Fatalf("%s: refusals %+v", s.Strategy, s)
		}
		switch s.Strategy {
		case frag.SizeClasses:
			if s.Peak[len(s.Peak)-1] != 0 || s.InternalFrag <= 0 {
				t.Fatalf("size classes: peak %v internal %v", s.Peak[len(s.Peak)-1], s.InternalFrag)
			}
		default:
			if s.InternalFrag != 0 || s.Peak[len(s.Peak)-1] == 0 {
				t.Fatalf("%s: internal %v, final peak %v", s.Strategy, s.InternalFrag, s.Peak[len(s.Peak)-1])
			}
		}
	}
	again, err := frag.Run(small())
	if err != nil || !reflect.DeepEqual(res, again) {
		t.Fatal("the same seed gave another result")
	}
}

func TestRunRejects(t *testing.T) {
	for _, c := range []frag.Config{
		{Pages: -1},
		{Pages: 64, MaxPages: 65},
		{AllocProb: 1.5},
		{Ops: 100, Checkpoints: []int{101}},
		{Pages: frag.MaxRegionPages + 1},
		{Ops: frag.MaxOps + 1},
		{Trials: frag.MaxTrials + 1},
	} {
		if _, err := frag.Run(c); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("Run(%+v) = %v", c, err)
		}
	}
}

func TestCommand(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "frag.svg")
	var out bytes.Buffer
	if err := frag.Main([]string{"-pages", "1024", "-max", "32", "-ops", "300", "-trials", "2", "-svg", svg}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first-fit peak", "best-fit peak", "size classes peak", "material first-fit", "refused with enough pages free"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "100" || f[0] == "300") {
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("want the rows of checkpoints 100 and 300 (the last operation):\n%s", out.String())
	}
	data, err := os.ReadFile(svg)
	if err != nil || !bytes.Contains(data, []byte("<svg")) || !bytes.Contains(data, []byte("first-fit: peak so far")) {
		t.Fatalf("figure: %v, %d bytes", err, len(data))
	}
	for _, args := range [][]string{{"-ops", "x"}, {"-ops", "0"}, {"-trials", "100000"}, {"-pages", "1000000000"},
		{"-ops", "10000000"}, {"-page-mb", "0"}, {"stray"}} {
		var stderr bytes.Buffer
		if err := frag.Main(args, &out, &stderr); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
