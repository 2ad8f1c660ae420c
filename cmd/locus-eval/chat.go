package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/kv"
)

// Bounds on the chat trace, so that a flag cannot ask for more memory than
// a development machine has: the tokens the schedule holds, and the 4 KiB
// blocks of either run's pool.
const (
	maxChatTokens = 1 << 24
	maxChatBlocks = 1 << 18
	maxChatTraces = 1000
)

// chatShape is a chat trace's shape as the chat and tiers documents
// record it (embedded: its fields stand in the document's config).
type chatShape struct {
	Conversations int `json:"conversations"`
	Turns         int `json:"turns"`
	SystemPrompts int `json:"system_prompts"`
	SystemTokens  int `json:"system_tokens"`
	UserTokens    int `json:"user_tokens"`
	ReplyTokens   int `json:"reply_tokens"`
	ThinkSteps    int `json:"think_steps"`
	Stagger       int `json:"stagger"`
}

func chatShapeOf(cfg bench.ChatConfig) chatShape {
	return chatShape{Conversations: cfg.Conversations, Turns: cfg.Turns, SystemPrompts: cfg.SystemPrompts, SystemTokens: cfg.SystemTokens,
		UserTokens: cfg.UserTokens, ReplyTokens: cfg.ReplyTokens, ThinkSteps: cfg.ThinkSteps, Stagger: cfg.Stagger}
}

// chatSchema names the chat subcommand's -json document.
const chatSchema = "locus-eval/chat"

// chatDoc is the chat subcommand's -json document. Machine, revision and
// date are absent from documents written before they were recorded.
type chatDoc struct {
	Schema   string         `json:"schema"`
	Created  *time.Time     `json:"created,omitempty"`
	Machine  *eval.Machine  `json:"machine,omitempty"`
	Revision *eval.Revision `json:"revision,omitempty"`
	Config   struct {
		chatShape
		BlockSize int    `json:"block_size"`
		Blocks    int    `json:"blocks"`
		Seed      uint64 `json:"seed"`
		Hash      string `json:"hash"`
		Traces    int    `json:"traces"`
	} `json:"config"`
	Requests     int     `json:"requests"`
	Steps        int     `json:"steps"`
	PromptTokens uint64  `json:"prompt_tokens"`
	HitTokens    uint64  `json:"hit_tokens"`
	HitRate      float64 `json:"hit_rate"`
	PeakShared   int     `json:"peak_blocks_shared"`
	PeakPrivate  int     `json:"peak_blocks_private"`
	MeanShared   float64 `json:"mean_blocks_shared"`
	MeanPrivate  float64 `json:"mean_blocks_private"`
	Evictions    uint64  `json:"evictions"`
	SharedUS     float64 `json:"shared_us_per_trace"`
	PrivateUS    float64 `json:"private_us_per_trace"`
}

func runChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("locus-eval chat", `Usage: locus-eval chat [flags]

Replays a chat-shaped KV trace (an extension beyond LOCUS-EVAL v1): conversations share a few system
prompts and every turn re-sends the whole history. The same schedule runs through a kv.Manager (prefix
cache, shared blocks) and through a private kv.Table per request (no sharing); it prints the blocks each
holds at the busiest step and on average, the prefix hit rate, and the median time per trace of each
(one process, not interleaved: a rough figure, not a scoreboard ratio).

Flags:
`, stderr)
	cfg := bench.DefaultChat()
	fs.IntVar(&cfg.Conversations, "conversations", cfg.Conversations, "conversations in the trace")
	fs.IntVar(&cfg.Turns, "turns", cfg.Turns, "turns per conversation")
	fs.IntVar(&cfg.SystemPrompts, "systems", cfg.SystemPrompts, "distinct system prompts, assigned round-robin")
	fs.IntVar(&cfg.SystemTokens, "system-tokens", cfg.SystemTokens, "tokens of each system prompt")
	fs.IntVar(&cfg.UserTokens, "user-tokens", cfg.UserTokens, "new user tokens per turn")
	fs.IntVar(&cfg.ReplyTokens, "reply-tokens", cfg.ReplyTokens, "tokens decoded per turn, one per step")
	fs.IntVar(&cfg.ThinkSteps, "think", cfg.ThinkSteps, "most steps between a reply and the next turn")
	fs.IntVar(&cfg.Stagger, "stagger", cfg.Stagger, "steps between the starts of two conversations")
	fs.IntVar(&cfg.BlockSize, "block-size", cfg.BlockSize, "tokens per block")
	fs.IntVar(&cfg.Blocks, "blocks", cfg.Blocks, fmt.Sprintf("blocks of the shared run's pool (at most %d)", maxChatBlocks))
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the schedule")
	hash := fs.String("hash", "sha256_cbor", "block hash of the shared run: sha256_cbor (vLLM's default) or xxhash_cbor (a fraction of the cost)")
	traces := fs.Int("traces", 5, fmt.Sprintf("replays of the trace per run; the time is their median (1 to %d)", maxChatTraces))
	asJSON := fs.Bool("json", false, "print a JSON document instead of the table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Hash, err = parseHash(*hash); err != nil {
		return err
	}
	if err := checkChat(cfg, *traces); err != nil {
		return err
	}
	res, err := bench.RunChat(cfg, *traces)
	if err != nil {
		return err
	}
	d := chatDocOf(cfg, *traces, res)
	if *asJSON {
		return writeJSON(stdout, d)
	}
	return writeChatDoc(stdout, &d)
}

