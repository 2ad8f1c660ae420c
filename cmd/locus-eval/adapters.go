package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
)

// The adapters subcommand ports the adapters package's benchmarks
// (BenchmarkLoad, BenchmarkMemmove, BenchmarkFileRead, BenchmarkZipf,
// BenchmarkBatcher) to one run through the public API, judged against
// ADR-006's targets.

// ADR-006's adapter and its targets.
const (
	adpBytes      = 16 << 20 // the adapter of the load targets
	adpPage       = 4096     // the hot pages pool's page, and the scale's adapter size
	adpContent    = pages.Content(1)
	adpWarmBytes  = 64 << 20 // the warm region of the load part
	adpQuantGroup = 64
	adpHotNS      = 100e3 // acquire of a hot adapter < 100 µs
	adpWarmNS     = 1e6   // a warm load (exact or int8) < 1 ms
	adpColdNS     = 10e6  // a cold load < 10 ms
	// The cold disk tier of the load part: slots of 1 MiB (the field's
	// 0.5 to 2 MB blocks), room for both adapters and a few more blocks.
	adpColdBlock = 1 << 20
	adpColdSlots = 2*adpBytes/adpColdBlock + 8
)

// The ADR's scale and the batcher's trace (those of adapters'
// BenchmarkZipf and TestBatcherZipf).
const (
	adpRegistered   = 10_000
	adpHotSlots     = 100
	adpWarmSlots    = 1000
	adpZipfS        = 1.1
	adpTickEvery    = 100
	adpBatchS       = 1.2
	adpBatchAds     = 64
	adpBatchHot     = 12
	adpBatchMaxAds  = 4
	adpBatchMaxReqs = 24
	adpBatchMaxWait = 8
	adpBatchArrive  = 20
)

// The load rows, in the document's order.
const (
	adpRowHot      = "hot acquire"
	adpRowExact    = "warm exact"
	adpRowInt8     = "warm int8"
	adpRowCold     = "cold file"
	adpRowColdTier = "cold disk tier"
	adpRowMemmove  = "memmove"
	adpRowFileRead = "file read"
)

// Flag defaults and bounds.
const (
	adpDefaultRounds   = 101
	adpQuickRounds     = 5
	adpMinRounds       = 3
	adpMaxRounds       = 10_000
	adpDefaultAcquires = 1_000_000
	adpQuickAcquires   = 5_000
	adpMaxAcquires     = 10_000_000
	adpDefaultSteps    = 400
	adpQuickSteps      = 60
	adpMaxSteps        = 100_000
	adpHotBatch        = 100
)

// adpOptions is a checked configuration.
type adpOptions struct {
	dir      string // "" for a temporary directory
	rounds   int
	acquires int
	steps    int
	seed     uint64
	quick    bool
	progress func(eval.Progress)
}

