package bench

import (
	"slices"
	"testing"
)

func smallChat() ChatConfig {
	return ChatConfig{Conversations: 12, Turns: 3, SystemPrompts: 2, SystemTokens: 100,
		UserTokens: 20, ReplyTokens: 10, ThinkSteps: 5, Stagger: 2, BlockSize: 16, Blocks: 1024, Seed: 7}
}

// TestChatPlanSchedule pins the schedule's shape: every turn re-sends the
// conversation so far, turns follow their replies, and the default trace
// is what the scoreboard reports on.
func TestChatPlanSchedule(t *testing.T) {
	cfg := smallChat()
	p, err := NewChatPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Requests) != cfg.Conversations*cfg.Turns {
		t.Fatalf("%d requests", len(p.Requests))
	}
	if !slices.IsSortedFunc(p.Requests, func(a, b ChatRequest) int { return a.Arrive - b.Arrive }) {
		t.Fatal("requests are not in arrival order")
	}
	byConv := map[int][]ChatRequest{}
	systems := map[int][]uint32{}
	for _, r := range p.Requests {
		byConv[r.Conversation] = append(byConv[r.Conversation], r)
	}
	for c, turns := range byConv {
		if turns[0].Arrive != c*cfg.Stagger || turns[0].System != c%cfg.SystemPrompts {
			t.Fatalf("conversation %d starts at %d with system %d", c, turns[0].Arrive, turns[0].System)
		}
		sys := turns[0].Prompt[:cfg.SystemTokens]
		if prev, ok := systems[turns[0].System]; ok && !slices.Equal(prev, sys) {
			t.Fatalf("conversation %d has another system prompt %d", c, turns[0].System)
		}
		systems[turns[0].System] = sys
		for k := 1; k < len(turns); k++ {
			prev, r := turns[k-1], turns[k]
			if r.Turn != k || len(r.Reply) != cfg.ReplyTokens {
				t.Fatalf("conversation %d turn %d is %+v", c, k, r.Turn)
			}
			history := append(slices.Clone(prev.Prompt), prev.Reply...)
			if !slices.Equal(r.Prompt[:len(history)], history) || len(r.Prompt) != len(history)+cfg.UserTokens {
				t.Fatalf("conversation %d turn %d does not re-send the history", c, k)
			}
			if gap := r.Arrive - prev.Arrive - cfg.ReplyTokens; gap < 1 || gap > 1+cfg.ThinkSteps {
				t.Fatalf("conversation %d turn %d arrives %d steps after the reply", c, k, gap)
			}
		}
	}
	if len(systems) != cfg.SystemPrompts {
		t.Fatalf("%d system prompts", len(systems))
	}
	again, _ := NewChatPlan(cfg)
	if !slices.EqualFunc(p.Requests, again.Requests, func(a, b ChatRequest) bool {
		return a.Arrive == b.Arrive && slices.Equal(a.Prompt, b.Prompt) && slices.Equal(a.Reply, b.Reply)
	}) {
		t.Fatal("the plan is not deterministic")
	}

	d, err := NewChatPlan(DefaultChat())
	if err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for _, r := range d.Requests {
		tokens += len(r.Prompt)
	}
	if len(d.Requests) != 256 || d.Steps != 691 || tokens != 208896 {
		t.Fatalf("the default trace changed: %d requests, %d steps, %d prompt tokens", len(d.Requests), d.Steps, tokens)
	}
	if _, err := NewChatPlan(ChatConfig{}); err == nil {
		t.Fatal("an empty config was accepted")
	}
}

// TestChatMatchesOracle: the hits and the private blocks held follow from
// the schedule alone when nothing is evicted; the shared run holds fewer.
func TestChatMatchesOracle(t *testing.T) {
	cfg := smallChat()
	p, _ := NewChatPlan(cfg)
	bs := cfg.BlockSize
	// Hits: a first turn finds its system prompt once a request of the same
	// prompt was admitted; a later turn finds its previous turn, prompt and
	// reply; never the block of the last prompt token.
	var hits, prompt uint64
	seen := map[int]bool{}
	prevLen := map[int]int{}
	for _, r := range p.Requests {
		n := len(r.Prompt)
		cached := 0
		if r.Turn == 0 {
			if seen[r.System] {
				cached = cfg.SystemTokens / bs
			}
			seen[r.System] = true
		} else {
			cached = prevLen[r.Conversation] / bs
		}
		cached = min(cached, (n-1)/bs)
		hits += uint64(cached * bs)
		prompt += uint64(n)
		prevLen[r.Conversation] = n + len(r.Reply)
	}
	// Private blocks held: every live request holds its tokens' blocks.
	peak, sum := 0, 0
	for step := range p.Steps {
		held := 0
		for _, r := range p.Requests {
			if step >= r.Arrive && step < r.Arrive+len(r.Reply) {
				held += (len(r.Prompt) + step - r.Arrive + bs - 1) / bs
			}
		}
		peak = max(peak, held)
		sum += held
	}
	res, err := RunChat(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.PromptTokens != prompt || res.HitTokens != hits || res.Evictions != 0 {
		t.Fatalf("hits %d of %d (%d evictions), oracle %d of %d", res.HitTokens, res.PromptTokens, res.Evictions, hits, prompt)
	}
	if res.PeakPrivate != peak || res.MeanPrivate != float64(sum)/float64(p.Steps) {
		t.Fatalf("private peak %d mean %v, oracle %d %v", res.PeakPrivate, res.MeanPrivate, peak, float64(sum)/float64(p.Steps))
	}
	if res.PeakShared >= res.PeakPrivate || res.MeanShared >= res.MeanPrivate || res.SharedTime <= 0 {
		t.Fatalf("sharing saved nothing: %v", res)
	}
	if _, err := RunChat(cfg, 0); err == nil {
		t.Fatal("0 traces accepted")
	}
	small := cfg
	small.Blocks = 8
	if _, err := RunChat(small, 1); err == nil {
		t.Fatal("a pool too small for the trace passed")
	}
}
