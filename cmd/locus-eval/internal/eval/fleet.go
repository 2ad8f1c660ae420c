package eval

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// FleetSchema is the schema the fleet subcommand's document names
// (locus-eval fleet -json).
const FleetSchema = "locus-eval/fleet"

// Fleet is the fleet subcommand's document: the command writes it, report
// reads it, decoded strictly. Machine, Created, Revision and
// SchemaVersion are optional: documents recorded before they were written
// still read.
type Fleet struct {
	Schema        string      `json:"schema"`
	SchemaVersion int         `json:"schema_version,omitempty"`
	Created       *time.Time  `json:"created,omitempty"`
	Machine       *Machine    `json:"machine,omitempty"`
	Revision      *Revision   `json:"revision,omitempty"`
	Config        FleetConfig `json:"config"`
	Runs          []FleetRun  `json:"runs"`
	// RemoteSkipped says why the remote-tier runs are missing ("" when
	// they ran).
	RemoteSkipped string `json:"remote_skipped,omitempty"`
}

// FleetConfig is the fleet's configuration: the engines, their pools and
// tiers, and the chat trace.
type FleetConfig struct {
	Engines       int      `json:"engines"`
	Conversations int      `json:"conversations"`
	Turns         int      `json:"turns"`
	SystemPrompts int      `json:"system_prompts"`
	SystemTokens  int      `json:"system_tokens"`
	UserTokens    int      `json:"user_tokens"`
	ReplyTokens   int      `json:"reply_tokens"`
	BlockSize     int      `json:"block_size"`
	BlockBytes    int      `json:"block_bytes"`
	HotBlocks     int      `json:"hot_blocks"`
	HostBlocks    int      `json:"host_blocks"`
	RemoteBlocks  int      `json:"remote_blocks"`
	Redis         []string `json:"redis,omitempty"`
	Seed          uint64   `json:"seed"`
	Events        string   `json:"events"`
	Processes     string   `json:"engine_processes"`
}

// FleetRun is one router (round-robin or kv-aware), with or without the
// remote tier.
type FleetRun struct {
	Router        string        `json:"router"`
	Remote        bool          `json:"remote"`
	Requests      int           `json:"requests"`
	PromptTokens  uint64        `json:"prompt_tokens"`
	HitTokens     uint64        `json:"prefix_hit_tokens"`
	HitHot        uint64        `json:"hit_tokens_hot"`
	HitHost       uint64        `json:"hit_tokens_host"`
	HitRemote     uint64        `json:"hit_tokens_remote"`
	HitRate       float64       `json:"hit_rate"`
	NotRecomputed uint64        `json:"tokens_not_recomputed"`
	Tiers         []FleetTier   `json:"tiers"`
	Engines       []FleetEngine `json:"engines"`
	ScoredPicks   int           `json:"picks_with_score"`
	Deferred      uint64        `json:"admissions_deferred"`
	Preemptions   uint64        `json:"preemptions"`
	Scrapes       uint64        `json:"scrapes"`
	ScrapeErrors  uint64        `json:"scrape_errors"`
	ScrapeMatches bool          `json:"final_scrape_matches"`
	IndexEvents   uint64        `json:"index_events"`
	IndexOrphans  uint64        `json:"index_orphans"`
	Seconds       float64       `json:"seconds"`
}

// FleetTier is what one tier medium stored and loaded over the fleet.
type FleetTier struct {
	Medium      string `json:"medium"`
	StoredBytes uint64 `json:"stored_bytes"`
	LoadedBytes uint64 `json:"loaded_bytes"`
	Learned     uint64 `json:"learned_blocks,omitempty"`
}

// FleetEngine is one engine's share of a run.
type FleetEngine struct {
	Name          string  `json:"name"`
	MetricsURL    string  `json:"metrics_url"`
	Requests      int     `json:"requests"`
	PromptTokens  uint64  `json:"prompt_tokens"`
	HitTokens     uint64  `json:"prefix_hit_tokens"`
	HitRate       float64 `json:"hit_rate"`
	ScrapedHits   float64 `json:"scraped_hit_tokens"`
	ScrapedLoaded float64 `json:"scraped_loaded_bytes"`
}

