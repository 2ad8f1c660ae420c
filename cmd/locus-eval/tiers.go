package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
)

// The tiers subcommand's JSON document: schema and version.
const (
	tiersSchema        = "locus-eval/tiers"
	tiersSchemaVersion = 1
)

// What locus-eval tiers measures: the block sizes, the bytes one
// bandwidth job moves, and ADR-006's adapter-sized object with its
// targets and the bandwidth bars.
const (
	tiersBatchBytes   = 2 << 20
	adapterBytes      = 16 << 20
	adapterBlockBytes = 2 << 20
	warmTargetNS      = 1e6  // ADR-006: a warm (host) load of an adapter under 1 ms
	coldTargetNS      = 10e6 // and a cold (disk) load under 10 ms
	barBlockBytes     = 512 << 10
	hostBar           = 0.80 // the host tier moves at least 80 % of memmove's bandwidth
	diskBar           = 0.70 // the disk tier at least 70 % of the file's sequential bandwidth
)

var tierBlockSizes = []int{4 << 10, 64 << 10, 512 << 10, 2 << 20}

// Flag bounds and defaults.
const (
	defaultCellTime   = 400 * time.Millisecond
	quickCellTime     = 15 * time.Millisecond
	minCellTime       = time.Millisecond
	maxCellTime       = 10 * time.Second
	defaultRegionMiB  = 32
	quickRegionMiB    = 4
	minRegionMiB      = 4
	maxRegionMiB      = 1024
	maxTierWorkers    = 64
	defaultMinPairs   = 25
	quickMinPairs     = 5
	warmupPairs       = 2
	maxPairs          = 200000
	tierWaitLimit     = time.Minute
	adapterMinObjects = 1
)

// tiersDoc is the tiers subcommand's -json document.
type tiersDoc struct {
	Schema        string        `json:"schema"`
	SchemaVersion int           `json:"schema_version"`
	Created       time.Time     `json:"created"`
	Machine       eval.Machine  `json:"machine"`
	Revision      eval.Revision `json:"revision"`
	Quick         bool          `json:"quick"`
	Config        tiersConfig   `json:"config"`
	// Disk describes where the disk tier and its limit file lived and
	// where their reads came from.
	Disk        tiersDisk        `json:"disk"`
	Rows        []tiersRow       `json:"rows"`
	Adapter     []tiersAdapter   `json:"adapter"`
	Targets     []tiersTarget    `json:"targets"`
	WallSeconds float64          `json:"wall_seconds"`
	Notes       []string         `json:"notes"`
	Workers     tiersWorkersInfo `json:"workers"`
	// Chat is the chat workload with 0, 1 and 2 tiers; nil in documents
	// written before it was measured, and with -chat=false.
	Chat *tiersChat `json:"chat,omitempty"`
}

type tiersConfig struct {
	CellSeconds float64 `json:"cell_seconds"`
	MinPairs    int     `json:"min_pairs"`
	RegionBytes int     `json:"region_bytes"`
	BatchBytes  int     `json:"batch_bytes"`
	BlockSizes  []int   `json:"block_sizes"`
	Sync        bool    `json:"sync"`
	Direct      bool    `json:"direct,omitempty"` // -direct: O_DIRECT asked for
	Seed        uint64  `json:"seed"`
}

type tiersWorkersInfo struct {
	// Copy is the tier.Manager's copy workers (0: its default).
	Copy int `json:"copy"`
	// Default is what the default is on this machine.
	Default int `json:"default"`
}

type tiersDisk struct {
	Dir        string `json:"dir"`
	TempDir    bool   `json:"temp_dir"`
	FileSystem string `json:"file_system"`
	// Stores: "buffered" (no sync) or "fsync per block".
	Stores string `json:"stores"`
	// PageCache: the reads may come from the page cache (the files were
	// written in this run and nothing was dropped; buffered I/O).
	PageCache bool `json:"page_cache"`
	// DirectIO: the tier's file and the limit file were open with
	// O_DIRECT (-direct, where the file system allows it): stores and
	// loads went to the device.
	DirectIO bool `json:"direct_io,omitempty"`
}

// tiersRow is one tier, operation and block size, with its limit.
type tiersRow struct {
	Tier       string `json:"tier"` // host or disk
	Op         string `json:"op"`   // store or load
	BlockBytes int    `json:"block_bytes"`
	// Limit names what the tier is set beside: memmove, pwrite,
	// pwrite+fsync or pread.
	Limit string `json:"limit"`
	// Latency: jobs of one block; Bandwidth: jobs of BatchBytes (the
	// same samples as Latency for 2 MiB blocks).
	Latency   tiersPart `json:"latency"`
	Bandwidth tiersPart `json:"bandwidth"`
}

// tiersPart is one interleaved measurement: pairs of a tier job and the
// limit doing the same bytes, in a random order per pair.
type tiersPart struct {
	Blocks int       `json:"blocks"` // per job
	Pairs  int       `json:"pairs"`
	Tier   tiersSide `json:"tier"`
	Limit  tiersSide `json:"limit"`
	// Ratio is the tier's speed over the limit's: per pair, the limit's
	// time over the tier's; the median over pairs, with a 99 %
	// distribution-free interval.
	Ratio tiersRatio `json:"ratio"`
}

type tiersSide struct {
	MedianNS float64 `json:"median_ns"`
	P99NS    float64 `json:"p99_ns"`
	// GBps is the job's bytes over the median time, in 10^9 bytes/s.
	GBps float64 `json:"gbps"`
}

