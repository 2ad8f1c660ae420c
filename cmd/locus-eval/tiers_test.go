package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

// statusOf is the exit status run gives err (see main.go).
func statusOf(err error) int {
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errFailed):
		return 1
	}
	return 2
}

// locus-eval tiers end to end in -quick mode: a valid JSON document with
// its schema and machine, every tier, operation and block size with its
// limit, positive ratios and times, both adapter loads, every target
// judged; the -dir is left as it was; the text names every row.
func TestTiersQuick(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := runTiers([]string{"-quick", "-q", "-json", "-dir", dir}, &out, &errOut)
	if err != nil {
		t.Fatalf("status %d: %v\n%s", statusOf(err), err, errOut.String())
	}
	var d tiersDoc
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not a tiers document: %v\n%s", err, out.String())
	}
	if d.Schema != tiersSchema || d.SchemaVersion != tiersSchemaVersion {
		t.Errorf("schema %q version %d", d.Schema, d.SchemaVersion)
	}
	if !d.Quick || d.Machine.NumCPU < 1 || d.Machine.CPUModel == "" || d.Machine.GoVersion == "" {
		t.Errorf("quick %v, machine %+v", d.Quick, d.Machine)
	}
	if !d.Disk.PageCache || d.Disk.Dir != dir || d.Disk.TempDir || d.Disk.Stores == "" {
		t.Errorf("disk %+v; want the page cache noted and the directory %s", d.Disk, dir)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) != 0 {
		t.Errorf("-dir holds %v after the run (%v); want it empty", left, err)
	}

	positive := func(what string, x float64) {
		t.Helper()
		if !(x > 0) || math.IsInf(x, 0) {
			t.Errorf("%s = %v; want a positive number", what, x)
		}
	}
	checkPart := func(what string, p tiersPart, blocks int) {
		t.Helper()
		// A part whose jobs are slow (the race detector, -sync) may stop
		// at 3 pairs.
		if p.Blocks != blocks || p.Pairs < 3 {
			t.Errorf("%s: %d blocks per job, %d pairs; want %d, at least 3", what, p.Blocks, p.Pairs, blocks)
		}
		for name, x := range map[string]float64{
			"tier median": p.Tier.MedianNS, "tier p99": p.Tier.P99NS, "tier GB/s": p.Tier.GBps,
			"limit median": p.Limit.MedianNS, "limit p99": p.Limit.P99NS, "limit GB/s": p.Limit.GBps,
			"ratio": p.Ratio.Median, "ratio lo": p.Ratio.Lo, "ratio hi": p.Ratio.Hi,
		} {
			positive(what+": "+name, x)
		}
		if p.Tier.P99NS < p.Tier.MedianNS || p.Ratio.Lo > p.Ratio.Median || p.Ratio.Hi < p.Ratio.Median {
			t.Errorf("%s: out of order: %+v", what, p)
		}
	}
	limits := map[[2]string]string{{"host", "store"}: "memmove", {"host", "load"}: "memmove", {"disk", "store"}: "pwrite", {"disk", "load"}: "pread"}
	seen := map[string]bool{}
	for _, r := range d.Rows {
		key := r.Tier + " " + r.Op + " " + sizeName(r.BlockBytes)
		if seen[key] {
			t.Errorf("row %s twice", key)
		}
		seen[key] = true
		if want := limits[[2]string{r.Tier, r.Op}]; r.Limit != want {
			t.Errorf("%s: limit %q, want %q", key, r.Limit, want)
		}
		checkPart(key+" latency", r.Latency, 1)
		checkPart(key+" bandwidth", r.Bandwidth, max(1, tiersBatchBytes/r.BlockBytes))
	}
	for _, tr := range []string{"host", "disk"} {
		for _, op := range []string{"store", "load"} {
			for _, bs := range tierBlockSizes {
				if key := tr + " " + op + " " + sizeName(bs); !seen[key] {
					t.Errorf("no row %s", key)
				}
			}
		}
	}
	if len(d.Rows) != 2*2*len(tierBlockSizes) {
		t.Errorf("%d rows", len(d.Rows))
	}
	if len(d.Adapter) != 2 || d.Adapter[0].Tier != "host" || d.Adapter[0].Class != "warm" || d.Adapter[1].Tier != "disk" || d.Adapter[1].Class != "cold" {
		t.Fatalf("adapter rows %+v", d.Adapter)
	}
	for _, a := range d.Adapter {
		if a.Bytes != 16<<20 || a.Objects < 1 {
			t.Errorf("adapter %+v", a)
		}
		checkPart(a.Tier+" adapter", a.Load, a.Bytes/a.BlockBytes)
	}
	if len(d.Targets) != 6 {
		t.Errorf("%d targets, want 6 (2 adapter loads, 4 bandwidth bars)", len(d.Targets))
	}
	for _, tg := range d.Targets {
		if (tg.Status != "met" && tg.Status != "missed" && tg.Status != "undecided") || tg.Met != (tg.Status == "met") || tg.Name == "" || tg.Detail == "" {
			t.Errorf("target %+v", tg)
		}
		positive(tg.Name, tg.Got)
	}

	var text bytes.Buffer
	if err := writeTiers(&text, &d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"QUICK", "page cache", "memmove", "pwrite", "pread", "ADR-006", "warm", "cold", d.Machine.CPUModel} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, text.String())
		}
	}
}