// ReadFleet reads a fleet document and validates it; every error matches
// ErrDocument (or is the file's).
func ReadFleet(path string) (*Fleet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseFleet(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// ParseFleet decodes a fleet document strictly (no unknown field, nothing
// after it) and validates it.
func ParseFleet(b []byte) (*Fleet, error) {
	var d Fleet
	if err := decodeStrict(b, &d); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// Validate checks what a fleet run cannot have written otherwise.
func (d *Fleet) Validate() error {
	var p problems
	if d.Schema != FleetSchema {
		p.add("schema", "%q; want %q", d.Schema, FleetSchema)
	}
	if d.Machine != nil {
		validateMachine(&p, *d.Machine)
	}
	c := d.Config
	if c.Engines < 1 || c.Conversations < 1 || c.Turns < 1 || c.BlockSize < 1 || c.BlockBytes < 1 || c.HotBlocks < 1 || c.HostBlocks < 1 {
		p.add("config", "%+v: want positive counts and sizes", c)
	}
	if len(d.Runs) == 0 {
		p.add("runs", "none")
	}
	for i, r := range d.Runs {
		where := fmt.Sprintf("runs[%d]", i)
		tiers := 1
		if r.Remote {
			tiers = 2
		}
		switch {
		case r.Router == "":
			p.add(where, "no router")
		case r.Requests < 1 || r.HitTokens > r.PromptTokens || r.HitHot+r.HitHost+r.HitRemote != r.HitTokens:
			p.add(where, "%d requests, %d hit tokens (%d + %d + %d) of %d prompt tokens", r.Requests, r.HitTokens, r.HitHot, r.HitHost, r.HitRemote, r.PromptTokens)
		case len(r.Tiers) != tiers:
			p.add(where, "%d tiers; want %d (remote %v)", len(r.Tiers), tiers, r.Remote)
		case len(r.Engines) != c.Engines:
			p.add(where, "%d engines; want %d", len(r.Engines), c.Engines)
		case !nonNegative(r.HitRate, r.Seconds) || r.HitRate > 1:
			p.add(where, "hit rate %v, %v s", r.HitRate, r.Seconds)
		}
	}
	return p.err()
}

func fleetMiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

var fleetHead = []string{"router", "remote tier", "prompt tokens", "prefix-hit tokens", "hit rate", "hot", "host", "remote",
	"not recomputed", "host stored / loaded", "remote stored / loaded", "requests per engine (hit rate)", "scored picks", "preemptions"}

func fleetCells(r FleetRun) []string {
	per := make([]string, len(r.Engines))
	for i, e := range r.Engines {
		per[i] = fmt.Sprintf("%d (%.0f %%)", e.Requests, 100*e.HitRate)
	}
	remote, rsl := "no", "–"
	if r.Remote {
		remote = "yes"
		if len(r.Tiers) > 1 {
			rsl = fleetMiB(r.Tiers[1].StoredBytes) + " / " + fleetMiB(r.Tiers[1].LoadedBytes)
		}
	}
	hsl := "–"
	if len(r.Tiers) > 0 {
		hsl = fleetMiB(r.Tiers[0].StoredBytes) + " / " + fleetMiB(r.Tiers[0].LoadedBytes)
	}
	scored := "–"
	if r.Router == "kv-aware" {
		scored = itoa(r.ScoredPicks)
	}
	return []string{r.Router, remote, fmt.Sprint(r.PromptTokens), fmt.Sprint(r.HitTokens), fmt.Sprintf("%.1f %%", 100*r.HitRate),
		fmt.Sprint(r.HitHot), fmt.Sprint(r.HitHost), fmt.Sprint(r.HitRemote), fmt.Sprint(r.NotRecomputed), hsl, rsl,
		strings.Join(per, ", "), scored, fmt.Sprint(r.Preemptions)}
}

func fleetLine(c FleetConfig) string {
	s := fmt.Sprintf("%d engines, each a hot pool of %d blocks and a host tier of %d blocks (%s blocks of %d tokens)",
		c.Engines, c.HotBlocks, c.HostBlocks, fmtBytes(float64(c.BlockBytes)), c.BlockSize)
	if len(c.Redis) > 0 {
		what := "a Redis server"
		if len(c.Redis) > 1 {
			what = fmt.Sprintf("a Redis Cluster (%d seed nodes)", len(c.Redis))
		}
		s += fmt.Sprintf(", and a remote tier on %s shared by all (%d blocks tracked per engine)", what, c.RemoteBlocks)
	}
	return s + fmt.Sprintf("; the chat trace: %d conversations × %d turns, %d system prompts of %d tokens, %d user + %d reply tokens a turn, seed %d",
		c.Conversations, c.Turns, c.SystemPrompts, c.SystemTokens, c.UserTokens, c.ReplyTokens, c.Seed)
}

// fleetChecks is what the runs say about their own accounting.
func fleetChecks(d *Fleet) string {
	var scrapes, errs, orphans uint64
	match := true
	for _, r := range d.Runs {
		scrapes += r.Scrapes
		errs += r.ScrapeErrors
		orphans += r.IndexOrphans
		match = match && r.ScrapeMatches
	}
	m := "every engine's last scrape equals its own count of hot hits"
	if !match {
		m = "**some engine's last scrape differs from its own count**"
	}
	return fmt.Sprintf("%d scrapes of the engines' metrics over HTTP (%d failed); %s; %d orphan events at the router's index", scrapes, errs, m, orphans)
}

// WriteFleetText prints a fleet document as a table.
func WriteFleetText(w io.Writer, d *Fleet) error {
	fmt.Fprintf(w, "Fleet: %s\n", fleetLine(d.Config))
	if d.Machine != nil {
		fmt.Fprintf(w, "machine: %s\n", *d.Machine)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(fleetHead, "\t")+"\t")
	for _, r := range d.Runs {
		fmt.Fprintln(tw, strings.Join(fleetCells(r), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if d.RemoteSkipped != "" {
		fmt.Fprintf(w, "remote tier: skipped (%s)\n", d.RemoteSkipped)
	}
	_, err := fmt.Fprintln(w, fleetChecks(d))
	return err
}

// WriteFleetMarkdown writes the fleet section of BENCHMARKS.md.
func WriteFleetMarkdown(w io.Writer, d *Fleet) {
	heading := "\n## A fleet: engines behind a router, with and without a shared remote tier"
	if d.Machine != nil {
		heading += " (" + d.Machine.String() + ")"
	}
	fmt.Fprintln(w, heading)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Generated from a recorded `locus-eval fleet -json` run; do not edit by hand. The chat workload replayed")
	fmt.Fprintln(w, "on a fleet of `kv.Manager` engines, each over a hot pool too small for every conversation, behind")
	fmt.Fprintln(w, "`fleet.Router` (round-robin, or KV-aware: llm-d's longest-prefix score over the engines' KV events).")
	fmt.Fprintln(w, "The figures are counts of tokens and bytes, not times.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | |")
	fmt.Fprintln(w, "|---|---|")
	if d.Machine != nil {
		fmt.Fprintf(w, "| machine | %s |\n", *d.Machine)
	} else {
		fmt.Fprintln(w, "| machine | not recorded (this fleet document names none) |")
	}
	if d.Created != nil {
		fmt.Fprintf(w, "| date | %s |\n", d.Created.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if d.Revision != nil {
		fmt.Fprintf(w, "| revision | %s |\n", revLine(*d.Revision))
	}
	fmt.Fprintf(w, "| fleet | %s |\n", fleetLine(d.Config))
	if len(d.Config.Redis) > 0 {
		fmt.Fprintf(w, "| remote tier | Redis at %s |\n", strings.Join(d.Config.Redis, ", "))
	} else if d.RemoteSkipped != "" {
		fmt.Fprintf(w, "| remote tier | skipped (%s) |\n", d.RemoteSkipped)
	}
	fmt.Fprintf(w, "| engines | %s |\n", d.Config.Processes)
	fmt.Fprintf(w, "| events | %s |\n", d.Config.Events)
	fmt.Fprintf(w, "| checks | %s |\n", fleetChecks(d))
	fmt.Fprintln(w)
	var rows [][]string
	for _, r := range d.Runs {
		rows = append(rows, fleetCells(r))
	}
	fmt.Fprintf(w, "| %s |\n|---|---|", strings.Join(fleetHead, " | "))
	for range fleetHead[2:] {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Prefix-hit tokens are summed over the fleet: found in an engine's hot pool, its host tier or the remote")
	fmt.Fprintln(w, "tier; not recomputed: hit tokens whose blocks were used (a hit whose load failed is recomputed). Bytes are")
	fmt.Fprintln(w, "what the engines copied into and out of each tier. Scored picks: requests the KV-aware router sent where")
	fmt.Fprintln(w, "some engine held their first block. An engine whose pool is full of running requests preempts one (its full")
	fmt.Fprintln(w, "blocks stay cached) and admits it again later; the counts leave those readmissions out.")
}
