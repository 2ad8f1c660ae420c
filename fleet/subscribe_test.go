package fleet_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/pool"
)

// caughtUp waits until f has applied every batch pub published.
func caughtUp(t *testing.T, pub *events.Publisher, f *fleet.Follower) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		st := pub.Snapshot()
		if st.Published == st.Batches && f.Stats().Subscription.Next == st.Batches && st.Batches > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower at %+v, publisher at %+v", f.Stats(), st)
		}
	}
}

// sameIndex checks that two indexes hold the same entries, in the same
// order, on every hash, the same counts and the same scores.
func sameIndex(t *testing.T, want, got *fleet.Index, hs []kv.Hash) {
	t.Helper()
	if w, g := want.Stats(), got.Stats(); w != g {
		t.Fatalf("stats %+v, want %+v", g, w)
	}
	ws, err := fleet.NewScorer(want, nil)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := fleet.NewScorer(got, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		if w, g := want.Entries(nil, h), got.Entries(nil, h); !reflect.DeepEqual(w, g) {
			t.Fatalf("hash %d: entries %v, want %v", i, g, w)
		}
		req := hs[i:min(i+4, len(hs))]
		if w, g := ws.Score(req), gs.Score(req); !reflect.DeepEqual(w, g) {
			t.Fatalf("request at %d: scores %v, want %v", i, g, w)
		}
	}
}

func newIndex(t *testing.T) *fleet.Index {
	t.Helper()
	x, err := fleet.NewIndex()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// newScorer returns a Scorer over x at DefaultWeights.
func newScorer(t *testing.T, x *fleet.Index) *fleet.Scorer {
	t.Helper()
	s, err := fleet.NewScorer(x, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "tcp://" + ln.Addr().String()
}

// publish sends n random events of pod through pub, in batches of up to
// five (Flush), and applies them to x in process.
func publish(rng *rand.Rand, x *fleet.Index, pub *events.Publisher, pod string, hs []kv.Hash, n int) {
	record := pub.Subscriber()
	for i := range n {
		ev := randomEvent(rng, hs)
		_ = x.Apply(pod, ev)
		record(ev)
		if i%5 == 4 {
			pub.Flush()
		}
	}
	pub.Flush()
}

// TestFollowMatchesInProcess: three pods' random event streams, over ZMQ
// into one Index, give the Index that applying them in process gives:
// entries in order, counts and scores. Each stream is also decoded in
// its other encoding and hash form.
func TestFollowMatchesInProcess(t *testing.T) {
	hs := universe(t, 12)
	opts := [][]events.Option{
		{},
		{events.WithEncoding(events.Named)},
		{events.WithHashes(events.ByteHashes), events.WithEncoding(events.Named)},
	}
	for seed := range uint64(3) {
		rng := rand.New(rand.NewPCG(seed, 11))
		want, got := newIndex(t), newIndex(t)
		for i, pod := range []string{"a", "b", "c"} {
			pub, err := events.New("tcp://127.0.0.1:0", append(opts[i], events.WithTopic(events.Topic(pod, "m")))...)
			if err != nil {
				t.Fatal(err)
			}
			f, err := fleet.Follow(context.Background(), got, "tcp://"+pub.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			if err := pub.WaitSubscribers(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			publish(rng, want, pub, pod, hs, 300)
			caughtUp(t, pub, f)
			if st := f.Stats(); st.Skipped+st.Invalid+st.Subscription.Missed != 0 {
				t.Fatalf("%+v", st)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := pub.Close(); err != nil {
				t.Fatal(err)
			}
		}
		sameIndex(t, want, got, hs)
	}
}

// TestFollowRestartAndReplay: a follower that joins late catches up from
// the replay socket; an engine killed and restarted on the same endpoints
// starts a new stream, and the follower clears its pod before applying it,
// as a router in process would.
func TestFollowRestartAndReplay(t *testing.T) {
	hs := universe(t, 12)
	addr, raddr := freeAddr(t), freeAddr(t)
	open := func() *events.Publisher {
		pub, err := events.New(addr, events.WithTopic(events.Topic("a", "m")), events.WithReplay(raddr))
		if err != nil {
			t.Fatal(err)
		}
		return pub
	}
	rng := rand.New(rand.NewPCG(5, 5))
	want, got := newIndex(t), newIndex(t)
	pub := open()
	publish(rng, want, pub, "a", hs, 100) // nobody listens: the replay has it
	f, err := fleet.Follow(context.Background(), got, addr, events.WithReplayFrom(raddr), events.WithRedial(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pub.WaitSubscribers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	publish(rng, want, pub, "a", hs, 100)
	caughtUp(t, pub, f)
	sameIndex(t, want, got, hs)
	if st := f.Stats().Subscription; st.Replayed == 0 || st.Missed != 0 {
		t.Fatalf("late join: %+v", st)
	}

	if err := pub.Close(); err != nil && !errors.Is(err, events.ErrDropped) {
		t.Fatal(err)
	}
	pub = open()
	defer pub.Close()
	want.Clear("a") // the engine restarted over an empty cache
	if err := pub.WaitSubscribers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	publish(rng, want, pub, "a", hs, 100)
	caughtUp(t, pub, f)
	sameIndex(t, want, got, hs)
	if st := f.Stats().Subscription; st.Restarts != 1 || st.Missed != 0 {
		t.Fatalf("restart: %+v", st)
	}
}

func TestFollowRejects(t *testing.T) {
	if _, err := fleet.Follow(context.Background(), nil, "tcp://127.0.0.1:1"); !errors.Is(err, fleet.ErrInvalidConfig) {
		t.Fatalf("nil index: %v", err)
	}
	if _, err := fleet.Follow(context.Background(), newIndex(t), "bogus"); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("bad endpoint: %v", err)
	}
	var f *fleet.Follower
	if f.Close() == nil || f.Stats() != (fleet.FollowerStats{}) {
		t.Fatal("nil follower")
	}
	var zf fleet.Follower
	if zf.Close() == nil {
		t.Fatal("zero follower closed")
	}
	var x *fleet.Index
	if x.ApplyDecoded("a", &events.Event{Kind: kv.AllBlocksCleared}) == nil || x.ApplyBatch("a", &events.Batch{}) == nil {
		t.Fatal("nil index applied")
	}
	y := newIndex(t)
	for _, err := range []error{
		y.ApplyDecoded("", &events.Event{Kind: kv.AllBlocksCleared}),
		y.ApplyBatch("", &events.Batch{}),
	} {
		if !errors.Is(err, fleet.ErrInvalidPod) {
			t.Fatalf("empty pod: %v", err)
		}
	}
	for _, err := range []error{y.ApplyDecoded("a", nil), y.ApplyDecoded("a", &events.Event{}), y.ApplyBatch("a", nil)} {
		if !errors.Is(err, fleet.ErrInvalidEvent) {
			t.Fatalf("bad event: %v", err)
		}
	}
}

func TestPodOf(t *testing.T) {
	for topic, want := range map[string][3]any{
		"kv@pod-1@llama":   {"pod-1", "llama", true},
		"kv@pod-1@a@b":     {"pod-1", "a@b", true},
		"kv@@m":            {"", "", false},
		"kv@pod":           {"", "", false},
		"":                 {"", "", false},
		"vllm@pod-1@llama": {"", "", false},
	} {
		pod, model, ok := fleet.PodOf(topic)
		if pod != want[0] || model != want[1] || ok != want[2] {
			t.Errorf("PodOf(%q) = %q, %q, %v; want %v", topic, pod, model, ok, want)
		}
	}
}