// Bad flags are refused with status 2, before any measurement, and the
// error names the flag the user typed.
func TestTiersBadFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-cell-time", "0"},
		{"-cell-time", "-1s"},
		{"-cell-time", "11s"},
		{"-cell-time", "soon"},
		{"-region-mib", "0"},
		{"-region-mib", "3"},
		{"-region-mib", "1025"},
		{"-region-mib", "x"},
		{"-workers", "-1"},
		{"-workers", "65"},
		{"-dir", file},
		{"-dir", filepath.Join(file, "missing")},
		{"-seed", "-1"},
		{"-sync=maybe"},
		{"-nope"},
		{"stray"},
		{"-quick", "stray"},
	} {
		var out, errOut bytes.Buffer
		err := runTiers(args, &out, &errOut)
		if status := statusOf(err); status != 2 {
			t.Errorf("%v: status %d (%v), want 2", args, status, err)
			continue
		}
		name := strings.SplitN(args[0], "=", 2)[0]
		if args[0] == "-quick" {
			name = args[1]
		}
		if msg := err.Error(); !strings.Contains(msg, name) || strings.Contains(msg, "{") {
			t.Errorf("%v: the error does not name %s: %s", args, name, msg)
		}
		if out.Len() != 0 {
			t.Errorf("%v: wrote to stdout: %s", args, out.String())
		}
	}
}

func TestTiersHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	err := runTiers([]string{"-help"}, &out, &errOut)
	if statusOf(err) != 0 {
		t.Fatalf("status %d: %v", statusOf(err), err)
	}
	for _, want := range []string{"Usage: locus-eval tiers", "-dir", "-quick", "-json", "-sync", "-direct", "ADR-006"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, errOut.String())
		}
	}
}

func TestTiersStatistics(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	if got := eval.Median(s); got != 2.5 {
		t.Errorf("median of %v = %v", s, got)
	}
	if got := eval.Percentile(s, 0.99); got != 4 {
		t.Errorf("p99 of %v = %v", s, got)
	}
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	r := medianInterval(xs)
	if r.Median != 50 || r.Lo >= 50 || r.Hi <= 50 || r.Lo < 0 || r.Hi > 100 {
		t.Errorf("median interval of 0..100 = %+v", r)
	}
	if r := medianInterval([]float64{0.9}); r.Median != 0.9 || r.Lo != 0.9 || r.Hi != 0.9 {
		t.Errorf("median interval of one = %+v", r)
	}
	if !math.IsNaN(eval.Median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	for n, want := range map[int]string{4 << 10: "4 KiB", 512 << 10: "512 KiB", 2 << 20: "2 MiB", 100: "100 B"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", n, got, want)
		}
	}
	for ns, want := range map[float64]string{850: "850 ns", 12345: "12.3 µs", 1.5e6: "1.5 ms", 2e9: "2 s"} {
		if got := eval.FmtNS(ns); got != want {
			t.Errorf("FmtNS(%v) = %q, want %q", ns, got, want)
		}
	}
}

