package adapters

import (
	"slices"
	"strings"
	"time"
)

// LoraInfo is the state behind vLLM's router-facing gauge
// vllm:lora_requests_info, whose labels routers (the Gateway API inference
// extension, llm-d, AIBrix) read to send a request where its adapter is
// already running or there is room for it. metrics.NewVLLMLora renders it
// from Stats.Lora, the same published state as every other adapter
// metric, so the labels cannot drift from the tier counts.
//
// As in vLLM, the adapter lists are ids joined with commas (an id with a
// comma in it reads as two), and the gauge's value is a time: At, when the
// state was recorded, so a router that finds several series takes the
// latest.
type LoraInfo struct {
	// MaxLora is vLLM's max_loras, the most adapters one batch mixes: the
	// largest MaxAdapters of the Manager's open Batchers, else its hot slot
	// budget (WithHotBudget; 0 if it has none).
	MaxLora int
	// Running lists the adapters with live handles (held by a batch or
	// any other holder), sorted, comma-separated.
	Running string
	// Waiting lists the adapters with requests queued in an open Batcher,
	// sorted, comma-separated.
	Waiting string
	// At is when the state was recorded (the Manager's clock, WithClock).
	At time.Time
}

// loraInfo returns the router-facing state, rebuilding the lists only when
// the set of held adapters or of waiting ones changed since the last call.
func (m *Manager) loraInfo() LoraInfo {
	if m.loraDirty {
		m.loraDirty = false
		m.lora.Running, m.lora.Waiting = m.loraLists()
	}
	info := m.lora
	info.MaxLora = m.cfg.hotSlots
	if len(m.batchers) > 0 {
		info.MaxLora = 0
		for _, b := range m.batchers {
			info.MaxLora = max(info.MaxLora, b.cfg.MaxAdapters)
		}
	}
	info.At = m.cfg.clock()
	return info
}

// loraLists builds LoraInfo's lists: the adapters with live leases (not
// the registrations: O(leases)) and those queued in open Batchers.
func (m *Manager) loraLists() (running, waiting string) {
	ids := m.idScratch[:0]
	for i := range m.leases {
		if l := &m.leases[i]; l.gen&1 == 1 {
			ids = append(ids, m.ads[l.adapter].id)
		}
	}
	running = joinIDs(ids)
	ids = ids[:0]
	for _, b := range m.batchers {
		for id := range b.queues {
			ids = append(ids, id)
		}
	}
	waiting = joinIDs(ids)
	clear(ids)
	m.idScratch = ids[:0]
	return running, waiting
}

// joinIDs sorts ids, drops duplicates and joins them with commas.
func joinIDs(ids []string) string {
	slices.Sort(ids)
	return strings.Join(slices.Compact(ids), ",")
}