type tiersRatio struct {
	Median float64 `json:"median"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// tiersAdapter is ADR-006's adapter-sized object loaded from a tier.
type tiersAdapter struct {
	Tier       string    `json:"tier"`
	Class      string    `json:"class"` // warm (host) or cold (disk)
	Bytes      int       `json:"bytes"`
	BlockBytes int       `json:"block_bytes"`
	Objects    int       `json:"objects"` // loaded in turn
	Limit      string    `json:"limit"`
	Load       tiersPart `json:"load"`
}

// tiersTarget is one target judged on the run; a missed target is
// reported, never an error.
type tiersTarget struct {
	Name       string     `json:"name"`
	Tier       string     `json:"tier"`
	Op         string     `json:"op"`
	BlockBytes int        `json:"block_bytes"`
	Measure    string     `json:"measure"` // median_load_ns or bandwidth_ratio
	Want       tiersBound `json:"want"`
	Got        float64    `json:"got"`
	Status     string     `json:"status"` // met, missed, or undecided (a ratio's interval straddles the bar)
	Met        bool       `json:"met"`
	Detail     string     `json:"detail"`
}

type tiersBound struct {
	Op    string  `json:"op"` // "<" or ">="
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "ns" or "×"
}

// tiersOptions is a checked configuration.
type tiersOptions struct {
	dir      string // "" for a temporary directory
	sync     bool
	direct   bool
	cellTime time.Duration
	minPairs int
	region   int // bytes
	workers  int
	seed     uint64
	quick    bool
	chat     bool
	progress func(eval.Progress)
}

func runTiers(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval tiers", `Usage: locus-eval tiers [flags]

The offload tiers beside this machine's limits, measured in one process: per tier (host, disk), store and
load of 4 KiB, 64 KiB, 512 KiB and 2 MiB blocks through a tier.Manager (Store or Load, then Drain until
the job is reported: the real path, copies on the tier's workers), latency (jobs of one block: median, p99)
and GB/s (jobs of 2 MiB), beside the limit measured on the same machine: memmove for the host tier,
sequential pwrite/pread of a file of the same size in the same directory for the disk tier. Each tier job
and its limit alternate in a random order many times; the ratio is the median over pairs of the per-pair
ratio. Then ADR-006's targets for an adapter-sized object (16 MiB as 8 blocks of 2 MiB, one Load job):
warm (host) under 1 ms, cold (disk) under 10 ms; and the issue's bars: the host tier at least 80 % of
memmove, the disk tier at least 70 % of the file's bandwidth, at 512 KiB blocks. Missed targets are
printed, not errors. Reads are buffered: they come from the page cache (nothing is dropped), unless
-direct opens the tier's file and the limit file with O_DIRECT, so that both go to the device.
Then the chat workload (bench's chat trace) through a kv.Manager whose hot pool holds the live requests
but not every conversation, with 0, 1 (host) and 2 (host, disk) tiers, the last with direct and staged
promotion: prefix-hit tokens, tokens not recomputed, bytes moved per tier, time per trace (-chat=false: skip).
About 30 s on 2 cores (-quick: a smoke test of about 2 s whose figures mean nothing).

Flags:
`, stderr)
	dir := fs.String("dir", "", "directory for the disk tier's files (default: a new temporary directory); a subdirectory is made there and removed after")
	syncWrites := fs.Bool("sync", false, "disk stores fsync every block (the tier: disk.WithSyncWrites; the limit: pwrite, then fsync)")
	direct := fs.Bool("direct", false, "the disk tier and its limit file use O_DIRECT (disk.WithDirectIO) in the store, load and adapter parts: the page cache is bypassed; where the file system refuses O_DIRECT (tmpfs before Linux 6.6) both stay buffered and the output says so (the chat replay stays buffered)")
	cellTime := fs.Duration("cell-time", defaultCellTime, fmt.Sprintf("time per measured part (-quick: %v); %v to %v", quickCellTime, minCellTime, maxCellTime))
	region := fs.Int("region-mib", defaultRegionMiB, fmt.Sprintf("MiB of each tier and of its limit's region or file (-quick: %d); %d to %d", quickRegionMiB, minRegionMiB, maxRegionMiB))
	workers := fs.Int("workers", 0, fmt.Sprintf("copy workers of each tier.Manager (0: the tier's default, min(GOMAXPROCS, 4)); 0 to %d", maxTierWorkers))
	seed := fs.Uint64("seed", 1, "seed of the order within each pair")
	asJSON := fs.Bool("json", false, "print the JSON document (schema "+tiersSchema+") instead of the tables")
	quick := fs.Bool("quick", false, "tiny parts and regions: a smoke test of a few seconds whose figures mean nothing")
	quiet := fs.Bool("q", false, "no progress on stderr")
	chat := fs.Bool("chat", true, "also replay the chat trace through a hot pool too small for it, with 0, 1 (host) and 2 (host, disk) tiers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o := tiersOptions{dir: *dir, sync: *syncWrites, direct: *direct, cellTime: *cellTime, minPairs: defaultMinPairs, region: *region << 20,
		workers: *workers, seed: *seed, quick: *quick, chat: *chat}
	var errs []error
	if flagSet(fs, "cell-time") && (*cellTime < minCellTime || *cellTime > maxCellTime) {
		errs = append(errs, fmt.Errorf("%w: -cell-time %v; want %v to %v", eval.ErrConfig, *cellTime, minCellTime, maxCellTime))
	}
	if flagSet(fs, "region-mib") && (*region < minRegionMiB || *region > maxRegionMiB) {
		errs = append(errs, fmt.Errorf("%w: -region-mib %d; want %d to %d", eval.ErrConfig, *region, minRegionMiB, maxRegionMiB))
	}
	if *workers < 0 || *workers > maxTierWorkers {
		errs = append(errs, fmt.Errorf("%w: -workers %d; want 0 to %d", eval.ErrConfig, *workers, maxTierWorkers))
	}
	if err := checkDir(o.dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if *quick {
		o.minPairs = quickMinPairs
		if !flagSet(fs, "cell-time") {
			o.cellTime = quickCellTime
		}
		if !flagSet(fs, "region-mib") {
			o.region = quickRegionMiB << 20
		}
	}
	var finish func(seconds float64)
	o.progress, finish = progressTo(stderr, *quiet)
	doc, err := measureTiers(o)
	if err != nil {
		finish(-1)
		return err
	}
	finish(doc.WallSeconds)
	if *asJSON {
		return writeJSON(stdout, doc)
	}
	return writeTiers(stdout, doc)
}

// measureTiers runs the whole measurement. A setup error (the directory,
// memory) is a configuration error; a tier that fails a copy, or loads
// bytes other than those stored, fails the run (errFailed).
func measureTiers(o tiersOptions) (*tiersDoc, error) {
	start := time.Now()
	doc := &tiersDoc{Schema: tiersSchema, SchemaVersion: tiersSchemaVersion, Created: start.UTC(), Machine: eval.ThisMachine(),
		Revision: eval.ThisRevision(), Quick: o.quick,
		Config: tiersConfig{CellSeconds: o.cellTime.Seconds(), MinPairs: o.minPairs, RegionBytes: o.region, BatchBytes: tiersBatchBytes,
			BlockSizes: slices.Clone(tierBlockSizes), Sync: o.sync, Direct: o.direct, Seed: o.seed},
		Workers: tiersWorkersInfo{Copy: o.workers, Default: min(runtime.GOMAXPROCS(0), 4)}}
	base, made := o.dir, o.dir == ""
	dir, err := os.MkdirTemp(base, "locus-tiers-")
	if err != nil {
		if made {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
		return nil, fmt.Errorf("%w: -dir %s: %w", eval.ErrConfig, base, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	doc.Disk = tiersDisk{Dir: base, TempDir: made, FileSystem: fileSystemOf(dir), Stores: "buffered, no fsync", PageCache: true}
	if made {
		doc.Disk.Dir = filepath.Dir(dir)
	}
	if o.sync {
		doc.Disk.Stores = "fsync after every block"
	}
	b := newTiersBench(o, dir)
	for _, kind := range []string{"host", "disk"} {
		for _, bs := range tierBlockSizes {
			rows, err := b.measureRows(kind, bs)
			if err != nil {
				return nil, err
			}
			doc.Rows = append(doc.Rows, rows...)
		}
	}
	for _, kind := range []string{"host", "disk"} {
		a, err := b.measureAdapter(kind)
		if err != nil {
			return nil, err
		}
		doc.Adapter = append(doc.Adapter, a)
	}
	if b.directIO {
		doc.Disk.DirectIO, doc.Disk.PageCache = true, false
		doc.Disk.Stores = "O_DIRECT, no fsync"
		if o.sync {
			doc.Disk.Stores = "O_DIRECT, fsync after every block"
		}
	}
	if o.chat {
		if doc.Chat, err = measureChat(b); err != nil {
			return nil, err
		}
	}
	doc.Targets = tiersTargets(doc)
	doc.Notes = tiersNotes(doc)
	doc.WallSeconds = time.Since(start).Seconds()
	return doc, nil
}

// tiersBench holds what every part shares: the buffers, the order, the
// progress.
type tiersBench struct {
	o        tiersOptions
	directIO bool // the last disk rig's file took O_DIRECT
	dir      string
	rng      *rand.Rand
	src      []byte // BatchBytes of source blocks (cut per size)
	dst      []byte
	adapt    []byte // the adapter object's destination
	start    time.Time
	done     int
	total    int
}

func newTiersBench(o tiersOptions, dir string) *tiersBench {
	b := &tiersBench{o: o, dir: dir, rng: rand.New(rand.NewPCG(o.seed, 0x7469657273)), start: time.Now()}
	buf := make([]byte, tiersBatchBytes)
	fill := rand.New(rand.NewPCG(o.seed, 1))
	for i := 0; i+8 <= len(buf); i += 8 {
		v := fill.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	b.src = buf
	b.dst = make([]byte, tiersBatchBytes)
	b.adapt = make([]byte, adapterBytes)
	// Parts: per tier and size, load and store latency, and bandwidth
	// where a batch holds more than one block; then one adapter part
	// per tier.
	for _, kind := range []string{"host", "disk"} {
		for _, bs := range tierBlockSizes {
			b.total += 2
			if tiersBatchBytes/bs > 1 {
				b.total++ // load
				if kind == "host" || !o.sync {
					b.total++ // store
				}
			}
		}
		b.total++
	}
	if o.chat {
		b.total += chatRuns
	}
	return b
}

// blocksOf cuts buf into n blocks of bs bytes.
func blocksOf(buf []byte, bs, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = buf[i*bs : (i+1)*bs : (i+1)*bs]
	}
	return out
}

// regionSlots is the slots of a tier of bs-byte blocks in the region:
// at least enough for two batches.
func (b *tiersBench) regionSlots(bs int) int {
	return max(b.o.region/bs, 2*max(1, tiersBatchBytes/bs))
}

// measureRows measures one tier at one block size: loads of the blocks a
// prefill stored, then stores of new blocks (each evicting one). It
// returns the store row, then the load row.
func (b *tiersBench) measureRows(kind string, bs int) ([]tiersRow, error) {
	r, err := b.newRig(kind, bs, b.regionSlots(bs))
	if err != nil {
		return nil, err
	}
	defer r.close()
	batch := max(1, tiersBatchBytes/bs)
	srcs := blocksOf(b.src, bs, batch)
	dsts := blocksOf(b.dst, bs, batch)
	if err := r.prefill(srcs); err != nil {
		return nil, err
	}
	row := tiersRow{Tier: kind, BlockBytes: bs}
	loadRow, storeRow := row, row
	loadRow.Op, storeRow.Op = "load", "store"
	loadRow.Limit, storeRow.Limit = r.limitName(false), r.limitName(true)
	name := func(op string, n int) string {
		s := fmt.Sprintf("%s %s %s", kind, op, sizeName(bs))
		if n > 1 {
			s += " ×" + strconv.Itoa(n)
		}
		return s
	}
	if loadRow.Latency, err = b.part(name("load", 1), bs, r.loadOps(dsts[:1], srcs)); err != nil {
		return nil, err
	}
	loadRow.Bandwidth = loadRow.Latency
	if batch > 1 {
		if loadRow.Bandwidth, err = b.part(name("load", batch), bs, r.loadOps(dsts, srcs)); err != nil {
			return nil, err
		}
	}
	if storeRow.Latency, err = b.part(name("store", 1), bs, r.storeOps(srcs[:1])); err != nil {
		return nil, err
	}
	storeRow.Bandwidth = storeRow.Latency
	if batch > 1 && !r.sync {
		if storeRow.Bandwidth, err = b.part(name("store", batch), bs, r.storeOps(srcs)); err != nil {
			return nil, err
		}
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return []tiersRow{storeRow, loadRow}, nil
}

// measureAdapter loads ADR-006's adapter-sized object from a tier of 2 MiB
// blocks, in turn over the objects that fit in the region.
func (b *tiersBench) measureAdapter(kind string) (tiersAdapter, error) {
	per := adapterBytes / adapterBlockBytes
	objects := max(adapterMinObjects, b.o.region/adapterBytes)
	r, err := b.newRig(kind, adapterBlockBytes, objects*per)
	if err != nil {
		return tiersAdapter{}, err
	}
	defer r.close()
	srcs := blocksOf(b.src, adapterBlockBytes, tiersBatchBytes/adapterBlockBytes)
	if err := r.prefill(srcs); err != nil {
		return tiersAdapter{}, err
	}
	a := tiersAdapter{Tier: kind, Class: "warm", Bytes: adapterBytes, BlockBytes: adapterBlockBytes, Objects: objects, Limit: r.limitName(false)}
	if kind == "disk" {
		a.Class = "cold"
	}
	a.Load, err = b.part(fmt.Sprintf("%s adapter 16 MiB", kind), adapterBlockBytes, r.loadOps(blocksOf(b.adapt, adapterBlockBytes, per), srcs))
	if err != nil {
		return tiersAdapter{}, err
	}
	return a, r.check()
}

// timedOp is one job of a part: it runs and returns how long it took.
type timedOp func() (time.Duration, error)

// partOps are a part's two sides and the check run after it.
type partOps struct {
	blocks       int
	tier, limit  timedOp
	afterEachJob func() error // untimed, after each tier job
	verify       func() error // untimed, after the part
}

// part runs one interleaved measurement: a few untimed pairs, then pairs
// until the part's time is spent and at least minPairs were timed.
func (b *tiersBench) part(name string, bs int, ops partOps) (tiersPart, error) {
	b.progress(name)
	runtime.GC()
	var tierNS, limitNS []float64
	run := func(timed bool) error {
		tierFirst := b.rng.IntN(2) == 0
		var dt, dl time.Duration
		var err error
		for i := range 2 {
			if (i == 0) == tierFirst {
				if dt, err = ops.tier(); err != nil {
					return fmt.Errorf("%w: %s: %w", errFailed, name, err)
				}
				if ops.afterEachJob != nil {
					if err := ops.afterEachJob(); err != nil {
						return fmt.Errorf("%w: %s: %w", errFailed, name, err)
					}
				}
			} else if dl, err = ops.limit(); err != nil {
				return fmt.Errorf("%s: limit: %w", name, err)
			}
		}
		if timed {
			tierNS = append(tierNS, float64(dt))
			limitNS = append(limitNS, float64(dl))
		}
		return nil
	}
	for range warmupPairs {
		if err := run(false); err != nil {
			return tiersPart{}, err
		}
	}
	start := time.Now()
	for len(tierNS) < maxPairs {
		el := time.Since(start)
		if len(tierNS) >= b.o.minPairs && el >= b.o.cellTime {
			break
		}
		// A part whose jobs are very slow (-sync) stops with fewer pairs.
		if len(tierNS) >= 3 && el >= 10*b.o.cellTime {
			break
		}
		if err := run(true); err != nil {
			return tiersPart{}, err
		}
	}
	if ops.verify != nil {
		if err := ops.verify(); err != nil {
			return tiersPart{}, fmt.Errorf("%w: %s: %w", errFailed, name, err)
		}
	}
	b.done++
	return summarize(ops.blocks*bs, tierNS, limitNS, ops.blocks), nil
}

func (b *tiersBench) progress(name string) {
	if b.o.progress == nil {
		return
	}
	el := time.Since(b.start)
	eta := time.Duration(-1)
	if b.done > 0 {
		eta = el / time.Duration(b.done) * time.Duration(b.total-b.done)
	}
	b.o.progress(eval.Progress{Process: 1, Processes: 1, Done: b.done, Total: b.total, Group: name, Elapsed: el, ETA: eta})
}

// summarize turns a part's paired times into its statistics.
func summarize(bytes int, tierNS, limitNS []float64, blocks int) tiersPart {
	p := tiersPart{Blocks: blocks, Pairs: len(tierNS), Tier: sideOf(bytes, tierNS), Limit: sideOf(bytes, limitNS)}
	ratios := make([]float64, len(tierNS))
	for i := range tierNS {
		ratios[i] = limitNS[i] / math.Max(tierNS[i], 1)
	}
	p.Ratio = medianInterval(ratios)
	return p
}

func sideOf(bytes int, ns []float64) tiersSide {
	s := slices.Clone(ns)
	slices.Sort(s)
	m := eval.Median(s)
	return tiersSide{MedianNS: m, P99NS: eval.Percentile(s, 0.99), GBps: float64(bytes) / math.Max(m, 1)}
}

// medianInterval is eval.MedianInterval in the document's form.
func medianInterval(xs []float64) tiersRatio {
	iv := eval.MedianInterval(xs)
	return tiersRatio{Median: iv.Point, Lo: iv.Lo, Hi: iv.Hi}
}

// A rig is one tier (a tier.Manager over host memory or a disk file) and
// its limit: a twin host region of the same rows, or a file of the same
// size in the same directory.
type rig struct {
	kind    string
	bs      int
	slots   int
	m       *tier.Manager
	twin    *host.Tier // host: memmove's rows
	f       *os.File   // disk: the limit file
	size    int64      // its size: the tier file's
	sync    bool
	limCur  int // next limit row, or block of the file
	seq     uint64
	keys    []tier.Key // the prefilled keys, in slot order
	srcOf   []int      // which source block each holds
	loadCur int
	done    []tier.Done
	events  []tier.Event
	files   []string
}

func (b *tiersBench) newRig(kind string, bs, slots int) (r *rig, err error) {
	r = &rig{kind: kind, bs: bs, slots: slots, sync: b.o.sync && kind == "disk"}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	var opts []tier.Option
	if b.o.workers > 0 {
		opts = append(opts, tier.WithWorkers(b.o.workers))
	}
	var st tier.Storage
	switch kind {
	case "host":
		hs, err := host.New(bs, slots, host.WithPrefault())
		if err != nil {
			return nil, fmt.Errorf("host tier of %d × %s: %w", slots, sizeName(bs), err)
		}
		st = hs
		if r.twin, err = host.New(bs, slots, host.WithPrefault()); err != nil {
			_ = hs.Close()
			return nil, fmt.Errorf("memmove region of %d × %s: %w", slots, sizeName(bs), err)
		}
	case "disk":
		path := filepath.Join(b.dir, fmt.Sprintf("tier-%d.dat", bs))
		lpath := filepath.Join(b.dir, fmt.Sprintf("limit-%d.dat", bs))
		r.files = []string{path, lpath}
		var dopts []disk.Option
		if r.sync {
			dopts = append(dopts, disk.WithSyncWrites())
		}
		if b.o.direct {
			dopts = append(dopts, disk.WithDirectIO())
		}
		ds, err := disk.Open(path, bs, slots, dopts...)
		if err != nil {
			return nil, fmt.Errorf("disk tier of %d × %s: %w", slots, sizeName(bs), err)
		}
		st = ds
		// The limit gets what the tier got: O_DIRECT where the file
		// system took it for the tier's file, else buffered I/O.
		b.directIO = ds.DirectIO()

		fi, err := os.Stat(path)
		if err != nil {
			_ = ds.Close()
			return nil, err
		}
		r.size = fi.Size()
		if r.f, _, err = disk.OpenFile(lpath, b.directIO); err != nil {
			_ = ds.Close()
			return nil, fmt.Errorf("limit file: %w", err)
		}
		if err := r.f.Truncate(r.size); err != nil { // sparse, as the tier's file
			_ = ds.Close()
			return nil, fmt.Errorf("limit file: %w", err)
		}
	}
	if r.m, err = tier.New(st, opts...); err != nil {
		_ = st.Close()
		return nil, err
	}
	return r, nil
}

func (r *rig) close() {
	if r.m != nil {
		_ = r.m.Close()
	}
	if r.twin != nil {
		_ = r.twin.Close()
	}
	if r.f != nil {
		_ = r.f.Close()
	}
	for _, p := range r.files {
		_ = os.Remove(p)
	}
}

// check asks the manager for its accounting and its copy guards.
func (r *rig) check() error {
	if err := r.m.Check(); err != nil {
		return fmt.Errorf("%w: %s tier: %w", errFailed, r.kind, err)
	}
	return nil
}

func (r *rig) limitName(store bool) string {
	switch {
	case r.kind == "host":
		return "memmove"
	case store && r.sync:
		return "pwrite+fsync"
	case store:
		return "pwrite"
	}
	return "pread"
}

func (r *rig) nextKeys(n int) []tier.Key {
	keys := make([]tier.Key, n)
	var h [8]byte
	for i := range keys {
		r.seq++
		for j := range h {
			h[j] = byte(r.seq >> (8 * j))
		}
		keys[i] = tier.KeyOf(h[:], 0)
	}
	return keys
}

// wait drains until job j is reported, and fails unless it went well.
func (r *rig) wait(j tier.Job) error {
	var deadline time.Time
	for spins := 0; ; spins++ {
		var err error
		if r.done, err = r.m.Drain(r.done[:0]); err != nil {
			return err
		}
		for _, d := range r.done {
			if d.Job != j {
				return fmt.Errorf("drain reported job %v, waiting for %v", d.Job, j)
			}
			if !d.OK {
				return fmt.Errorf("job %v failed at block %d: %v", j, d.Failed, d.Err)
			}
			return nil
		}
		// Yield so that a worker sharing this P (GOMAXPROCS=1) runs.
		runtime.Gosched()
		if spins%4096 == 4095 {
			if deadline.IsZero() {
				deadline = time.Now().Add(tierWaitLimit)
			} else if time.Now().After(deadline) {
				return fmt.Errorf("job %v not done after %v", j, tierWaitLimit)
			}
		}
	}
}

// store stores srcs under new keys and waits for the job.
func (r *rig) store(srcs [][]byte) ([]tier.Key, error) {
	keys := r.nextKeys(len(srcs))
	plan, err := r.m.Store(keys, srcs)
	if err != nil {
		return nil, err
	}
	if len(plan.Keys) != len(keys) {
		return nil, fmt.Errorf("stored %d of %d blocks (%d skipped, %d not admitted)", len(plan.Keys), len(keys), plan.Skipped, plan.NotAdmitted)
	}
	return keys, r.wait(plan.Job)
}

// prefill fills every slot of the tier, in slot order, cycling through
// srcs, and writes the whole limit region or file once, so that both sides
// run over written, allocated blocks.
func (r *rig) prefill(srcs [][]byte) error {
	for len(r.keys) < r.slots {
		n := min(len(srcs), r.slots-len(r.keys))
		keys, err := r.store(srcs[:n])
		if err != nil {
			return fmt.Errorf("%w: %s tier prefill: %w", errFailed, r.kind, err)
		}
		for i := range keys {
			r.keys = append(r.keys, keys[i])
			r.srcOf = append(r.srcOf, i)
		}
		r.events = r.m.TakeEvents(r.events[:0])
	}
	if r.twin != nil {
		for i := range r.slots {
			copy(r.twin.Slot(i), srcs[i%len(srcs)])
		}
	}
	if r.f != nil {
		for off := int64(0); off < r.size; {
			b := srcs[0]
			if rest := r.size - off; rest < int64(len(b)) {
				b = b[:rest]
			}
			if _, err := r.f.WriteAt(b, off); err != nil {
				return fmt.Errorf("limit file: %w", err)
			}
			off += int64(len(b))
		}
		if err := r.f.Sync(); err != nil {
			return fmt.Errorf("limit file: %w", err)
		}
	}
	return nil
}

// limitNext returns the limit's next row (host) or block of the file
// (disk): sequential, wrapping around.
func (r *rig) limitNext() int {
	i := r.limCur
	r.limCur++
	if r.kind == "host" {
		if r.limCur >= r.slots {
			r.limCur = 0
		}
		return i
	}
	if int64(r.limCur+1)*int64(r.bs) > r.size {
		r.limCur = 0
	}
	return i
}

// loadOps loads len(dsts) prefilled blocks per job, in turn over the
// tier's blocks; the limit reads as many blocks from its region or file.
// After the part, the last job's bytes are checked against the sources.
func (r *rig) loadOps(dsts, srcs [][]byte) partOps {
	n := len(dsts)
	var last []int
	ops := partOps{blocks: n}
	ops.tier = func() (time.Duration, error) {
		if r.loadCur+n > len(r.keys) {
			r.loadCur = 0
		}
		keys := r.keys[r.loadCur : r.loadCur+n]
		last = r.srcOf[r.loadCur : r.loadCur+n]
		r.loadCur += n
		t0 := time.Now()
		j, err := r.m.Load(keys, dsts)
		if err == nil {
			err = r.wait(j)
		}
		return time.Since(t0), err
	}
	ops.limit = r.limitLoad(dsts)
	ops.verify = func() error {
		if _, err := ops.tier(); err != nil {
			return err
		}
		for i, d := range dsts {
			if !bytes.Equal(d, srcs[last[i]]) {
				return fmt.Errorf("loaded block %d differs from the block stored", i)
			}
		}
		return nil
	}
	return ops
}

func (r *rig) limitLoad(dsts [][]byte) timedOp {
	if r.kind == "host" {
		return func() (time.Duration, error) {
			t0 := time.Now()
			for _, d := range dsts {
				copy(d, r.twin.Slot(r.limitNext()))
			}
			return time.Since(t0), nil
		}
	}
	return func() (time.Duration, error) {
		t0 := time.Now()
		for _, d := range dsts {
			if _, err := r.f.ReadAt(d, int64(r.limitNext())*int64(r.bs)); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
}

// storeOps stores srcs under new keys per job, each evicting the least
// recently used block; the limit writes as many blocks into its region or
// file.
func (r *rig) storeOps(srcs [][]byte) partOps {
	ops := partOps{blocks: len(srcs)}
	ops.tier = func() (time.Duration, error) {
		t0 := time.Now()
		_, err := r.store(srcs)
		return time.Since(t0), err
	}
	ops.afterEachJob = func() error {
		r.events = r.m.TakeEvents(r.events[:0])
		return nil
	}
	if r.kind == "host" {
		ops.limit = func() (time.Duration, error) {
			t0 := time.Now()
			for _, s := range srcs {
				copy(r.twin.Slot(r.limitNext()), s)
			}
			return time.Since(t0), nil
		}
		return ops
	}
	ops.limit = func() (time.Duration, error) {
		t0 := time.Now()
		for _, s := range srcs {
			if _, err := r.f.WriteAt(s, int64(r.limitNext())*int64(r.bs)); err != nil {
				return 0, err
			}
			if r.sync {
				if err := r.f.Sync(); err != nil {
					return 0, err
				}
			}
		}
		return time.Since(t0), nil
	}
	return ops
}

// tiersTargets judges ADR-006's adapter targets and the bandwidth
// bars.
func tiersTargets(d *tiersDoc) []tiersTarget {
	var ts []tiersTarget
	for _, a := range d.Adapter {
		bound := warmTargetNS
		if a.Tier == "disk" {
			bound = coldTargetNS
		}
		got := a.Load.Tier.MedianNS
		t := tiersTarget{Name: fmt.Sprintf("ADR-006: %s (%s) load of a 16 MiB adapter < %s", a.Class, a.Tier, eval.FmtNS(bound)),
			Tier: a.Tier, Op: "load", BlockBytes: a.BlockBytes, Measure: "median_load_ns",
			Want: tiersBound{Op: "<", Value: bound, Unit: "ns"}, Got: got, Met: got < bound,
			Detail: fmt.Sprintf("median %s, p99 %s; %s of the same 16 MiB: median %s", eval.FmtNS(got), eval.FmtNS(a.Load.Tier.P99NS), a.Limit, eval.FmtNS(a.Load.Limit.MedianNS))}
		ts = append(ts, t)
	}
	for _, row := range d.Rows {
		if row.BlockBytes != barBlockBytes {
			continue
		}
		bar := hostBar
		what := "memmove"
		if row.Tier == "disk" {
			bar, what = diskBar, "sequential "+row.Limit
		}
		r := row.Bandwidth.Ratio
		t := tiersTarget{Name: fmt.Sprintf("%s %s ≥ %.0f %% of %s's GB/s at %s blocks", row.Tier, row.Op, 100*bar, what, sizeName(row.BlockBytes)),
			Tier: row.Tier, Op: row.Op, BlockBytes: row.BlockBytes, Measure: "bandwidth_ratio",
			Want: tiersBound{Op: ">=", Value: bar, Unit: "×"}, Got: r.Median, Met: r.Lo >= bar,
			Detail: fmt.Sprintf("%.2f, 99 %% interval [%.2f, %.2f] over %d pairs", r.Median, r.Lo, r.Hi, row.Bandwidth.Pairs)}
		// A ratio is judged on its interval, as on the scoreboard:
		// undecided while it straddles the bar.
		t.Status = "missed"
		switch {
		case t.Met:
			t.Status = "met"
		case r.Hi >= bar:
			t.Status = "undecided"
		}
		ts = append(ts, t)
	}
	for i := range ts {
		if ts[i].Status == "" {
			ts[i].Status = "missed"
			if ts[i].Met {
				ts[i].Status = "met"
			}
		}
	}
	return ts
}

func tiersNotes(d *tiersDoc) []string {
	notes := []string{
		"latency: a job of one block, from the Store or Load call to the Drain that reports it (the owner polls Drain, yielding between polls); it includes waking a copy worker",
		fmt.Sprintf("GB/s: a job of %s (as many blocks as fit), 10^9 bytes/s of the median job; the ratio is the tier's speed over the limit's, the median over pairs of limit time / tier time", sizeName(tiersBatchBytes)),
		"host limit: memmove (Go copy) on the owner goroutine between the same source or destination buffers and a second region of the same rows (mapped, prefaulted, written); the tier's copy runs on a worker goroutine, maybe on another core: what that costs in caches is the tier's",
		"disk limit: pwrite/pread of the same blocks at sequential offsets of a file of the tier file's size in the same directory; the tier also writes a " + strconv.Itoa(disk.HeaderSize) + "-byte header per block (in a page after the payload, one pwritev/preadv per block) and checksums every block (XXH3)",
	}
	switch {
	case d.Disk.DirectIO:
		notes = append(notes, "-direct: the disk tier's file and the limit file are open with O_DIRECT: stores and loads go to the device, not the page cache; the tier moves page-aligned blocks with no copy")
	case d.Config.Direct:
		notes = append(notes, "-direct was asked, but this file system refuses O_DIRECT: the disk tier and the limit are buffered, and reads come from the page cache")
	default:
		notes = append(notes, "disk reads are buffered and come from the page cache: the files were written in this run and nothing was dropped; a read from the device would be slower")
	}
	if len(d.Adapter) > 0 {
		notes = append(notes, fmt.Sprintf("adapter: 16 MiB as %d blocks of %s in one Load job, loaded in turn from %d such object(s) in the tier",
			adapterBytes/adapterBlockBytes, sizeName(adapterBlockBytes), d.Adapter[0].Objects))
	}
	if d.Chat != nil {
		notes = append(notes, "chat: prefix hits are the prompt tokens found in the hot pool or a tier; not recomputed: the hot hits and the blocks loaded from a tier (a hit whose load failed is recomputed); "+
			"in/out: bytes stored into a tier (write-through of every block cached) / loaded from it; the copies are drained to completion every step, so the counts do not depend on their timing")
	}
	if d.Config.Sync {
		notes = append(notes, "-sync: disk stores fsync after every block, so their GB/s is timed on jobs of one block (the latency jobs)")
	}
	return notes
}

// writeTiers prints the document as tables.
func writeTiers(w io.Writer, d *tiersDoc) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Tiers: store and load through tier.Manager beside this machine's limits — %s\n", d.Machine)
	if det := d.Machine.Details(); det != "" {
		fmt.Fprintf(bw, "host: %s\n", det)
	}
	rev := "revision " + d.Revision.VCS
	if len(d.Revision.VCS) > 12 {
		rev = "revision " + d.Revision.VCS[:12]
	}
	if d.Revision.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(bw, "%s; 1 process; %s; %v per part, at least %d pairs; region %s per tier", rev,
		time.Duration(d.WallSeconds*1e9).Round(100*time.Millisecond), time.Duration(d.Config.CellSeconds*1e9), d.Config.MinPairs, sizeName(d.Config.RegionBytes))
	if d.Quick {
		fmt.Fprint(bw, "; QUICK (smoke test: the figures mean nothing)")
	}
	fmt.Fprintln(bw)
	fs := d.Disk.FileSystem
	if fs == "" {
		fs = "file system unknown"
	}
	tmp := ""
	if d.Disk.TempDir {
		tmp = ", temporary"
	}
	reads := "reads from the page cache (nothing dropped)"
	if d.Disk.DirectIO {
		reads = "reads O_DIRECT too: the page cache is bypassed"
	}
	fmt.Fprintf(bw, "disk: %s (%s%s); stores %s; %s\n", d.Disk.Dir, fs, tmp, d.Disk.Stores, reads)
	workers := fmt.Sprintf("the default, %d", d.Workers.Default)
	if d.Workers.Copy > 0 {
		workers = strconv.Itoa(d.Workers.Copy)
	}
	fmt.Fprintf(bw, "copy workers per tier: %s\n", workers)
	fmt.Fprintf(bw, "latency: jobs of one block; GB/s and tier/limit: jobs of %s; pairs: of one-block jobs / of %s jobs\n\n",
		sizeName(d.Config.BatchBytes), sizeName(d.Config.BatchBytes))

	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "tier\top\tblock\tlatency p50\tp99\tlimit\tp50\tp99\tGB/s\tlimit GB/s\ttier/limit\t99 % interval\tpairs\t\n")
	for _, r := range d.Rows {
		b := r.Bandwidth
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t[%.2f, %.2f]\t%d/%d\t\n",
			r.Tier, r.Op, sizeName(r.BlockBytes), eval.FmtNS(r.Latency.Tier.MedianNS), eval.FmtNS(r.Latency.Tier.P99NS), r.Limit,
			eval.FmtNS(r.Latency.Limit.MedianNS), eval.FmtNS(r.Latency.Limit.P99NS), b.Tier.GBps, b.Limit.GBps, b.Ratio.Median, b.Ratio.Lo, b.Ratio.Hi,
			r.Latency.Pairs, b.Pairs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(bw, "\nADR-006 adapter-sized object: 16 MiB as %d × %s blocks, one Load job\n\n", adapterBytes/adapterBlockBytes, sizeName(adapterBlockBytes))
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "tier\tclass\tload p50\tp99\tlimit\tp50\tp99\ttier/limit\tpairs\t\n")
	for _, a := range d.Adapter {
		l := a.Load
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%d\t\n", a.Tier, a.Class, eval.FmtNS(l.Tier.MedianNS), eval.FmtNS(l.Tier.P99NS),
			a.Limit, eval.FmtNS(l.Limit.MedianNS), eval.FmtNS(l.Limit.P99NS), l.Ratio.Median, l.Pairs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.Chat != nil {
		if err := writeTiersChat(bw, d.Chat); err != nil {
			return err
		}
	}
	fmt.Fprintln(bw, "\nTargets (a missed target is reported, not an error):")
	for _, t := range d.Targets {
		fmt.Fprintf(bw, "  %-70s %-7s %s\n", t.Name, strings.ToUpper(t.Status), t.Detail)
	}
	fmt.Fprintln(bw, "\nNotes:")
	for _, n := range d.Notes {
		fmt.Fprintf(bw, "  - %s\n", n)
	}
	return bw.Flush()
}

// sizeName is e.g. "4 KiB" or "2 MiB".
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// fileSystemOf names the file system that holds dir, from the mount
// table ("" where the system has none): e.g. "ext4 on /dev/vda".
func fileSystemOf(dir string) string {
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return ""
	}
	best, out := -1, ""
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			best, out = len(mp), f[2]+" on "+f[0]
		}
	}
	return out
}

// The chat workload with tiers: bench's chat trace (conversations sharing
// system prompts, every turn re-sending its history) through a kv.Manager
// whose hot pool holds the live requests but not every conversation,
// with no tier, a host tier, and a host tier in front of a disk tier.
const (
	chatBlockBytes = 4 << 10 // the pool's and the tiers' blocks
	chatHostShare  = 2       // the host tier holds 1/chatHostShare of the trace's distinct blocks
	chatHotMargin  = 4       // the hot pool: the live requests' peak, plus 1/chatHotMargin of it
	chatWaitLimit  = time.Minute
	chatThinkSteps = 2000 // most steps between a reply and the next turn
	defaultTraces  = 3
	quickTraces    = 1
	chatRuns       = 6 // the reference; 0, 1 and 2 tiers; 2 tiers with staged promotion; 1 tier by S3-FIFO
)

// tiersChat is the chat workload's section of the tiers document. It is
// absent from documents written before it, and with -chat=false.
type tiersChat struct {
	chatShape
	TokensPerBlock int    `json:"tokens_per_block"`
	Seed           uint64 `json:"seed"`
	Requests       int    `json:"requests"`
	Traces         int    `json:"traces"`
	BlockBytes     int    `json:"block_bytes"`
	// DistinctBlocks is the full blocks of distinct content the trace
	// caches: what a hot pool must hold to compute no block twice.
	DistinctBlocks int `json:"distinct_blocks"`
	// PeakLive is the most blocks the live requests hold at once.
	PeakLive   int            `json:"peak_live_blocks"`
	HotBlocks  int            `json:"hot_blocks"`
	HostBlocks int            `json:"host_blocks"`
	DiskBlocks int            `json:"disk_blocks"`
	Runs       []tiersChatRun `json:"runs"`
}

// tiersChatRun is the trace run once per configuration (the counts are
// the same every trace: copies are drained to completion every step).
type tiersChatRun struct {
	Name string `json:"name"`
	// Tiers is 0, 1 (host) or 2 (host, disk); Promotion names kv's
	// promotion of disk hits where there is a disk tier.
	Tiers     int    `json:"tiers"`
	HotBlocks int    `json:"hot_blocks"`
	Promotion string `json:"promotion,omitempty"`
	// Eviction is the tiers' eviction policy, "lru" or "s3-fifo".
	Eviction string `json:"eviction,omitempty"`
	// PromptTokens were admitted; HitTokens of them were found, in the
	// hot pool (HotHitTokens) or a tier (the tiers' HitTokens);
	// NotRecomputed is what the engine did not compute: the hot hits and
	// the blocks loaded from tiers; Recomputed the rest.
	PromptTokens  uint64 `json:"prompt_tokens"`
	HitTokens     uint64 `json:"hit_tokens"`
	HotHitTokens  uint64 `json:"hot_hit_tokens"`
	NotRecomputed uint64 `json:"not_recomputed_tokens"`
	Recomputed    uint64 `json:"recomputed_tokens"`
	Evictions     uint64 `json:"hot_evictions"`
	// PerTier is each tier's hits and the bytes moved into it (stores)
	// and out of it (loads).
	PerTier []tiersChatTier `json:"per_tier,omitempty"`
	// TraceMS is the median wall time of one trace, in milliseconds:
	// admissions, decode steps, and the copies drained every step.
	TraceMS float64 `json:"trace_ms"`
	// ReadyWaitMS is, of the same trace, the time admissions waited for
	// their tier loads (Drain until Ready): what promotion costs the
	// engine's time to first token, summed over the trace.
	ReadyWaitMS float64 `json:"ready_wait_ms"`
}

type tiersChatTier struct {
	Tier         string `json:"tier"` // host or disk
	HitTokens    uint64 `json:"hit_tokens"`
	LoadedBlocks uint64 `json:"loaded_blocks"`
	FailedBlocks uint64 `json:"failed_blocks"`
	StoredBlocks uint64 `json:"stored_blocks"`
	LoadedBytes  uint64 `json:"loaded_bytes"`
	StoredBytes  uint64 `json:"stored_bytes"`
}

// chatTrace is the trace the tiers subcommand replays: bench's default
// chat, or a small one for -quick.
func chatTrace(quick bool) bench.ChatConfig {
	cfg := bench.DefaultChat()
	// Users think long between turns, so that a conversation spends most
	// of its life idle, its history only cached: the live requests need
	// a fraction of the blocks the conversations cache.
	cfg.ThinkSteps = chatThinkSteps
	if quick {
		cfg.Conversations, cfg.Turns, cfg.SystemTokens, cfg.ReplyTokens, cfg.ThinkSteps = 12, 3, 128, 32, chatThinkSteps/4
	}
	return cfg
}

// chatSetup is one configuration of the chat workload.
type chatSetup struct {
	name      string
	hot       int
	tiers     []string // "host", "disk"
	promotion kv.Promotion
	s3fifo    bool // the tiers evict by S3-FIFO instead of LRU
}

// measureChat runs the chat trace with an unbounded hot pool (to size the
// others), then with a hot pool too small for every conversation and 0,
// 1 and 2 tiers.
func measureChat(b *tiersBench) (*tiersChat, error) {
	o := b.o
	cfg := chatTrace(o.quick)
	plan, err := bench.NewChatPlan(cfg)
	if err != nil {
		return nil, err
	}
	traces := defaultTraces
	if o.quick {
		traces = quickTraces
	}
	c := &tiersChat{chatShape: chatShapeOf(cfg), TokensPerBlock: cfg.BlockSize,
		Seed: cfg.Seed, Requests: len(plan.Requests), Traces: traces, BlockBytes: chatBlockBytes}
	ample := 1
	for _, r := range plan.Requests {
		ample += (len(r.Prompt) + len(r.Reply) + cfg.BlockSize - 1) / cfg.BlockSize
	}
	cr := &chatRunner{o: o, b: b, dir: b.dir, plan: plan, traces: traces}
	ref, err := cr.run(chatSetup{name: "hot pool holding every block (reference)", hot: ample})
	if err != nil {
		return nil, err
	}
	c.DistinctBlocks, c.PeakLive = cr.distinct, cr.peak
	c.HotBlocks = cr.peak + max(1, cr.peak/chatHotMargin)
	c.HostBlocks = max(1, c.DistinctBlocks/chatHostShare)
	c.DiskBlocks = max(1, c.DistinctBlocks)
	cr.hostBlocks, cr.diskBlocks = c.HostBlocks, c.DiskBlocks
	c.Runs = append(c.Runs, ref)
	for _, s := range []chatSetup{
		{name: "0 tiers", hot: c.HotBlocks},
		{name: "1 tier: host", hot: c.HotBlocks, tiers: []string{"host"}},
		{name: "2 tiers: host, disk", hot: c.HotBlocks, tiers: []string{"host", "disk"}},
		{name: "2 tiers: host, disk", hot: c.HotBlocks, tiers: []string{"host", "disk"}, promotion: kv.PromoteStaged},
		// The second eviction policy on the same trace: the host tier is
		// where the two differ (the disk tier holds every block).
		{name: "1 tier: host, S3-FIFO", hot: c.HotBlocks, tiers: []string{"host"}, s3fifo: true},
	} {
		r, err := cr.run(s)
		if err != nil {
			return nil, err
		}
		c.Runs = append(c.Runs, r)
	}
	return c, nil
}

// chatRunner replays the plan through kv.Managers.
type chatRunner struct {
	o                      tiersOptions
	b                      *tiersBench
	dir                    string
	plan                   *bench.ChatPlan
	traces                 int
	hostBlocks, diskBlocks int
	// Of the last run: the peak of blocks in use, the blocks cached, and
	// the time admissions waited for their loads.
	peak, distinct int
	wait           time.Duration
}

// run replays the trace traces times with setup s and returns the counts
// of the last (they are the same every time) and the median time.
func (cr *chatRunner) run(s chatSetup) (tiersChatRun, error) {
	var out tiersChatRun
	var times, waits []float64
	for i := range cr.traces {
		r, d, err := cr.once(s, i)
		if err != nil {
			return out, fmt.Errorf("chat, %s: %w", s.name, err)
		}
		if i > 0 && (r.HitTokens != out.HitTokens || r.NotRecomputed != out.NotRecomputed) {
			return out, fmt.Errorf("%w: chat, %s: trace %d hit %d tokens, trace 0 %d", errFailed, s.name, i, r.HitTokens, out.HitTokens)
		}
		out = r
		times = append(times, float64(d)/1e6)
		waits = append(waits, float64(cr.wait)/1e6)
	}
	out.TraceMS, out.ReadyWaitMS = eval.Median(times), eval.Median(waits)
	cr.progress(s.name)
	return out, nil
}

func (cr *chatRunner) progress(name string) {
	cr.b.done++
	cr.b.progress("chat, " + name)
}

// once replays the trace one time with fresh pool and tiers.
func (cr *chatRunner) once(s chatSetup, n int) (res tiersChatRun, elapsed time.Duration, err error) {
	cfg := cr.plan.Config
	res = tiersChatRun{Name: s.name, Tiers: len(s.tiers), HotBlocks: s.hot}
	p, err := locus.Default(locus.WithBlocks(s.hot), locus.WithBlockSize(chatBlockBytes))
	if err != nil {
		return res, 0, err
	}
	defer p.Close()
	var tiers []kv.Tier
	var tms []*tier.Manager
	defer func() {
		for _, t := range tms {
			if cerr := t.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	var topts []tier.Option
	if cr.o.workers > 0 {
		topts = append(topts, tier.WithWorkers(cr.o.workers))
	}
	res.Eviction = "lru"
	if s.s3fifo {
		topts = append(topts, tier.WithEviction(tier.NewS3FIFO))
		res.Eviction = "s3-fifo"
	}
	if len(s.tiers) == 0 {
		res.Eviction = ""
	}
	for _, kind := range s.tiers {
		var st tier.Storage
		switch kind {
		case "host":
			st, err = host.New(chatBlockBytes, cr.hostBlocks)
		case "disk":
			path := filepath.Join(cr.dir, fmt.Sprintf("chat-%d.dat", n))
			defer func() { _ = os.Remove(path) }()
			st, err = disk.Open(path, chatBlockBytes, cr.diskBlocks)
		}
		if err != nil {
			return res, 0, fmt.Errorf("%s tier: %w", kind, err)
		}
		tm, err := tier.New(st, topts...)
		if err != nil {
			_ = st.Close()
			return res, 0, err
		}
		tms = append(tms, tm)
		tiers = append(tiers, tm)
	}
	opts := []kv.Option{kv.WithTokensPerBlock(cfg.BlockSize)}
	if len(tiers) > 0 {
		opts = append(opts, kv.WithTiers(tiers...))
		if s.promotion != 0 {
			opts = append(opts, kv.WithPromotion(s.promotion))
		}
		if len(tiers) > 1 {
			res.Promotion = s.promotion.String()
			if s.promotion == 0 {
				res.Promotion = kv.PromoteDirect.String()
			}
		}
	}
	m, err := kv.New(p, opts...)
	if err != nil {
		return res, 0, err
	}
	defer func() {
		if cerr := m.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	if err := cr.loop(m); err != nil {
		return res, 0, err
	}
	elapsed = time.Since(start)
	st := m.Stats()
	if st.InUse != 0 {
		return res, 0, fmt.Errorf("%w: the trace left %d blocks in use", errFailed, st.InUse)
	}
	cr.distinct = int(st.Stored)
	res.PromptTokens, res.HotHitTokens, res.Evictions = st.QueryTokens, st.HitTokens, st.Evictions
	res.HitTokens, res.NotRecomputed = st.HitTokens, st.HitTokens
	for t, kind := range s.tiers {
		ts := st.Tiers[t]
		res.HitTokens += ts.HitTokens
		res.NotRecomputed += ts.LoadedBlocks * uint64(cfg.BlockSize)
		res.PerTier = append(res.PerTier, tiersChatTier{Tier: kind, HitTokens: ts.HitTokens,
			LoadedBlocks: ts.LoadedBlocks, FailedBlocks: ts.FailedBlocks, StoredBlocks: ts.StoredBlocks,
			LoadedBytes: ts.LoadedBlocks * chatBlockBytes, StoredBytes: ts.StoredBlocks * chatBlockBytes})
	}
	res.Recomputed = res.PromptTokens - res.NotRecomputed
	return res, elapsed, nil
}

// loop runs the schedule as an engine would: at each step it admits the
// arrivals (waiting, Drain after Drain, until their tier loads are
// Ready), appends one token to every other live request, releases those
// done, and drains until no copy is in flight, so that every run sees the
// tiers in the same state whatever the copies' timing.
func (cr *chatRunner) loop(m *kv.Manager) error {
	type live struct {
		r    *bench.ChatRequest
		id   kv.SeqID
		done int
	}
	plan := cr.plan
	var lives []*live
	next := 0
	cr.peak, cr.wait = 0, 0
	for step := range plan.Steps {
		for ; next < len(plan.Requests) && plan.Requests[next].Arrive == step; next++ {
			l := &live{r: &plan.Requests[next]}
			id, _, err := m.Admit(l.r.Prompt, kv.Key{})
			if err != nil {
				return fmt.Errorf("step %d: admit conversation %d turn %d: %w", step, l.r.Conversation, l.r.Turn, err)
			}
			l.id = id
			t0 := time.Now()
			if err := waitFor(m, func() (bool, error) { _, ok, err := m.Ready(id); return ok, err }); err != nil {
				return err
			}
			cr.wait += time.Since(t0)
			lives = append(lives, l)
		}
		cr.peak = max(cr.peak, m.Stats().InUse)
		kept := lives[:0]
		for _, l := range lives {
			if l.r.Arrive == step {
				kept = append(kept, l)
				continue
			}
			if err := m.Append(l.id, l.r.Reply[l.done:l.done+1]); err != nil {
				return fmt.Errorf("step %d: append: %w", step, err)
			}
			if l.done++; l.done == len(l.r.Reply) {
				if err := m.Release(l.id); err != nil {
					return err
				}
				continue
			}
			kept = append(kept, l)
		}
		lives = kept
		cr.peak = max(cr.peak, m.Stats().InUse)
		if err := waitFor(m, func() (bool, error) { return m.Stats().InFlight == 0, nil }); err != nil {
			return err
		}
	}
	if len(lives) != 0 || next != len(plan.Requests) {
		return fmt.Errorf("%w: the chat trace ended with %d live requests", errFailed, len(lives))
	}
	return nil
}

// waitFor drains m until done says so, yielding between Drains.
func waitFor(m *kv.Manager, done func() (bool, error)) error {
	deadline := time.Now().Add(chatWaitLimit)
	for {
		if _, err := m.Drain(); err != nil {
			return err
		}
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: copies still in flight after %v", errFailed, chatWaitLimit)
		}
		runtime.Gosched()
	}
}

// writeTiersChat prints the chat section as a table.
func writeTiersChat(w io.Writer, c *tiersChat) error {
	fmt.Fprintf(w, "\nChat workload: %d conversations × %d turns over %d system prompts of %d tokens (%d requests; up to %d steps of thought between turns), %d tokens per block of %s; "+
		"hot pool %d blocks (the live requests' peak %d, plus a quarter) of the %d distinct blocks; host tier %d blocks, disk tier %d; median of %d traces\n\n",
		c.Conversations, c.Turns, c.SystemPrompts, c.SystemTokens, c.Requests, c.ThinkSteps, c.TokensPerBlock, sizeName(c.BlockBytes),
		c.HotBlocks, c.PeakLive, c.DistinctBlocks, c.HostBlocks, c.DiskBlocks, c.Traces)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "run\thot blocks\tprompt tokens\tprefix hits\thot\thost\tdisk\tnot recomputed\t%\tevictions\thost in/out\tdisk in/out\tms/trace\tready wait ms\t\n")
	for _, r := range c.Runs {
		var hit, bytes [2]string
		for i := range hit {
			hit[i], bytes[i] = "-", "-"
		}
		for i, t := range r.PerTier {
			if i < 2 {
				hit[i] = fmt.Sprint(t.HitTokens)
				bytes[i] = bytesName(t.StoredBytes) + " / " + bytesName(t.LoadedBytes)
			}
		}
		pct := 0.0
		if r.PromptTokens > 0 {
			pct = 100 * float64(r.NotRecomputed) / float64(r.PromptTokens)
		}
		name := r.Name
		if r.Promotion != "" {
			name += " (" + r.Promotion + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%.1f\t%d\t%s\t%s\t%.1f\t%.2f\t\n", name, r.HotBlocks, r.PromptTokens, r.HitTokens,
			r.HotHitTokens, hit[0], hit[1], r.NotRecomputed, pct, r.Evictions, bytes[0], bytes[1], r.TraceMS, r.ReadyWaitMS)
	}
	return tw.Flush()
}

// bytesName is a byte count with one decimal, e.g. "12.3 MiB" or "28.0 KiB".
func bytesName(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// checkDir refuses a -dir that is given but is not a directory ("" is
// the default: a temporary one).
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%w: -dir: %w", eval.ErrConfig, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("%w: -dir %s: not a directory", eval.ErrConfig, dir)
	}
	return nil
}