// runAdapters runs the adapters subcommand: it parses and checks the flags,
// measures, and prints the tables or the JSON document.
func runAdapters(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval adapters", `Usage: locus-eval adapters [flags]

LoRA adapter residency (package adapters) against ADR-006's targets, measured in one process:

  loads    a 16 MiB adapter: acquire of a hot adapter (< 100 µs), a load from the warm tier, exact and int8
           (< 1 ms), a load from its file, cold (< 10 ms), and from a disk cold tier (tier/disk, WithCold;
           < 10 ms); beside memmove and a plain read of the same 16 MiB file, measured in the same rounds: every operation once per round in a random order,
           medians with 99 % intervals, min, p90 and max
  scale    10,000 registered adapters, 100 hot and 1,000 warm, acquired on a Zipf trace: the heap per
           registered adapter, the acquire latency distribution (p50, p99, p99.9, max) and the hit rate
  batcher  a Zipf trace of requests through adapters.Batcher, residency-first against largest-queue-first:
           loads per 1,000 requests, p50/p99 queueing delay in steps, hot-tier hit rate

Missed targets are printed, not errors. About 10 s on 2 cores (-quick: a smoke test whose figures mean
nothing).

Flags:
`, stderr)
	dir := fs.String("dir", "", "directory for the two adapter files and the disk tier's file (default: a new temporary directory); a subdirectory is made there and removed after")
	rounds := fs.Int("rounds", adpDefaultRounds, fmt.Sprintf("timed rounds of the load part (-quick: %d); %d to %d", adpQuickRounds, adpMinRounds, adpMaxRounds))
	acquires := fs.Int("zipf-acquires", adpDefaultAcquires, fmt.Sprintf("timed acquires of the scale part (-quick: %d); 1 to %d", adpQuickAcquires, adpMaxAcquires))
	steps := fs.Int("batcher-steps", adpDefaultSteps, fmt.Sprintf("steps of the batcher trace (-quick: %d); 1 to %d", adpQuickSteps, adpMaxSteps))
	seed := fs.Uint64("seed", 1, "seed of the load rounds' order and of the traces (1: the adapters package's benchmarks' traces)")
	asJSON := fs.Bool("json", false, "print the JSON document (schema "+eval.AdaptersSchema+") instead of the tables")
	quick := fs.Bool("quick", false, "few rounds and acquires: a smoke test of a few seconds whose figures mean nothing")
	quiet := fs.Bool("q", false, "no progress on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := adpOptions{dir: *dir, rounds: *rounds, acquires: *acquires, steps: *steps, seed: *seed, quick: *quick}
	var errs []error
	if *rounds < adpMinRounds || *rounds > adpMaxRounds {
		errs = append(errs, fmt.Errorf("%w: -rounds %d; want %d to %d", eval.ErrConfig, *rounds, adpMinRounds, adpMaxRounds))
	}
	if *acquires < 1 || *acquires > adpMaxAcquires {
		errs = append(errs, fmt.Errorf("%w: -zipf-acquires %d; want 1 to %d", eval.ErrConfig, *acquires, adpMaxAcquires))
	}
	if *steps < 1 || *steps > adpMaxSteps {
		errs = append(errs, fmt.Errorf("%w: -batcher-steps %d; want 1 to %d", eval.ErrConfig, *steps, adpMaxSteps))
	}
	if err := checkDir(o.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if *quick {
		for _, q := range []struct {
			name string
			dst  *int
			v    int
		}{{"rounds", &o.rounds, adpQuickRounds}, {"zipf-acquires", &o.acquires, adpQuickAcquires}, {"batcher-steps", &o.steps, adpQuickSteps}} {
			if !flagSet(fs, q.name) {
				*q.dst = q.v
			}
		}
	}
	var finish func(seconds float64)
	o.progress, finish = progressTo(stderr, *quiet)
	doc, err := measureAdapters(o)
	if err != nil {
		finish(-1)
		return err
	}
	finish(doc.WallSeconds)
	if *asJSON {
		return writeJSON(stdout, doc)
	}
	return eval.WriteAdaptersText(stdout, doc)
}

// measureAdapters runs the three parts. A Manager that fails a call,
// serves other bytes than its adapter's, or whose accounting is wrong
// fails the run (errFailed).
func measureAdapters(o adpOptions) (*eval.Adapters, error) {
	start := time.Now()
	doc := &eval.Adapters{Schema: eval.AdaptersSchema, SchemaVersion: eval.AdaptersSchemaVersion, Created: start.UTC(),
		Machine: eval.ThisMachine(), Revision: eval.ThisRevision(), Quick: o.quick, Seed: o.seed}
	p := &adpProgress{o: o, start: start, total: o.rounds + 2}
	var err error
	if doc.Loads, err = measureAdapterLoads(o, p); err != nil {
		return nil, err
	}
	p.step("scale: 10,000 registered, a Zipf trace")
	if doc.Zipf, err = measureAdapterZipf(o); err != nil {
		return nil, err
	}
	p.done++
	p.step("batcher: residency-first and largest-queue-first")
	if doc.Batcher, err = measureAdapterBatcher(o); err != nil {
		return nil, err
	}
	doc.Targets = adapterTargets(doc.Loads)
	doc.Notes = adapterNotes(doc)
	doc.WallSeconds = time.Since(start).Seconds()
	return doc, nil
}

// adpProgress reports the rounds and parts done.
type adpProgress struct {
	o           adpOptions
	start       time.Time
	done, total int
}

// step reports that group starts, steps earlier done.
func (p *adpProgress) step(group string) {
	if p.o.progress == nil {
		return
	}
	el := time.Since(p.start)
	eta := time.Duration(-1)
	if p.done > 0 {
		eta = el / time.Duration(p.done) * time.Duration(p.total-p.done)
	}
	p.o.progress(eval.Progress{Process: 1, Processes: 1, Done: p.done, Total: p.total, Group: group, Elapsed: el, ETA: eta})
}

// adpClock is the Managers' clock: a fake one, advanced by the run.
type adpClock struct{ t time.Time }

func (c *adpClock) now() time.Time          { return c.t }
func (c *adpClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// adpRig is a pages pool on the Go heap shared by a KV content type and
// the adapters, and a Manager over it, as an engine sets them up.
type adpRig struct {
	hot  *pages.Pool
	m    *adapters.Manager
	clk  *adpClock
	cold *tier.Manager // the cold tier, closed after the Manager; nil for none
}

func newAdpRig(nPages int, opts ...adapters.Option) (*adpRig, error) {
	r := &adpRig{clk: &adpClock{t: time.Unix(1000, 0)}}
	b, err := heap.New(nPages*adpPage, 1)
	if err != nil {
		return nil, err
	}
	r.hot, err = pages.New(b, adpPage,
		pages.WithContentTypes(
			pages.ContentType{Name: "kv", Priority: 0, Evictable: true},
			pages.ContentType{Name: "adapter", Priority: 1, Evictable: true},
		),
		pages.WithEvictFunc(func(run pages.Run, c pages.Content) { r.m.Evicted(run, c) }))
	if err != nil {
		return nil, err
	}
	r.m, err = adapters.New(r.hot, adpContent, append([]adapters.Option{adapters.WithClock(r.clk.now)}, opts...)...)
	if err != nil {
		_ = r.hot.Close()
		return nil, err
	}
	return r, nil
}

// close checks the accounting, then closes the Manager, its cold tier and
// the pool.
func (r *adpRig) close() error {
	err := r.m.Check()
	if err != nil {
		err = fmt.Errorf("%w: Check: %w", errFailed, err)
	}
	err = errors.Join(err, r.m.Close())
	if r.cold != nil {
		err = errors.Join(err, r.cold.Check(), r.cold.Close())
	}
	return errors.Join(err, r.hot.Close())
}

// settleCold drains until no store into the cold tier is in flight.
func (r *adpRig) settleCold() error {
	for deadline := time.Now().Add(10 * time.Second); r.m.Stats().ColdStoring > 0; {
		if _, err := r.m.Drain(nil); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("the cold tier's stores did not complete in 10 s")
		}
		time.Sleep(100 * time.Microsecond)
	}
	return nil
}

// acquireRelease acquires id and releases it.
func (r *adpRig) acquireRelease(id string) error {
	h, err := r.m.Acquire(id)
	if err != nil {
		return err
	}
	return r.m.Release(h)
}

// adpWeights is the load part's adapter: fp16 weights in [-0.1, 0.1], as
// adapters' BenchmarkLoad writes them.
func adpWeights() []byte {
	w := make([]byte, adpBytes)
	for i := range adpBytes / 2 {
		binary.LittleEndian.PutUint16(w[2*i:], adapters.FP16.Encode16(float64(i%2001-1000)/1e4))
	}
	return w
}

// adpLoadOp is one row of the load part: it times one sample.
type adpLoadOp struct {
	name, kind, limit string
	run               func() (time.Duration, error)
	ns, vs            []float64
}

// measureAdapterLoads times the load rows, every row once per round in a
// random order.
func measureAdapterLoads(o adpOptions, p *adpProgress) (loads eval.AdapterLoads, err error) {
	q := adapters.Quant{Format: adapters.FP16, Group: adpQuantGroup}
	loads = eval.AdapterLoads{AdapterBytes: adpBytes, PageBytes: adpPage, Rounds: o.rounds, Warmup: 3, HotBatch: adpHotBatch,
		Quant: fmt.Sprintf("int8 with an absmax scale per group of %d fp16 weights, stored at demotion, dequantized on promotion", adpQuantGroup)}
	if o.quick {
		loads.Warmup = 1
	}
	parent := o.dir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "locus-eval-adapters-")
	if err != nil {
		return loads, fmt.Errorf("%w: %w", eval.ErrConfig, err)
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	loads.FileSystem = fileSystemOf(dir)
	w := adpWeights()
	for _, id := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, id), w, 0o600); err != nil {
			return loads, fmt.Errorf("%w: %w", eval.ErrConfig, err)
		}
	}

	// The four Managers of adapters' BenchmarkLoad, and one over a disk
	// cold tier: two adapters alternate in a hot tier of one slot, so every
	// acquire but the hot row's demotes one and loads the other.
	cases := []struct {
		name string
		ids  []string
		opts []adapters.Option
		cold bool
	}{
		{adpRowHot, []string{"a"}, nil, false},
		{adpRowExact, []string{"a", "b"}, []adapters.Option{adapters.WithWarm(adpWarmBytes, 0, 0)}, false},
		{adpRowInt8, []string{"a", "b"}, []adapters.Option{adapters.WithWarm(adpWarmBytes, 0, 0), adapters.WithQuantization(q, 0)}, false},
		{adpRowCold, []string{"a", "b"}, nil, false},
		{adpRowColdTier, []string{"a", "b"}, nil, true},
	}
	rigs := make([]*adpRig, len(cases))
	defer func() {
		for _, r := range rigs {
			if r != nil {
				err = errors.Join(err, r.close())
			}
		}
	}()
	var ops []*adpLoadOp
	for i, c := range cases {
		opts := append([]adapters.Option{adapters.WithHotBudget(1, 0)}, c.opts...)
		var cold *tier.Manager
		if c.cold {
			if cold, err = adpColdTier(filepath.Join(dir, "cold.tier")); err != nil {
				return loads, err
			}
			opts = append(opts, adapters.WithCold(cold, 1))
		}
		r, err := newAdpRig(2*adpBytes/adpPage+8, opts...)
		if err != nil {
			if cold != nil {
				_ = cold.Close()
			}
			return loads, err
		}
		r.cold = cold
		rigs[i] = r
		for _, id := range c.ids {
			l, err := adapters.File(filepath.Join(dir, id))
			if err != nil {
				return loads, err
			}
			if err := r.m.Register(id, l); err != nil {
				return loads, err
			}
			if err := r.acquireRelease(id); err != nil { // the first, cold load; makes the warm copies
				return loads, fmt.Errorf("%w: %s: %w", errFailed, c.name, err)
			}
		}
		if c.cold { // a went to the cold tier with b's load; b goes with a's
			err := r.acquireRelease(c.ids[0])
			if err = errors.Join(err, r.settleCold()); err != nil {
				return loads, fmt.Errorf("%w: %s: %w", errFailed, c.name, err)
			}
		}
		op := &adpLoadOp{name: c.name, kind: eval.AdapterRowAcquire}
		ids, next := c.ids, 0
		if len(ids) == 1 {
			op.run = func() (time.Duration, error) {
				t0 := time.Now()
				for range adpHotBatch {
					if err := r.acquireRelease(ids[0]); err != nil {
						return 0, err
					}
				}
				return time.Since(t0) / adpHotBatch, nil
			}
		} else {
			op.run = func() (time.Duration, error) {
				id := ids[next%len(ids)]
				next++
				t0 := time.Now()
				err := r.acquireRelease(id)
				return time.Since(t0), err
			}
		}
		ops = append(ops, op)
	}
	ops[1].limit, ops[2].limit, ops[3].limit, ops[4].limit = adpRowMemmove, adpRowMemmove, adpRowFileRead, adpRowFileRead

	// The limits: one copy of the 16 MiB, and one pread of its file from
	// the page cache into a buffer, as the File loader reads.
	dst := make([]byte, adpBytes)
	f, err := os.Open(filepath.Join(dir, "a"))
	if err != nil {
		return loads, err
	}
	defer f.Close()
	ops = append(ops,
		&adpLoadOp{name: adpRowMemmove, kind: eval.AdapterRowLimit, run: func() (time.Duration, error) {
			t0 := time.Now()
			copy(dst, w)
			return time.Since(t0), nil
		}},
		&adpLoadOp{name: adpRowFileRead, kind: eval.AdapterRowLimit, run: func() (time.Duration, error) {
			t0 := time.Now()
			n, err := f.ReadAt(dst, 0)
			d := time.Since(t0)
			if err == nil && n != len(dst) {
				err = fmt.Errorf("read %d of %d bytes", n, len(dst))
			}
			return d, err
		}})

	before := make([]adapters.Stats, len(rigs))
	rng := rand.New(rand.NewPCG(o.seed, 0x10ad))
	order := make([]int, len(ops))
	for round := range loads.Warmup + o.rounds {
		timed := round >= loads.Warmup
		if round == loads.Warmup {
			for i, r := range rigs {
				before[i] = r.m.Stats()
			}
		}
		if timed {
			if n := round - loads.Warmup; n%10 == 0 {
				p.step(fmt.Sprintf("loads: round %d of %d", n+1, o.rounds))
			}
			p.done++
		}
		for i := range order {
			order[i] = i
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		got := make([]time.Duration, len(ops))
		for _, i := range order {
			d, err := ops[i].run()
			if err != nil {
				if ops[i].kind == eval.AdapterRowLimit {
					return loads, fmt.Errorf("%s: %w", ops[i].name, err)
				}
				return loads, fmt.Errorf("%w: %s: %w", errFailed, ops[i].name, err)
			}
			got[i] = d
		}
		if !timed {
			continue
		}
		byName := map[string]time.Duration{}
		for i, op := range ops {
			byName[op.name] = got[i]
		}
		for i, op := range ops {
			op.ns = append(op.ns, float64(got[i]))
			if op.limit != "" {
				op.vs = append(op.vs, float64(got[i])/max(float64(byName[op.limit]), 1))
			}
		}
	}
	if err := adpCheckLoads(rigs, before, o.rounds, w); err != nil {
		return loads, err
	}
	for _, op := range ops {
		row := eval.AdapterLoadRow{Name: op.name, Kind: op.kind, Limit: op.limit, NS: eval.NewSpread(op.ns)}
		if op.name != adpRowHot {
			row.GBps = adpBytes / max(row.NS.Median, 1)
		}
		if op.limit != "" {
			row.VsLimit = eval.MedianInterval(op.vs)
		}
		loads.Rows = append(loads.Rows, row)
	}
	return loads, nil
}

// adpCheckLoads checks that every timed acquire did what its row claims
// (a hot hit, a warm load, a cold load from the file or from the disk
// tier) and that the adapters hold their weights (exactly, or within the
// int8 bound's reach: the same length).
func adpCheckLoads(rigs []*adpRig, before []adapters.Stats, rounds int, w []byte) error {
	for i, r := range rigs {
		s, b := r.m.Stats(), before[i]
		hits, warm, cold, tiered := s.HotHits-b.HotHits, s.WarmLoads-b.WarmLoads, s.ColdLoads-b.ColdLoads, s.ColdTierLoads-b.ColdTierLoads
		var want [4]uint64
		switch i {
		case 0:
			want = [4]uint64{uint64(rounds * adpHotBatch), 0, 0, 0}
		case 1, 2:
			want = [4]uint64{0, uint64(rounds), 0, 0}
		case 3:
			want = [4]uint64{0, 0, uint64(rounds), 0}
		case 4:
			want = [4]uint64{0, 0, 0, uint64(rounds)}
		}
		if got := [4]uint64{hits, warm, cold, tiered}; got != want {
			return fmt.Errorf("%w: loads: Manager %d: %d hot hits, %d warm loads, %d cold loads, %d cold-tier loads; want %v",
				errFailed, i, hits, warm, cold, tiered, want)
		}
		if i == 4 && (s.ColdTierErrors != 0 || s.ColdTier.Adapters != 2) {
			return fmt.Errorf("%w: %s: %d failed copies, %d cold copies; want 0 and 2", errFailed, adpRowColdTier, s.ColdTierErrors, s.ColdTier.Adapters)
		}
		if i == 2 && s.Quantized == 0 {
			return fmt.Errorf("%w: %s: no warm copy is int8", errFailed, adpRowInt8)
		}
		h, err := r.m.Acquire("a")
		if err != nil {
			return fmt.Errorf("%w: loads: %w", errFailed, err)
		}
		got, err := r.m.Bytes(h)
		ok := err == nil && len(got) == len(w) && (i == 2 || bytes.Equal(got, w))
		if err := errors.Join(err, r.m.Release(h)); err != nil || !ok {
			return fmt.Errorf("%w: loads: Manager %d serves other bytes than the adapter's (%v)", errFailed, i, err)
		}
	}
	return nil
}

// adpColdTier opens the load part's disk cold tier: a preallocated file of
// checksummed 1 MiB slots (buffered I/O: reads from the page cache, as the
// cold file row's), its copies run by four tier workers.
func adpColdTier(path string) (*tier.Manager, error) {
	d, err := disk.Open(path, adpColdBlock, adpColdSlots)
	if err != nil {
		return nil, fmt.Errorf("%w: cold tier: %w", eval.ErrConfig, err)
	}
	t, err := tier.New(d, tier.WithWorkers(4))
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return t, nil
}

// measureAdapterZipf is adapters' BenchmarkZipf as one run: the ADR's
// 10,000 registered adapters, 100 hot and 1,000 warm.
func measureAdapterZipf(o adpOptions) (z eval.AdapterZipf, err error) {
	z = eval.AdapterZipf{Registered: adpRegistered, HotSlots: adpHotSlots, WarmSlots: adpWarmSlots, AdapterBytes: adpPage, S: adpZipfS,
		Warmup: 20_000, Acquires: o.acquires, ClockStepMS: 1, TickEvery: adpTickEvery}
	if o.quick {
		z.Warmup = 2_000
	}
	l, err := adapters.Func(adpPage, func(dst []byte) (int, error) { return len(dst), nil })
	if err != nil {
		return z, err
	}
	r, err := newAdpRig(adpHotSlots+16, adapters.WithHotBudget(adpHotSlots, 0), adapters.WithWarm(adpWarmSlots*adpPage, adpWarmSlots, adpPage))
	if err != nil {
		return z, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	ids := make([]string, adpRegistered)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprint("lora-", i)
		if err := r.m.Register(ids[i], l); err != nil {
			return z, err
		}
	}
	z.RegistrationSeconds = time.Since(t0).Seconds()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	z.BytesPerRegistered = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / adpRegistered
	z.AllocsPerRegistered = float64(int64(m1.Mallocs-m1.Frees)-int64(m0.Mallocs-m0.Frees)) / adpRegistered
	if z.BytesPerRegistered < 0 {
		z.BytesPerRegistered = 0
	}

	rng := rand.New(rand.NewPCG(o.seed, 2))
	zipf := rand.NewZipf(rng, adpZipfS, 1, adpRegistered-1)
	residencies := []adapters.Residency{adapters.Hot, adapters.Warm, adapters.Cold}
	byRes := make([][]float64, len(residencies))
	all := make([]float64, 0, o.acquires)
	seen := map[string]bool{}
	k := 0
	acquire := func(record bool) error {
		r.clk.advance(time.Millisecond)
		id := ids[zipf.Uint64()]
		res, err := r.m.Residency(id)
		if err != nil {
			return err
		}
		t0 := time.Now()
		h, err := r.m.Acquire(id)
		d := float64(time.Since(t0))
		if err != nil {
			return err
		}
		if record {
			all = append(all, d)
			i := slices.Index(residencies, res)
			if i < 0 {
				return fmt.Errorf("%s was %v before Acquire", id, res)
			}
			byRes[i] = append(byRes[i], d)
			seen[id] = true
		}
		if err := r.m.Release(h); err != nil {
			return err
		}
		if k++; k%adpTickEvery == 0 {
			if err := r.m.Tick(); err != nil {
				return err
			}
			for r.m.Stats().Loading > 0 { // Tick's prefetches of hot-worthy adapters
				if _, err := r.m.Drain(nil); err != nil {
					return err
				}
				runtime.Gosched()
			}
		}
		return nil
	}
	for range z.Warmup {
		if err := acquire(false); err != nil {
			return z, fmt.Errorf("%w: scale: %w", errFailed, err)
		}
	}
	runtime.GC()
	s0 := r.m.Stats()
	t0 = time.Now()
	for range o.acquires {
		if err := acquire(true); err != nil {
			return z, fmt.Errorf("%w: scale: %w", errFailed, err)
		}
	}
	z.TimedWallSeconds = time.Since(t0).Seconds()
	s := r.m.Stats()
	acq := float64(s.Acquires - s0.Acquires)
	if int(acq) != o.acquires {
		return z, fmt.Errorf("%w: scale: the Manager counted %.0f acquires; want %d", errFailed, acq, o.acquires)
	}
	z.HotHitRate = float64(s.HotHits-s0.HotHits) / acq
	z.WarmLoadsPerAcq = float64(s.WarmLoads-s0.WarmLoads) / acq
	z.ColdLoadsPerAcq = float64(s.ColdLoads-s0.ColdLoads) / acq
	z.PromotionsPerAcq = float64(s.Promotions-s0.Promotions) / acq
	z.DemotionsPerAcq = float64(s.Demotions-s0.Demotions) / acq
	z.DistinctAcquired = len(seen)
	z.AcquireNS = eval.NewAdapterLatency("", all)
	for i, res := range residencies {
		z.ByResidency = append(z.ByResidency, eval.NewAdapterLatency(res.String(), byRes[i]))
	}
	return z, nil
}

// measureAdapterBatcher replays adapters' TestBatcherZipf trace through
// both orders.
func measureAdapterBatcher(o adpOptions) (eval.AdapterBatcher, error) {
	b := eval.AdapterBatcher{Adapters: adpBatchAds, AdapterBytes: adpPage, HotSlots: adpBatchHot, MaxAdapters: adpBatchMaxAds,
		MaxRequests: adpBatchMaxReqs, MaxWait: adpBatchMaxWait, ArrivalsPerStep: adpBatchArrive, Steps: o.steps, S: adpBatchS}
	for _, c := range []struct {
		name  string
		order adapters.Order
	}{{"residency-first", adapters.ResidencyFirst}, {"largest-queue-first", adapters.LargestQueueFirst}} {
		run, err := adpReplay(o, c.order)
		if err != nil {
			return b, fmt.Errorf("%w: batcher %s: %w", errFailed, c.name, err)
		}
		run.Order = c.name
		b.Runs = append(b.Runs, run)
	}
	return b, nil
}

// adpReplay runs the deterministic Zipf trace through a Batcher: arrivals
// every step, one batch a step released at its end, prefetches waited
// for so that the result does not depend on timing.
func adpReplay(o adpOptions, order adapters.Order) (run eval.AdapterBatcherRun, err error) {
	r, err := newAdpRig(1024, adapters.WithHotBudget(adpBatchHot, 0), adapters.WithWarm(1<<20, 0, adpPage))
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	w := make([]byte, adpPage)
	for i := range w {
		w[i] = byte(i * 7)
	}
	l, err := adapters.Func(adpPage, func(dst []byte) (int, error) { return copy(dst, w), nil })
	if err != nil {
		return run, err
	}
	for i := range adpBatchAds {
		if err := r.m.Register(fmt.Sprint("lora-", i), l); err != nil {
			return run, err
		}
	}
	bt, err := adapters.NewBatcher(r.m, adapters.BatchConfig{MaxAdapters: adpBatchMaxAds, MaxRequests: adpBatchMaxReqs, MaxWait: adpBatchMaxWait, Order: order})
	if err != nil {
		return run, err
	}
	defer func() { err = errors.Join(err, bt.Close()) }()
	rng := rand.New(rand.NewPCG(41+o.seed, 7))
	zipf := rand.NewZipf(rng, adpBatchS, 1, adpBatchAds-1)
	var batch adapters.Batch
	var waits []float64
	seq := uint64(0)
	for range o.steps {
		for range adpBatchArrive {
			seq++
			if err := bt.Enqueue(adapters.Request{Seq: seq, Adapter: fmt.Sprint("lora-", zipf.Uint64())}); err != nil {
				return run, err
			}
		}
		if err := bt.Next(&batch); err != nil {
			return run, err
		}
		run.Requests += len(batch.Requests)
		run.Loads += batch.Loads
		run.Hits += batch.Hits
		for _, w := range batch.Waits {
			waits = append(waits, float64(w))
		}
		r.clk.advance(100 * time.Millisecond)
		if err := bt.Release(&batch); err != nil {
			return run, err
		}
		for r.m.Stats().Loading > 0 {
			if _, err := r.m.Drain(nil); err != nil {
				return run, err
			}
			time.Sleep(50 * time.Microsecond)
		}
		if err := r.m.Tick(); err != nil {
			return run, err
		}
		if err := r.m.Check(); err != nil {
			return run, err
		}
	}
	if run.Requests == 0 {
		return run, fmt.Errorf("no request served in %d steps", o.steps)
	}
	slices.Sort(waits)
	run.LoadsPer1000 = 1000 * float64(run.Loads) / float64(run.Requests)
	if run.Hits+run.Loads > 0 {
		run.HitRate = float64(run.Hits) / float64(run.Hits+run.Loads)
	}
	// The adapters package's benchmark's percentile: index p·(n−1).
	pct := func(p float64) uint64 { return uint64(waits[int(p*float64(len(waits)-1))]) }
	run.WaitP50, run.WaitP99, run.WaitMax = pct(0.5), pct(0.99), pct(1)
	return run, nil
}

// adapterTargets judges ADR-006's targets on the load rows' medians.
func adapterTargets(l eval.AdapterLoads) []eval.AdapterGoal {
	var ts []eval.AdapterGoal
	rows := map[string]eval.AdapterLoadRow{}
	for _, r := range l.Rows {
		rows[r.Name] = r
	}
	for _, t := range []struct {
		row, name string
		bound     float64
	}{
		{adpRowHot, "acquire of a hot adapter", adpHotNS},
		{adpRowExact, "warm load of a 16 MiB adapter, exact", adpWarmNS},
		{adpRowInt8, "warm load of a 16 MiB adapter, int8", adpWarmNS},
		{adpRowCold, "cold load of a 16 MiB adapter (file)", adpColdNS},
		{adpRowColdTier, "cold load of a 16 MiB adapter (disk tier)", adpColdNS},
	} {
		r, ok := rows[t.row]
		if !ok {
			continue
		}
		s := r.NS
		detail := fmt.Sprintf("median %s [%s, %s], max %s", eval.FmtNS(s.Median), eval.FmtNS(s.Lo), eval.FmtNS(s.Hi), eval.FmtNS(s.Max))
		if r.Limit != "" {
			lim := rows[r.Limit].NS.Median
			detail += fmt.Sprintf("; %s of the same bytes: median %s", r.Limit, eval.FmtNS(lim))
			if lim >= t.bound {
				detail += ", itself beyond the bound on this machine"
			}
		}
		ts = append(ts, eval.AdapterGoal{Name: "ADR-006: " + t.name + " < " + eval.FmtNS(t.bound), Row: t.row, BelowN: t.bound, Got: s,
			Status: eval.JudgeBelow(s, t.bound), Detail: detail})
	}
	return ts
}

func adapterNotes(d *eval.Adapters) []string {
	return []string{
		fmt.Sprintf("hot acquire: Acquire and Release of an adapter already hot; a sample is the mean of %d of them", d.Loads.HotBatch),
		"warm and cold rows: two adapters alternate in a hot tier of one slot (adapters' BenchmarkLoad), so every acquire demotes the other one and loads this one: " +
			"its time includes the demotion and the allocation of its pages run; warm int8 dequantizes half the bytes into fp16 on promotion",
		"memmove: Go copy of the 16 MiB between two heap buffers; file read: one pread of the 16 MiB file from the page cache into a heap buffer, as the File loader reads it",
		fmt.Sprintf("cold disk tier: as cold file, but the adapters sit in a disk cold tier (adapters.WithCold over tier/disk: a preallocated file of checksummed %d MiB slots, buffered I/O, so from the page cache as the file row) "+
			"where each was stored once before the rounds; every timed acquire reads its %d blocks from the tier's file in %d jobs on 4 tier workers, checksums them, and waits for them on the owner",
			adpColdBlock>>20, adpBytes/adpColdBlock, min(adpBytes/adpColdBlock, 4)),
		"time over the limit's: per round, this row's time over the limit's time in the same round; the median over rounds with its 99 % interval",
		"scale: heap per registered adapter from runtime.ReadMemStats after a GC, before and after the registrations (one loader shared by all; the id strings included); " +
			"every acquire timed alone with time.Now, its tier read before the call; Tick's prefetches are drained outside the timed calls",
		"batcher: every step's prefetches are waited for before the next, so the counts are deterministic for the seed",
	}
}
