package fleet_test

import (
	"fmt"

	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
)

// A router in front of two engines: each engine's kv.Manager sends its
// events to the index (here by hand; in one process, pass
// x.Subscriber(pod) to kv.WithSubscriber), and each request goes to the
// engine that holds the longest prefix of its blocks, at the best weight.
func ExampleRouter() {
	x, _ := fleet.NewIndex()
	s, _ := fleet.NewScorer(x, fleet.DefaultWeights()) // gpu 1.0, cpu 0.8
	r, _ := fleet.NewRouter(s, []string{"engine-0", "engine-1"}, fleet.KVAware)
	h, _ := fleet.NewHasher(kv.SHA256CBOR, "", 16) // as the engines hash

	system := make([]uint32, 64) // a 64-token system prompt: 4 blocks
	for i := range system {
		system[i] = uint32(i)
	}
	prompt := append(system, 7, 8, 9)
	hashes := h.Append(nil, prompt, kv.Key{})

	// engine-1 computed the system prompt, then offloaded it to its host
	// tier and evicted it from the GPU.
	_ = x.Apply("engine-1", &kv.Event{Kind: kv.BlockStored, Hashes: hashes, Tokens: system, BlockSize: 16})
	_ = x.Apply("engine-1", &kv.Event{Kind: kv.BlockStored, Hashes: hashes, Tokens: system, BlockSize: 16, Medium: "CPU"})
	_ = x.Apply("engine-1", &kv.Event{Kind: kv.BlockRemoved, Hashes: hashes})

	d := r.Pick(hashes)
	fmt.Printf("%s, score %.1f\n", d.Pod, d.Score)
	_ = r.Done(d.Index) // the request finished

	rr, _ := fleet.NewRouter(nil, r.Pods(), fleet.RoundRobin)
	fmt.Println(rr.Pick(hashes).Pod, rr.Pick(hashes).Pod)
	// Output:
	// engine-1, score 3.2
	// engine-0 engine-1
}