// The chat workload in -quick mode: a hot pool too small for every
// conversation (it evicts; the reference does not), the tiers adding hits
// in order (0 < 1 < 2 tiers, the disk tier holding every block giving
// back what the unbounded pool had), the counts adding up exactly (hits
// per place, tokens not recomputed, bytes per block moved), direct and
// staged promotion moving the same blocks, and the table naming each run.
func TestTiersChatQuick(t *testing.T) {
	o := tiersOptions{quick: true, chat: true, minPairs: quickMinPairs, cellTime: quickCellTime, region: quickRegionMiB << 20, seed: 1}
	c, err := measureChat(newTiersBench(o, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Runs) != chatRuns {
		t.Fatalf("%d runs, want %d: %+v", len(c.Runs), chatRuns, c.Runs)
	}
	ref, none, one, two, staged := c.Runs[0], c.Runs[1], c.Runs[2], c.Runs[3], c.Runs[4]
	for i, want := range []int{0, 0, 1, 2, 2} {
		if c.Runs[i].Tiers != want || len(c.Runs[i].PerTier) != want {
			t.Errorf("run %d (%s): %d tiers, %d per-tier rows; want %d", i, c.Runs[i].Name, c.Runs[i].Tiers, len(c.Runs[i].PerTier), want)
		}
	}
	if two.Promotion != "direct" || staged.Promotion != "staged" || one.Promotion != "" {
		t.Errorf("promotions %q, %q, %q", one.Promotion, two.Promotion, staged.Promotion)
	}
	if !(c.PeakLive > 0 && c.HotBlocks > c.PeakLive && c.HotBlocks < c.DistinctBlocks && c.DiskBlocks == c.DistinctBlocks) {
		t.Errorf("sizes: peak %d, hot %d, distinct %d, disk %d", c.PeakLive, c.HotBlocks, c.DistinctBlocks, c.DiskBlocks)
	}
	if ref.Evictions != 0 || none.Evictions == 0 {
		t.Errorf("evictions: reference %d, 0 tiers %d; want 0 and some", ref.Evictions, none.Evictions)
	}
	if !(none.NotRecomputed < one.NotRecomputed && one.NotRecomputed < two.NotRecomputed) || two.NotRecomputed != ref.NotRecomputed {
		t.Errorf("tokens not recomputed: reference %d, 0 tiers %d, 1 tier %d, 2 tiers %d; want increasing, 2 tiers = reference",
			ref.NotRecomputed, none.NotRecomputed, one.NotRecomputed, two.NotRecomputed)
	}
	if s3 := c.Runs[5]; s3.Tiers != 1 || s3.Eviction != "s3-fifo" || one.Eviction != "lru" || s3.PromptTokens != one.PromptTokens {
		t.Errorf("the S3-FIFO run: %+v; the LRU one: %+v", s3, one)
	}
	if staged.HitTokens != two.HitTokens || staged.NotRecomputed != two.NotRecomputed {
		t.Errorf("staged promotion hit %d, not recomputed %d; direct %d, %d", staged.HitTokens, staged.NotRecomputed, two.HitTokens, two.NotRecomputed)
	}
	for _, r := range c.Runs {
		if r.PromptTokens != ref.PromptTokens {
			t.Errorf("%s: %d prompt tokens, reference %d", r.Name, r.PromptTokens, ref.PromptTokens)
		}
		hits, kept := r.HotHitTokens, r.HotHitTokens
		for _, pt := range r.PerTier {
			hits += pt.HitTokens
			kept += pt.LoadedBlocks * uint64(c.TokensPerBlock)
			if pt.LoadedBytes != pt.LoadedBlocks*uint64(c.BlockBytes) || pt.StoredBytes != pt.StoredBlocks*uint64(c.BlockBytes) || pt.FailedBlocks != 0 {
				t.Errorf("%s, %s: %+v", r.Name, pt.Tier, pt)
			}
			if pt.StoredBlocks == 0 {
				t.Errorf("%s, %s: nothing stored", r.Name, pt.Tier)
			}
		}
		if hits != r.HitTokens || kept != r.NotRecomputed || r.Recomputed != r.PromptTokens-r.NotRecomputed || !(r.TraceMS > 0) {
			t.Errorf("%s: counts do not add up: %+v", r.Name, r)
		}
	}
	var text bytes.Buffer
	if err := writeTiersChat(&text, c); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Runs {
		if !strings.Contains(text.String(), r.Name) {
			t.Errorf("the table lacks %q:\n%s", r.Name, text.String())
		}
	}
}

// A tiers document recorded before the chat workload existed still
// decodes (strictly) and renders, without a chat table.
func TestTiersOldDocumentRenders(t *testing.T) {
	// A tiers document recorded before the chat section existed.
	b, err := os.ReadFile(filepath.Join("testdata", "tiers-before-chat.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d tiersDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("the recorded document no longer decodes: %v", err)
	}
	if d.Chat != nil {
		t.Fatal("an old document has a chat section")
	}
	var text bytes.Buffer
	if err := writeTiers(&text, &d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ADR-006") || strings.Contains(text.String(), "Chat workload") {
		t.Errorf("rendering of the old document:\n%s", text.String())
	}
}

// -direct: in a directory whose file system takes O_DIRECT (the test's
// temporary directory on ext4, xfs and the like) the document says the
// disk parts went to the device and the text says so; where the file
// system refuses it, the run stays buffered and says that
// instead. Either way the run passes its own byte checks.
func TestTiersDirect(t *testing.T) {
	if testing.Short() {
		t.Skip("a -quick run")
	}
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := runTiers([]string{"-quick", "-q", "-json", "-chat=false", "-direct", "-dir", dir}, &out, &errOut); err != nil {
		t.Fatalf("status %d: %v\n%s", statusOf(err), err, errOut.String())
	}
	var d tiersDoc
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Config.Direct || d.Disk.DirectIO == d.Disk.PageCache {
		t.Fatalf("config %+v, disk %+v: -direct not recorded, or O_DIRECT and the page cache both (or neither)", d.Config, d.Disk)
	}
	var text bytes.Buffer
	if err := writeTiers(&text, &d); err != nil {
		t.Fatal(err)
	}
	want := "-direct was asked, but this file system refuses O_DIRECT"
	if d.Disk.DirectIO {
		want = "stores O_DIRECT, no fsync; reads O_DIRECT too"
	}
	if !strings.Contains(text.String(), want) {
		t.Errorf("the text does not say %q:\n%s", want, text.String())
	}
	if d.Disk.DirectIO { // the report names the mode in the section's heading
		path := filepath.Join(t.TempDir(), "direct.json")
		if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		status, md, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", path)
		if status != 0 || !strings.Contains(md, "\n## Offload tiers with O_DIRECT: ") {
			t.Errorf("report: status %d, %s; no O_DIRECT heading:\n%s", status, errOut, md)
		}
	}
	t.Logf("O_DIRECT in effect: %v (%s)", d.Disk.DirectIO, d.Disk.FileSystem)
}
