package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
)

// The chat workload is an extension beyond LOCUS-EVAL v1: a trace shaped
// like chat traffic, where requests share a few system prompts and every
// turn of a conversation re-sends the whole history. It runs the same
// schedule through a kv.Manager (prefix cache, shared blocks) and through
// a kv.Table per request (no sharing), and reports the blocks each holds,
// the prefix hit rate and the time per trace.

// ChatConfig shapes a chat trace.
type ChatConfig struct {
	Conversations int // conversations in the trace
	Turns         int // turns per conversation
	SystemPrompts int // distinct system prompts, assigned round-robin
	SystemTokens  int // tokens of each system prompt
	UserTokens    int // new user tokens per turn
	ReplyTokens   int // tokens decoded per turn, one per step
	ThinkSteps    int // most steps between the end of a reply and the next turn (1 to 1+ThinkSteps, drawn per turn)
	Stagger       int // steps between the starts of two conversations
	BlockSize     int // tokens per block
	Blocks        int // pool capacity of the shared run (4 KiB blocks)
	Seed          uint64
	// Hash is the shared run's block hash (0: kv's default, SHA256CBOR):
	// hashing every prompt block is most of what the prefix cache costs,
	// and XXH3CBOR costs a fraction of SHA256CBOR.
	Hash kv.HashAlgo
}

// DefaultChat is the trace the scoreboard runs: 64 conversations of 4 turns
// over 4 system prompts of 512 tokens.
func DefaultChat() ChatConfig {
	return ChatConfig{
		Conversations: 64, Turns: 4, SystemPrompts: 4, SystemTokens: 512,
		UserTokens: 64, ReplyTokens: 96, ThinkSteps: 32, Stagger: 4,
		BlockSize: 16, Blocks: 8192, Seed: 1,
	}
}

// ChatRequest is one turn: it arrives at step Arrive with Prompt (system
// prompt, the conversation so far, the new user message) and decodes Reply
// one token per step, finishing at Arrive + len(Reply).
type ChatRequest struct {
	Conversation, Turn, System int
	Arrive                     int
	Prompt, Reply              []uint32
}

// ChatPlan is a chat trace's schedule, computed once and replayed by every
// run; requests are in arrival order.
type ChatPlan struct {
	Config   ChatConfig
	Requests []ChatRequest
	Steps    int // the step after the last request finishes
}

// ErrChatConfig is matched by every error of ChatConfig.Check.
var ErrChatConfig = errors.New("bench: invalid chat config")

// Check names every field of cfg out of its range: counts of conversations,
// turns, system prompts, user and reply tokens, tokens per block and blocks
// must be positive; system tokens, think steps and stagger may be zero.
func (cfg ChatConfig) Check() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"Conversations", cfg.Conversations, 1}, {"Turns", cfg.Turns, 1}, {"SystemPrompts", cfg.SystemPrompts, 1},
		{"SystemTokens", cfg.SystemTokens, 0}, {"UserTokens", cfg.UserTokens, 1}, {"ReplyTokens", cfg.ReplyTokens, 1},
		{"ThinkSteps", cfg.ThinkSteps, 0}, {"Stagger", cfg.Stagger, 0}, {"BlockSize", cfg.BlockSize, 1}, {"Blocks", cfg.Blocks, 1},
	} {
		if f.v < f.min {
			errs = append(errs, fmt.Errorf("%w: %s %d: want %d or more", ErrChatConfig, f.name, f.v, f.min))
		}
	}
	return errors.Join(errs...)
}

// NewChatPlan computes the schedule of cfg.
func NewChatPlan(cfg ChatConfig) (*ChatPlan, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636861742d747261)) // "chat-tra"
	words := func(n int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(rng.IntN(128000))
		}
		return s
	}
	systems := make([][]uint32, cfg.SystemPrompts)
	for i := range systems {
		systems[i] = words(cfg.SystemTokens)
	}
	p := &ChatPlan{Config: cfg}
	for c := range cfg.Conversations {
		sys := c % cfg.SystemPrompts
		history := slices.Clone(systems[sys])
		at := c * cfg.Stagger
		for t := range cfg.Turns {
			history = append(history, words(cfg.UserTokens)...)
			r := ChatRequest{Conversation: c, Turn: t, System: sys, Arrive: at,
				Prompt: slices.Clone(history), Reply: words(cfg.ReplyTokens)}
			p.Requests = append(p.Requests, r)
			history = append(history, r.Reply...)
			at += cfg.ReplyTokens + 1 + rng.IntN(cfg.ThinkSteps+1) // after the reply's last step
			p.Steps = max(p.Steps, r.Arrive+cfg.ReplyTokens+1)
		}
	}
	slices.SortStableFunc(p.Requests, func(a, b ChatRequest) int { return a.Arrive - b.Arrive })
	return p, nil
}

// ChatResult is what RunChat measured.
type ChatResult struct {
	Requests, Steps int
	// Prompt tokens admitted and those found in the prefix cache.
	PromptTokens, HitTokens uint64
	HitRate                 float64
	// Blocks held by live requests at the busiest step and on average
	// over the steps, with the prefix cache (Shared) and without sharing
	// (Private).
	PeakShared, PeakPrivate int
	MeanShared, MeanPrivate float64
	Evictions               uint64 // cached blocks the shared run evicted
	// Median time per trace of each run.
	SharedTime, PrivateTime time.Duration
}