// checkChat refuses a trace whose schedule or pools would not fit in
// memory, before any work; bench.NewChatPlan checks the rest.
func checkChat(cfg bench.ChatConfig, traces int) error {
	if err := cfg.Check(); err != nil {
		return flagNames(err)
	}
	if traces < 1 || traces > maxChatTraces {
		return fmt.Errorf("%w: -traces %d; want 1 to %d", eval.ErrConfig, traces, maxChatTraces)
	}
	if cfg.Blocks > maxChatBlocks {
		return fmt.Errorf("%w: -blocks %d; want at most %d", eval.ErrConfig, cfg.Blocks, maxChatBlocks)
	}
	// Every conversation's turn t re-sends its system prompt and t earlier
	// turns; the private run holds a pool as large as every request's blocks.
	var tokens, blocks float64
	for t := range min(cfg.Turns, maxChatTokens) {
		n := float64(cfg.SystemTokens) + float64(t+1)*float64(cfg.UserTokens) + float64(t+1)*float64(cfg.ReplyTokens)
		tokens += float64(cfg.Conversations) * n
		blocks += float64(cfg.Conversations) * float64(int64(n)+int64(cfg.BlockSize)-1) / float64(cfg.BlockSize)
		if tokens > maxChatTokens || blocks > maxChatBlocks {
			return fmt.Errorf("%w: -conversations %d × -turns %d: the trace holds over %d tokens or %d blocks; make it smaller",
				eval.ErrConfig, cfg.Conversations, cfg.Turns, maxChatTokens, maxChatBlocks)
		}
	}
	return nil
}

// hashName is the name -hash takes for a, the default's for 0.
func hashName(a kv.HashAlgo) string {
	if a == 0 {
		a = kv.SHA256CBOR
	}
	return a.String()
}

// parseHash parses -hash: sha256_cbor or xxhash_cbor, vLLM's names.
func parseHash(s string) (kv.HashAlgo, error) {
	for _, a := range []kv.HashAlgo{kv.SHA256CBOR, kv.XXH3CBOR} {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: -hash %q: want sha256_cbor or xxhash_cbor", eval.ErrConfig, s)
}

// chatFlags are the flags of ChatConfig's fields, for errors that name
// what the user typed.
var chatFlags = strings.NewReplacer("Conversations ", "-conversations ", "Turns ", "-turns ", "SystemPrompts ", "-systems ",
	"SystemTokens ", "-system-tokens ", "UserTokens ", "-user-tokens ", "ReplyTokens ", "-reply-tokens ", "ThinkSteps ", "-think ",
	"Stagger ", "-stagger ", "BlockSize ", "-block-size ", "Blocks ", "-blocks ")

// flagNames rewrites a ChatConfig error in flag names.
func flagNames(err error) error {
	return fmt.Errorf("%w: %s", eval.ErrConfig, strings.ReplaceAll(chatFlags.Replace(err.Error()), bench.ErrChatConfig.Error()+": ", ""))
}

func chatDocOf(cfg bench.ChatConfig, traces int, r bench.ChatResult) chatDoc {
	now, machine, rev := time.Now().UTC(), eval.ThisMachine(), eval.ThisRevision()
	d := chatDoc{Schema: chatSchema, Created: &now, Machine: &machine, Revision: &rev, Requests: r.Requests, Steps: r.Steps, PromptTokens: r.PromptTokens, HitTokens: r.HitTokens,
		HitRate: r.HitRate, PeakShared: r.PeakShared, PeakPrivate: r.PeakPrivate, MeanShared: r.MeanShared, MeanPrivate: r.MeanPrivate,
		Evictions: r.Evictions, SharedUS: us(r.SharedTime), PrivateUS: us(r.PrivateTime)}
	c := &d.Config
	c.chatShape = chatShapeOf(cfg)
	c.BlockSize, c.Blocks, c.Seed, c.Traces = cfg.BlockSize, cfg.Blocks, cfg.Seed, traces
	c.Hash = hashName(cfg.Hash)
	return d
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// writeChatDoc prints a chat document as a table of the two runs side by
// side.
func writeChatDoc(w io.Writer, d *chatDoc) error {
	c := d.Config
	if d.Machine != nil {
		fmt.Fprintf(w, "machine: %s\n", *d.Machine)
	}
	fmt.Fprintf(w, "chat trace: %d conversations × %d turns, %d system prompts of %d tokens, %d user + %d reply tokens per turn,\n",
		c.Conversations, c.Turns, c.SystemPrompts, c.SystemTokens, c.UserTokens, c.ReplyTokens)
	fmt.Fprintf(w, "%d tokens per block, %s block hashes; %d requests over %d steps; median of %d traces per run\n\n",
		c.BlockSize, c.Hash, d.Requests, d.Steps, c.Traces)
	shared, private := time.Duration(d.SharedUS*1e3), time.Duration(d.PrivateUS*1e3)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\tshared prefixes (kv.Manager)\tprivate (kv.Table per request)\tshared / private\t\n")
	fmt.Fprintf(tw, "blocks held, peak\t%d\t%d\t%.2f\t\n", d.PeakShared, d.PeakPrivate, float64(d.PeakShared)/float64(d.PeakPrivate))
	fmt.Fprintf(tw, "blocks held, mean\t%.0f\t%.0f\t%.2f\t\n", d.MeanShared, d.MeanPrivate, d.MeanShared/d.MeanPrivate)
	fmt.Fprintf(tw, "time per trace\t%v\t%v\t%.2f\t\n", shared.Round(time.Microsecond), private.Round(time.Microsecond),
		d.SharedUS/d.PrivateUS)
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nprefix hits: %.1f %% of %d prompt tokens (%d); %d cached blocks evicted\n",
		100*d.HitRate, d.PromptTokens, d.HitTokens, d.Evictions)
	return err
}
