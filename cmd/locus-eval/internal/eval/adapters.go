package eval

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// The adapters document (locus-eval adapters -json): its schema and version.
const (
	AdaptersSchema        = "locus-eval/adapters"
	AdaptersSchemaVersion = 1
)

// The row kinds of an adapters document's load part.
const (
	AdapterRowAcquire = "acquire" // through adapters.Manager.Acquire
	AdapterRowLimit   = "limit"   // the machine's limit for the same bytes
)

// Adapters is the adapters document: ADR-006's load targets for a 16 MiB
// adapter beside this machine's limits, the ADR's scale (10,000
// registered, 100 hot, 1,000 warm) on a Zipf trace, and the batcher
// comparison, all measured in one process.
type Adapters struct {
	Schema        string         `json:"schema"`
	SchemaVersion int            `json:"schema_version"`
	Created       time.Time      `json:"created"`
	Machine       Machine        `json:"machine"`
	Revision      Revision       `json:"revision"`
	Quick         bool           `json:"quick"`
	Seed          uint64         `json:"seed"`
	Loads         AdapterLoads   `json:"loads"`
	Zipf          AdapterZipf    `json:"zipf"`
	Batcher       AdapterBatcher `json:"batcher"`
	Targets       []AdapterGoal  `json:"targets"`
	Notes         []string       `json:"notes"`
	WallSeconds   float64        `json:"wall_seconds"`
}

// AdapterLoads is the load part: every row timed once per round, the rows
// in a fresh random order each round, after untimed warm-up rounds.
type AdapterLoads struct {
	// AdapterBytes is the adapter's size (16 MiB of fp16 weights);
	// PageBytes the hot pages pool's page size.
	AdapterBytes int `json:"adapter_bytes"`
	PageBytes    int `json:"page_bytes"`
	// Rounds are the timed rounds; Warmup the untimed ones before them.
	Rounds int `json:"rounds"`
	Warmup int `json:"warmup"`
	// HotBatch is the number of hot acquires (with their releases) one
	// sample of the hot row times; its sample is their mean.
	HotBatch int `json:"hot_batch"`
	// Quant describes the int8 warm copies.
	Quant string `json:"quant"`
	// FileSystem holds the adapter files ("" when unknown); the cold
	// loads and the file reads come from the page cache.
	FileSystem string           `json:"file_system"`
	Rows       []AdapterLoadRow `json:"rows"`
}

// AdapterLoadRow is one operation of the load part.
type AdapterLoadRow struct {
	// Name: "hot acquire", "warm exact", "warm int8", "cold file",
	// "memmove" or "file read".
	Name string `json:"name"`
	Kind string `json:"kind"` // AdapterRowAcquire or AdapterRowLimit
	// Limit names the limit row this row is set beside ("" for none).
	Limit string `json:"limit"`
	// NS is the time of one operation (one acquire and its release, one
	// copy, one read), over the rounds.
	NS Spread `json:"ns"`
	// GBps is AdapterBytes over the median time, in 10^9 bytes/s (0 for
	// the hot row, which moves nothing).
	GBps float64 `json:"gbps"`
	// VsLimit is this row's time over its limit's in the same round: the
	// median over rounds, with its 99 % interval ({0, 0, 0} without a
	// limit).
	VsLimit Interval `json:"vs_limit"`
}