// String formats the result as the scoreboard prints it.
func (r ChatResult) String() string {
	return fmt.Sprintf("chat: %d requests, %d steps; blocks held peak %d shared vs %d private (%.0f %% saved), mean %.0f vs %.0f; "+
		"prefix hits %.1f %% of %d prompt tokens, %d evictions; %v per trace shared, %v private",
		r.Requests, r.Steps, r.PeakShared, r.PeakPrivate, 100*(1-float64(r.PeakShared)/float64(r.PeakPrivate)),
		r.MeanShared, r.MeanPrivate, 100*r.HitRate, r.PromptTokens, r.Evictions, r.SharedTime, r.PrivateTime)
}

// RunChat replays the chat trace of cfg traces times through a kv.Manager
// and through private kv.Tables, each over a fresh locus.Default pool, and
// returns the blocks held, the hit rate and the median time per trace of
// each. Every admission must succeed: size cfg.Blocks for the trace.
func RunChat(cfg ChatConfig, traces int) (ChatResult, error) {
	plan, err := NewChatPlan(cfg)
	if err != nil {
		return ChatResult{}, err
	}
	if traces <= 0 {
		return ChatResult{}, fmt.Errorf("bench: %d traces", traces)
	}
	res := ChatResult{Requests: len(plan.Requests), Steps: plan.Steps}
	var shared, private []time.Duration
	for range traces {
		d, err := runChatShared(plan, &res)
		if err != nil {
			return res, err
		}
		shared = append(shared, d)
		if d, err = runChatPrivate(plan, &res); err != nil {
			return res, err
		}
		private = append(private, d)
	}
	res.SharedTime, res.PrivateTime = medianDuration(shared), medianDuration(private)
	if res.PromptTokens > 0 {
		res.HitRate = float64(res.HitTokens) / float64(res.PromptTokens)
	}
	return res, nil
}

func medianDuration(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

type chatLive struct {
	r    *ChatRequest
	done int // reply tokens decoded
	id   kv.SeqID
	tbl  *kv.Table
}

// chatLoop runs the schedule: at each step it admits the arrivals, decodes
// one token of every live request and ends those that are done, then
// records the blocks held.
func chatLoop(plan *ChatPlan, admit func(*chatLive) error, decode func(*chatLive) error, end func(*chatLive) error, held func() int) (peak int, mean float64, err error) {
	live := make([]*chatLive, 0, len(plan.Requests))
	next, sum := 0, 0
	for step := range plan.Steps {
		for ; next < len(plan.Requests) && plan.Requests[next].Arrive == step; next++ {
			l := &chatLive{r: &plan.Requests[next]}
			if err := admit(l); err != nil {
				return 0, 0, fmt.Errorf("step %d: admit conversation %d turn %d: %w", step, l.r.Conversation, l.r.Turn, err)
			}
			live = append(live, l)
		}
		kept := live[:0]
		for _, l := range live {
			if l.r.Arrive == step {
				kept = append(kept, l) // prefilled this step
				continue
			}
			if err := decode(l); err != nil {
				return 0, 0, fmt.Errorf("step %d: decode: %w", step, err)
			}
			if l.done++; l.done == len(l.r.Reply) {
				if err := end(l); err != nil {
					return 0, 0, err
				}
				continue
			}
			kept = append(kept, l)
		}
		live = kept
		h := held()
		peak = max(peak, h)
		sum += h
	}
	if len(live) != 0 || next != len(plan.Requests) {
		return 0, 0, fmt.Errorf("bench: chat trace ended with %d live requests", len(live))
	}
	return peak, float64(sum) / float64(plan.Steps), nil
}

func runChatShared(plan *ChatPlan, res *ChatResult) (time.Duration, error) {
	p, err := locus.Default(locus.WithBlocks(plan.Config.Blocks))
	if err != nil {
		return 0, err
	}
	defer p.Close()
	opts := []kv.Option{kv.WithTokensPerBlock(plan.Config.BlockSize)}
	if plan.Config.Hash != 0 {
		opts = append(opts, kv.WithHash(plan.Config.Hash, ""))
	}
	m, err := kv.New(p, opts...)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	start := time.Now()
	peak, mean, err := chatLoop(plan,
		func(l *chatLive) (err error) { l.id, _, err = m.Admit(l.r.Prompt, kv.Key{}); return err },
		func(l *chatLive) error { return m.Append(l.id, l.r.Reply[l.done:l.done+1]) },
		func(l *chatLive) error { return m.Release(l.id) },
		func() int { return m.Stats().InUse })
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	st := m.Stats()
	if st.InUse != 0 || st.Free+st.Cached != st.Capacity {
		return 0, fmt.Errorf("bench: chat run left %+v", st)
	}
	res.PeakShared, res.MeanShared = peak, mean
	res.PromptTokens, res.HitTokens, res.Evictions = st.QueryTokens, st.HitTokens, st.Evictions
	return elapsed, nil
}

func runChatPrivate(plan *ChatPlan, res *ChatResult) (time.Duration, error) {
	// Enough blocks for every request to hold its own, as if all were live.
	total := 0
	for _, r := range plan.Requests {
		total += (len(r.Prompt) + len(r.Reply) + plan.Config.BlockSize - 1) / plan.Config.BlockSize
	}
	p, err := locus.Default(locus.WithBlocks(total))
	if err != nil {
		return 0, err
	}
	defer p.Close()
	start := time.Now()
	peak, mean, err := chatLoop(plan,
		func(l *chatLive) error {
			t, err := kv.NewTable(plan.Config.BlockSize)
			if err != nil {
				return err
			}
			l.tbl = t
			return t.Append(p, len(l.r.Prompt))
		},
		func(l *chatLive) error { return l.tbl.Append(p, 1) },
		func(l *chatLive) error { return l.tbl.Release(p) },
		func() int { return p.Stats().Live })
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	res.PeakPrivate, res.MeanPrivate = peak, mean
	return elapsed, nil
}