// Spread summarizes samples: the median with its distribution-free 99 %
// interval, and the extremes.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Lo     float64 `json:"lo"` // the median's 99 % interval
	Hi     float64 `json:"hi"`
	Min    float64 `json:"min"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// NewSpread summarizes xs (which it does not change).
func NewSpread(xs []float64) Spread {
	s := sorted(xs)
	n := len(s)
	if n == 0 {
		return Spread{}
	}
	iv := MedianInterval(s)
	return Spread{N: n, Median: iv.Point, Lo: iv.Lo, Hi: iv.Hi, Min: s[0], P90: s[rankIndex(n, 0.9)], Max: s[n-1]}
}

// MedianInterval is the median of xs with a distribution-free 99 %
// interval: the order statistics n/2 ± 2.576·√n/2 (the normal
// approximation of the binomial), clamped to the sample. The zero
// Interval for none.
func MedianInterval(xs []float64) Interval {
	s := sorted(xs)
	n := len(s)
	if n == 0 {
		return Interval{}
	}
	h := 2.576 * math.Sqrt(float64(n)) / 2
	lo := min(max(int(math.Floor(float64(n)/2-h)), 0), n-1)
	hi := min(max(int(math.Ceil(float64(n)/2+h)), 0), n-1)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return Interval{Point: m, Lo: s[lo], Hi: s[hi]}
}

// rankIndex is the index of the q-quantile by nearest rank in n sorted
// samples.
func rankIndex(n int, q float64) int {
	return min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)
}

// Percentile is the q-quantile (0 < q <= 1) of sorted s by nearest rank;
// 0 for none.
func Percentile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[rankIndex(len(s), q)]
}

// AdapterZipf is the ADR's scale: registered adapters of one page each
// over a hot tier of HotSlots and a warm tier of WarmSlots, acquired on a
// Zipf trace.
type AdapterZipf struct {
	Registered   int     `json:"registered"`
	HotSlots     int     `json:"hot_slots"`
	WarmSlots    int     `json:"warm_slots"`
	AdapterBytes int     `json:"adapter_bytes"`
	S            float64 `json:"zipf_s"`
	// Warmup acquires are untimed; Acquires are timed, one at a time,
	// ClockStepMS of the Manager's clock apart, with a Tick (and its
	// prefetches drained, untimed) every TickEvery acquires.
	Warmup      int     `json:"warmup"`
	Acquires    int     `json:"acquires"`
	ClockStepMS float64 `json:"clock_step_ms"`
	TickEvery   int     `json:"tick_every"`
	// BytesPerRegistered is the Go heap the registrations took (the
	// Manager's slots, index, access rings and the id strings; one loader
	// shared by all), over Registered; AllocsPerRegistered the heap
	// objects.
	BytesPerRegistered  float64 `json:"bytes_per_registered"`
	AllocsPerRegistered float64 `json:"allocs_per_registered"`
	// AcquireNS is every timed Acquire's latency; ByResidency splits it by
	// the tier the adapter was in before the call.
	AcquireNS   AdapterLatency   `json:"acquire_ns"`
	ByResidency []AdapterLatency `json:"by_residency"`
	// HotHitRate is the Acquires that found the adapter hot, over the
	// timed Acquires; WarmLoads and ColdLoads per acquire likewise.
	HotHitRate      float64 `json:"hot_hit_rate"`
	WarmLoadsPerAcq float64 `json:"warm_loads_per_acquire"`
	ColdLoadsPerAcq float64 `json:"cold_loads_per_acquire"`
	// PromotionsPerAcq and DemotionsPerAcq are the Manager's promotions
	// and demotions (Tick's included) per timed acquire.
	PromotionsPerAcq float64 `json:"promotions_per_acquire"`
	DemotionsPerAcq  float64 `json:"demotions_per_acquire"`
	// DistinctAcquired counts the adapters the timed acquires asked for.
	DistinctAcquired int `json:"distinct_acquired"`
	// TimedWallSeconds is the wall time of the timed acquires (Ticks
	// included); RegistrationSeconds that of the registrations.
	TimedWallSeconds    float64 `json:"timed_wall_seconds"`
	RegistrationSeconds float64 `json:"registration_seconds"`
}

// AdapterLatency is a latency distribution in nanoseconds.
type AdapterLatency struct {
	// Residency is the tier before the call ("" for all of them).
	Residency string  `json:"residency"`
	Count     int     `json:"count"`
	Mean      float64 `json:"mean"`
	P50       float64 `json:"p50"`
	P99       float64 `json:"p99"`
	P999      float64 `json:"p99_9"`
	Max       float64 `json:"max"`
}

// NewAdapterLatency summarizes ns (which it sorts).
func NewAdapterLatency(residency string, ns []float64) AdapterLatency {
	slices.Sort(ns)
	l := AdapterLatency{Residency: residency, Count: len(ns)}
	if len(ns) == 0 {
		return l
	}
	sum := 0.0
	for _, x := range ns {
		sum += x
	}
	l.Mean = sum / float64(len(ns))
	l.P50, l.P99, l.P999, l.Max = Percentile(ns, 0.5), Percentile(ns, 0.99), Percentile(ns, 0.999), ns[len(ns)-1]
	return l
}

// AdapterBatcher is the batcher comparison: one Zipf trace of requests
// replayed through adapters.Batcher with each order.
type AdapterBatcher struct {
	Adapters        int                 `json:"adapters"`
	AdapterBytes    int                 `json:"adapter_bytes"`
	HotSlots        int                 `json:"hot_slots"`
	MaxAdapters     int                 `json:"max_adapters"`
	MaxRequests     int                 `json:"max_requests"`
	MaxWait         int                 `json:"max_wait"`
	ArrivalsPerStep int                 `json:"arrivals_per_step"`
	Steps           int                 `json:"steps"`
	S               float64             `json:"zipf_s"`
	Runs            []AdapterBatcherRun `json:"runs"`
}

// AdapterBatcherRun is one order's replay.
type AdapterBatcherRun struct {
	Order    string `json:"order"` // "residency-first" or "largest-queue-first"
	Requests int    `json:"requests"`
	// Loads are the adapters batches had to load; Hits those they found
	// hot.
	Loads        int     `json:"loads"`
	Hits         int     `json:"hits"`
	LoadsPer1000 float64 `json:"loads_per_1000_requests"`
	HitRate      float64 `json:"hot_hit_rate"`
	// The queueing delay of the served requests, in steps.
	WaitP50 uint64 `json:"wait_p50_steps"`
	WaitP99 uint64 `json:"wait_p99_steps"`
	WaitMax uint64 `json:"wait_max_steps"`
}

// AdapterGoal is one of ADR-006's targets judged on a load row's median:
// met when the median's whole 99 % interval is below the bound, missed
// when the whole interval is at or above it, undecided otherwise. A missed
// target is reported, never an error.
type AdapterGoal struct {
	Name   string  `json:"name"`
	Row    string  `json:"row"`
	BelowN float64 `json:"below_ns"`
	Got    Spread  `json:"got"`
	Status string  `json:"status"` // met, missed or undecided
	Detail string  `json:"detail"`
}

// ReadAdapters reads an adapters document and validates it; every error
// matches ErrDocument (or is the file's).
func ReadAdapters(path string) (*Adapters, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseAdapters(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// ParseAdapters decodes an adapters document strictly (no unknown field,
// nothing after it) and validates it.
func ParseAdapters(b []byte) (*Adapters, error) {
	var d Adapters
	if err := decodeStrict(b, &d); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks what a run cannot have written otherwise.
func (d *Adapters) Validate() error {
	var p problems
	if d.Schema != AdaptersSchema || d.SchemaVersion != AdaptersSchemaVersion {
		p.add("schema", "%q version %d; want %q version %d", d.Schema, d.SchemaVersion, AdaptersSchema, AdaptersSchemaVersion)
	}
	validateMachine(&p, d.Machine)
	l := d.Loads
	if l.AdapterBytes < 1 || l.PageBytes < 1 || l.Rounds < 1 || l.HotBatch < 1 || l.Warmup < 0 {
		p.add("loads", "adapter %d B, pages of %d B, %d rounds (%d warm-up), hot batch %d; want positive sizes and counts",
			l.AdapterBytes, l.PageBytes, l.Rounds, l.Warmup, l.HotBatch)
	}
	names := map[string]bool{}
	for i, r := range l.Rows {
		where := fmt.Sprintf("loads.rows[%d]", i)
		if r.Name == "" || names[r.Name] {
			p.add(where, "name %q empty or repeated", r.Name)
		}
		names[r.Name] = true
		if r.Kind != AdapterRowAcquire && r.Kind != AdapterRowLimit {
			p.add(where, "kind %q; want %q or %q", r.Kind, AdapterRowAcquire, AdapterRowLimit)
		}
		s := r.NS
		if s.N != l.Rounds || !nonNegative(s.Median, s.Lo, s.Hi, s.Min, s.P90, s.Max, r.GBps) ||
			s.Min > s.Lo || s.Lo > s.Median || s.Median > s.Hi || s.Hi > s.Max || s.P90 > s.Max {
			p.add(where, "ns %+v is not a spread of %d rounds", s, l.Rounds)
		}
		v := r.VsLimit
		if !nonNegative(v.Point, v.Lo, v.Hi) || v.Lo > v.Point || v.Point > v.Hi {
			p.add(where, "vs_limit %+v is not an interval", v)
		}
	}
	for i, r := range l.Rows {
		if r.Limit != "" && (!names[r.Limit] || r.Limit == r.Name) {
			p.add(fmt.Sprintf("loads.rows[%d]", i), "limit %q is not another row", r.Limit)
		}
	}
	z := d.Zipf
	if z.Registered < 1 || z.HotSlots < 1 || z.WarmSlots < 0 || z.Acquires < 1 || z.AcquireNS.Count != z.Acquires {
		p.add("zipf", "%d registered, %d hot, %d warm, %d acquires (%d timed); want positive counts, every acquire timed",
			z.Registered, z.HotSlots, z.WarmSlots, z.Acquires, z.AcquireNS.Count)
	}
	n := 0
	for _, r := range z.ByResidency {
		n += r.Count
	}
	if n != z.AcquireNS.Count {
		p.add("zipf.by_residency", "%d acquires; want %d", n, z.AcquireNS.Count)
	}
	if !nonNegative(z.HotHitRate, z.WarmLoadsPerAcq, z.ColdLoadsPerAcq, z.BytesPerRegistered) || z.HotHitRate > 1 {
		p.add("zipf", "rates %v %v %v or bytes %v out of range", z.HotHitRate, z.WarmLoadsPerAcq, z.ColdLoadsPerAcq, z.BytesPerRegistered)
	}
	for i, r := range d.Batcher.Runs {
		if r.Requests < 1 || r.Hits < 0 || r.Loads < 0 || r.HitRate < 0 || r.HitRate > 1 || r.WaitP50 > r.WaitP99 || r.WaitP99 > r.WaitMax {
			p.add(fmt.Sprintf("batcher.runs[%d]", i), "%+v is not a replay", r)
		}
	}
	for i, t := range d.Targets {
		if !names[t.Row] || (t.Status != "met" && t.Status != "missed" && t.Status != "undecided") || t.BelowN <= 0 {
			p.add(fmt.Sprintf("targets[%d]", i), "row %q, status %q, bound %v", t.Row, t.Status, t.BelowN)
		}
	}
	if !nonNegative(d.WallSeconds) {
		p.add("wall_seconds", "%v", d.WallSeconds)
	}
	return p.err()
}

// JudgeBelow judges "median < bound" on a spread: met when the median's
// whole interval is below the bound, missed when the whole interval is at
// or above it, undecided when it straddles the bound.
func JudgeBelow(s Spread, bound float64) string {
	switch {
	case s.Hi < bound:
		return "met"
	case s.Lo >= bound:
		return "missed"
	}
	return "undecided"
}

// FmtNS is a duration in nanoseconds with three significant digits, e.g.
// "812 ns", "3.41 ms".
func FmtNS(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "n/a"
	case ns < 1e3:
		return fmt.Sprintf("%.0f ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	}
	return fmt.Sprintf("%.3g s", ns/1e9)
}

// adapterLoadCells is one load row's table cells.
func adapterLoadCells(r AdapterLoadRow) []string {
	gb, vs := "", ""
	if r.GBps > 0 {
		gb = fmt.Sprintf("%.2f", r.GBps)
	}
	if r.Limit != "" {
		vs = fmt.Sprintf("%.2f× [%.2f, %.2f] of %s", r.VsLimit.Point, r.VsLimit.Lo, r.VsLimit.Hi, r.Limit)
	}
	s := r.NS
	return []string{r.Name, FmtNS(s.Median), fmt.Sprintf("[%s, %s]", FmtNS(s.Lo), FmtNS(s.Hi)), FmtNS(s.Min), FmtNS(s.P90), FmtNS(s.Max), gb, vs}
}

var adapterLoadHead = []string{"operation", "median", "99 % interval", "min", "p90", "max", "GB/s", "time over the limit's, same round"}

func adapterLatencyCells(l AdapterLatency) []string {
	name := l.Residency
	if name == "" {
		name = "all"
	}
	return []string{name, itoa(l.Count), FmtNS(l.Mean), FmtNS(l.P50), FmtNS(l.P99), FmtNS(l.P999), FmtNS(l.Max)}
}

var adapterLatencyHead = []string{"before the call", "acquires", "mean", "p50", "p99", "p99.9", "max"}

func adapterBatcherCells(r AdapterBatcherRun) []string {
	return []string{r.Order, itoa(r.Requests), fmt.Sprintf("%.1f", r.LoadsPer1000), itoa(int(r.WaitP50)), itoa(int(r.WaitP99)),
		itoa(int(r.WaitMax)), fmt.Sprintf("%.1f %%", 100*r.HitRate)}
}

var adapterBatcherHead = []string{"order", "requests", "loads / 1,000 requests", "wait p50 (steps)", "p99", "max", "hot hit rate"}

func adapterZipfLine(z AdapterZipf) string {
	return fmt.Sprintf("%d registered adapters of %d B, %d hot slots, %d warm slots; Zipf s = %g; %d acquires timed after %d untimed, "+
		"%g ms of the Manager's clock apart, a Tick every %d",
		z.Registered, z.AdapterBytes, z.HotSlots, z.WarmSlots, z.S, z.Acquires, z.Warmup, z.ClockStepMS, z.TickEvery)
}

func adapterBatcherLine(b AdapterBatcher) string {
	return fmt.Sprintf("%d adapters of %d B, %d hot slots; %d requests a step for %d steps, Zipf s = %g; batches of at most %d adapters and %d requests, max wait %d steps",
		b.Adapters, b.AdapterBytes, b.HotSlots, b.ArrivalsPerStep, b.Steps, b.S, b.MaxAdapters, b.MaxRequests, b.MaxWait)
}

func adapterLoadsLine(l AdapterLoads) string {
	fs := l.FileSystem
	if fs == "" {
		fs = "file system unknown"
	}
	return fmt.Sprintf("an adapter of %s (fp16 weights) in a pages pool of %d B pages; %d rounds after %d untimed, every operation once per round in a random order; "+
		"a hot sample is the mean of %d acquires; int8: %s; files on %s, read from the page cache",
		fmtBytes(float64(l.AdapterBytes)), l.PageBytes, l.Rounds, l.Warmup, l.HotBatch, l.Quant, fs)
}

// WriteAdaptersText prints an adapters document as tables.
func WriteAdaptersText(w io.Writer, d *Adapters) error {
	fmt.Fprintf(w, "Adapters: ADR-006's residency targets through adapters.Manager — %s\n", d.Machine)
	if det := d.Machine.Details(); det != "" {
		fmt.Fprintf(w, "host: %s\n", det)
	}
	fmt.Fprintf(w, "revision %s; %s", strings.ReplaceAll(revLine(d.Revision), "`", ""), time.Duration(d.WallSeconds*1e9).Round(100*time.Millisecond))
	if d.Quick {
		fmt.Fprint(w, "; QUICK (smoke test: the figures mean nothing)")
	}
	fmt.Fprintf(w, "\n\nLoads: %s\n\n", adapterLoadsLine(d.Loads))
	table := func(head []string, rows [][]string) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
		}
		return tw.Flush()
	}
	var rows [][]string
	for _, r := range d.Loads.Rows {
		rows = append(rows, adapterLoadCells(r))
	}
	if err := table(adapterLoadHead, rows); err != nil {
		return err
	}
	z := d.Zipf
	fmt.Fprintf(w, "\nScale: %s\n", adapterZipfLine(z))
	fmt.Fprintf(w, "heap per registered adapter: %.0f B (%.1f objects); hot hit rate %.1f %%, warm loads %.3f and cold loads %.3f per acquire\n\n",
		z.BytesPerRegistered, z.AllocsPerRegistered, 100*z.HotHitRate, z.WarmLoadsPerAcq, z.ColdLoadsPerAcq)
	rows = [][]string{adapterLatencyCells(z.AcquireNS)}
	for _, l := range z.ByResidency {
		rows = append(rows, adapterLatencyCells(l))
	}
	if err := table(adapterLatencyHead, rows); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nBatcher: %s\n\n", adapterBatcherLine(d.Batcher))
	rows = nil
	for _, r := range d.Batcher.Runs {
		rows = append(rows, adapterBatcherCells(r))
	}
	if err := table(adapterBatcherHead, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nTargets (ADR-006; a missed target is reported, not an error):")
	for _, t := range d.Targets {
		fmt.Fprintf(w, "  %-58s %-9s %s\n", t.Name, strings.ToUpper(t.Status), t.Detail)
	}
	if len(d.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range d.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	return nil
}

// mdTable writes a Markdown table whose first column is text and the
// others numbers.
func mdTable(w io.Writer, head []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n|---|", strings.Join(head, " | "))
	for range head[1:] {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// WriteAdaptersMarkdown writes the adapters section of BENCHMARKS.md.
func WriteAdaptersMarkdown(w io.Writer, d *Adapters) {
	fmt.Fprintf(w, "\n## Adapters: ADR-006's residency targets (%s)\n\n", d.Machine)
	fmt.Fprintln(w, "Generated from a recorded `locus-eval adapters -json` run; do not edit by hand. LoRA adapters through")
	fmt.Fprintln(w, "`adapters.Manager` (hot: a run of a pages pool; warm: a host copy, exact or int8; cold: the adapter's file, or a")
	fmt.Fprintln(w, "disk cold tier), beside the machine's limits for the same bytes, measured interleaved in the same process.")
	fmt.Fprintln(w)
	writeRunRows(w, d.Machine, d.Created, d.Revision)
	cfg := fmt.Sprintf("seed %d, wall time %s", d.Seed, time.Duration(d.WallSeconds*1e9).Round(time.Second))
	if d.Quick {
		cfg += ", QUICK (a smoke test: the figures mean nothing)"
	}
	fmt.Fprintf(w, "| configuration | %s |\n", cfg)

	fmt.Fprintln(w, "\n### Targets")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Judged on the median: met when its whole 99 % interval is below the bound, missed when the whole")
	fmt.Fprintln(w, "interval is at or above it, undecided otherwise. A missed target is reported, not a failure.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| status | target | want | got |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, t := range d.Targets {
		fmt.Fprintf(w, "| %s | %s | < %s | %s |\n", t.Status, t.Name, FmtNS(t.BelowN), t.Detail)
	}

	fmt.Fprintln(w, "\n### Loads of a 16 MiB adapter")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s. Time of one operation (an acquire with its release, a copy, a read).\n\n", capitalize(adapterLoadsLine(d.Loads)))
	var rows [][]string
	for _, r := range d.Loads.Rows {
		rows = append(rows, adapterLoadCells(r))
	}
	mdTable(w, adapterLoadHead, rows)

	z := d.Zipf
	fmt.Fprintln(w, "\n### The ADR's scale: 10,000 registered, 100 hot, 1,000 warm")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s. Heap per registered adapter: **%.0f B** (%.1f objects); hot hit rate **%.1f %%**, warm loads %.3f and cold loads %.3f per acquire.\n\n",
		capitalize(adapterZipfLine(z)), z.BytesPerRegistered, z.AllocsPerRegistered, 100*z.HotHitRate, z.WarmLoadsPerAcq, z.ColdLoadsPerAcq)
	rows = [][]string{adapterLatencyCells(z.AcquireNS)}
	for _, l := range z.ByResidency {
		rows = append(rows, adapterLatencyCells(l))
	}
	mdTable(w, adapterLatencyHead, rows)

	fmt.Fprintln(w, "\n### Residency-aware batching against largest-queue-first")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s.\n\n", capitalize(adapterBatcherLine(d.Batcher)))
	rows = nil
	for _, r := range d.Batcher.Runs {
		rows = append(rows, adapterBatcherCells(r))
	}
	mdTable(w, adapterBatcherHead, rows)
	if len(d.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range d.Notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
