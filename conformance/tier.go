package conformance

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/locus-go/locus/tier"
)

// Tier is the surface of an offload tier that TestTier and CheckTier
// exercise: *tier.Manager has it, over any tier.Storage (tier/host,
// tier/disk, your own). The suite takes this interface so that a tier
// manager of another design (a remote store with its own index) can be
// checked against the same contract.
type Tier interface {
	Lookup(keys []tier.Key, dst []tier.Result) []tier.Result
	Touch(keys []tier.Key)
	PrepareLoad(keys []tier.Key) (tier.LoadPlan, error)
	CompleteLoad(j tier.Job) error
	PrepareStore(keys []tier.Key) (tier.StorePlan, error)
	CompleteStore(j tier.Job, ok bool) error
	Store(keys []tier.Key, srcs [][]byte) (tier.StorePlan, error)
	Load(keys []tier.Key, dsts [][]byte) (tier.Job, error)
	Drain(dst []tier.Done) ([]tier.Done, error)
	Reset() error
	Stats() tier.Stats
	TakeEvents(dst []tier.Event) []tier.Event
	BlockSize() int
	Capacity() int
	Close() error
}

// tierMin is the smallest capacity the suite takes.
const tierMin = 8

// TestTier runs the tier suite: each case on a fresh, empty tier that newT
// builds (16 to a few hundred slots of small blocks keep it fast). It
// checks:
//
//   - round trip: every stored block is HIT_PENDING until the Drain that
//     reports its store, then a HIT whose Load returns exactly its bytes
//     (a lost store, a torn or corrupt read served, fail it);
//   - accounting: Free + Evictable + StorePending + LoadPinned equals
//     Capacity, and each count is exactly what the calls made it;
//   - pins: a block pinned by PrepareLoad is never evicted, PrepareStore
//     refuses with tier.ErrNoSpace (evicting nothing) when the unpinned
//     blocks are too few, and never evicts a key of its own call;
//   - jobs: a completion after Reset fails with tier.ErrStaleJob, a
//     second or forged one with tier.ErrInvalidJob, and neither changes
//     what the tier serves;
//   - events: BlockStored and BlockRemoved name the keys, with a medium;
//   - remove (only for a tier that is a TierRemover): exactly the
//     resident blocks no job holds leave, their slots are free, one
//     BlockRemoved event names them, the busy ones are reported, and the
//     jobs and the other blocks are as they were.
//
// The suite closes the tiers it is given.
func TestTier[T Tier](t *testing.T, newT func(t *testing.T) T) {
	t.Helper()
	tierSuite().runT(t, adaptT(newT, func(x T) Tier { return x }))
}

// CheckTier runs the tier suite outside go test (it calls no testing
// function) and returns every violation found, joined with errors.Join.
func CheckTier[T Tier](newT func() (T, error)) error {
	return tierSuite().runCheck(adapt(newT, func(x T) Tier { return x }))
}

func tierSuite() suite[Tier] {
	closeIt := func(x Tier) { _ = x.Close() }
	return suite[Tier]{cases: tierCases, abort: closeIt, release: closeIt}
}

var tierCases = []testCase[Tier]{
	{name: "RoundTrip", explanation: "a stored block is HIT_PENDING until the Drain that reports its store, then a HIT whose Load returns exactly its bytes", run: tierRoundTrip},
	{name: "Accounting", explanation: "Free + Evictable + StorePending + LoadPinned == Capacity, each count exactly what the calls made it", run: tierAccounting},
	{name: "Pins", explanation: "a pinned block is never evicted; PrepareStore refuses with ErrNoSpace, evicting nothing, when too little is evictable, and never evicts a key of its own call", run: tierPins},
	{name: "Jobs", explanation: "a completion after Reset fails with ErrStaleJob, a second or forged one with ErrInvalidJob, and neither changes what the tier serves", run: tierJobs},
	{name: "Events", explanation: "BlockStored and BlockRemoved events name the blocks, each with the tier's medium", run: tierEvents},
	{name: "Remove", explanation: "a tier with Remove drops exactly the resident blocks no job holds, frees their slots, announces them in one BlockRemoved event, reports the busy ones and leaves every job and every other block as it was", run: tierRemove},
}

// TierRemover is the optional capability of a Tier to drop blocks before
// eviction reaches them (*tier.Manager has it). The suite checks it only
// on a tier that has it, as fstest checks a GlobFS only if the FS is one.
type TierRemover interface {
	Remove(keys []tier.Key, busy []tier.Key) (removed int, _ []tier.Key, err error)
}

// tierKey returns the suite's i-th key.
func tierKey(i int) tier.Key {
	return tier.KeyOf([]byte("conformance-tier-"+strconv.Itoa(i)), uint32(i%3))
}

func tierKeys(lo, hi int) []tier.Key {
	ks := make([]tier.Key, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ks = append(ks, tierKey(i))
	}
	return ks
}

// tierBlock is key i's content: every byte depends on the key and the
// position, so a block of another key, a torn or shifted one differs.
func tierBlock(i, size int) []byte {
	b := make([]byte, size)
	x := uint32(i)*2654435761 + 1
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = byte(x)
	}
	return b
}

func tierSize(x Tier) int {
	if n := x.Capacity(); n < tierMin || x.BlockSize() <= 0 {
		must(violationf(ErrContract, "a tier of %d slots of %d bytes: the suite needs %d slots or more", n, x.BlockSize(), tierMin))
	}
	return min(x.Capacity(), 256)
}

// tierWait drains until every job in want is reported, and returns the
// reports. A job never reported is lost.
func tierWait(r *run[Tier], want ...tier.Job) []tier.Done {
	left := slices.Clone(want)
	var out []tier.Done
	deadline := time.Now().Add(20 * time.Second)
	for len(left) > 0 {
		done, err := r.x.Drain(nil)
		mustOK("Drain", err)
		for _, d := range done {
			i := slices.Index(left, d.Job)
			require(i >= 0, ErrDuplicated, "Drain reported %v, which is not in flight", d.Job)
			left = slices.Delete(left, i, i+1)
			out = append(out, d)
		}
		if len(done) == 0 {
			require(!time.Now().After(deadline) && r.ctx.Err() == nil, ErrLost, "%d jobs never reported by Drain", len(left))
			runtime.Gosched()
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out
}

// tierAccount checks the identity and, if want is not nil, the four counts.
func tierAccount(x Tier, what string, want *[4]int) {
	s := x.Stats()
	got := [4]int{s.Free, s.Evictable, s.StorePending, s.LoadPinned}
	require(got[0]+got[1]+got[2]+got[3] == s.Capacity && s.Capacity == x.Capacity(), ErrAccounting, "%s: free %d + evictable %d + store-pending %d + load-pinned %d != capacity %d", what, got[0], got[1], got[2], got[3], s.Capacity)
	if want != nil {
		require(got == *want, ErrAccounting, "%s: free, evictable, store-pending, load-pinned = %v, want %v", what, got, *want)
	}
}

// tierStore stores blocks lo..hi through Store and waits for the store.
func tierStore(r *run[Tier], lo, hi int) {
	bs := r.x.BlockSize()
	srcs := make([][]byte, 0, hi-lo)
	for i := lo; i < hi; i++ {
		srcs = append(srcs, tierBlock(i, bs))
	}
	ks := tierKeys(lo, hi)
	plan, err := r.x.Store(ks, srcs)
	mustOK(fmt.Sprintf("Store of blocks %d..%d", lo, hi), err)
	require(len(plan.Keys) == hi-lo, ErrContract, "Store of %d new blocks planned %d", hi-lo, len(plan.Keys))
	for i, res := range r.x.Lookup(ks, nil) {
		require(res != tier.Hit, ErrAliased, "block %d is a HIT before the Drain that reports its store", lo+i)
	}
	done := tierWait(r, plan.Job)
	require(done[0].OK, ErrLost, "the store of blocks %d..%d failed: %v", lo, hi, done[0].Err)
}

// tierVerify loads blocks lo..hi and compares their bytes.
func tierVerify(r *run[Tier], lo, hi int) {
	bs := r.x.BlockSize()
	ks := tierKeys(lo, hi)
	for i, res := range r.x.Lookup(ks, nil) {
		require(res == tier.Hit, ErrLost, "stored block %d looks up as %v", lo+i, res)
	}
	dsts := make([][]byte, hi-lo)
	for i := range dsts {
		dsts[i] = make([]byte, bs)
	}
	j, err := r.x.Load(ks, dsts)
	require(err == nil, ErrLost, "Load of stored blocks %d..%d: %v", lo, hi, err)
	done := tierWait(r, j)
	require(done[0].OK, ErrLost, "the load of stored blocks %d..%d failed: %v", lo, hi, done[0].Err)
	for i := range dsts {
		require(bytes.Equal(dsts[i], tierBlock(lo+i, bs)), ErrCorrupted, "block %d loaded with other bytes than stored", lo+i)
	}
}

func tierRoundTrip(r *run[Tier]) error {
	n := tierSize(r.x)
	for round := range 3 {
		lo := round * n
		// The eviction policy is the tier's: only the blocks just
		// stored are sure to be there.
		for _, h := range [][2]int{{lo, lo + n/2}, {lo + n/2, lo + n}} {
			tierStore(r, h[0], h[1])
			tierVerify(r, h[0], h[1])
		}
		tierAccount(r.x, "after a round trip", nil)
	}
	return nil
}

func tierAccounting(r *run[Tier]) error {
	n := tierSize(r.x)
	slots := r.x.Capacity()
	tierAccount(r.x, "empty", &[4]int{slots, 0, 0, 0})
	tierStore(r, 0, n/2)
	tierAccount(r.x, "after a store", &[4]int{slots - n/2, n / 2, 0, 0})
	sp, err := r.x.PrepareStore(tierKeys(n/2, n/2+2))
	mustOK("PrepareStore", err)
	lp, err := r.x.PrepareLoad(tierKeys(0, 3))
	mustOK("PrepareLoad", err)
	tierAccount(r.x, "with a store and a load prepared", &[4]int{slots - n/2 - 2, n/2 - 3, 2, 3})
	mustOK("CompleteStore(failed)", r.x.CompleteStore(sp.Job, false))
	mustOK("CompleteLoad", r.x.CompleteLoad(lp.Job))
	tierAccount(r.x, "after both completed (the store failed)", &[4]int{slots - n/2, n / 2, 0, 0})
	mustOK("Reset", r.x.Reset())
	tierAccount(r.x, "after Reset", &[4]int{slots, 0, 0, 0})
	return nil
}

func tierPins(r *run[Tier]) error {
	slots := r.x.Capacity()
	if slots > 512 {
		return skip("the pin case fills the tier: %d slots is too many", slots)
	}
	pinned := slots / 2
	tierStore(r, 0, slots)
	lp, err := r.x.PrepareLoad(tierKeys(0, pinned))
	mustOK("PrepareLoad", err)
	// Too many: refused, nothing evicted.
	_, err = r.x.PrepareStore(tierKeys(slots, slots+slots-pinned+1))
	must(wantIs("PrepareStore of more blocks than are evictable", err, tier.ErrNoSpace))
	ev := r.x.Stats().Evictable
	require(ev == slots-pinned, ErrAccounting, "a refused PrepareStore evicted: %d evictable, want %d", ev, slots-pinned)
	// Exactly enough, with one pinned and one unpinned key of the call
	// present: only unpinned blocks outside the call go.
	ks := append(tierKeys(pinned, pinned+1), tierKeys(slots, slots+slots-pinned-1)...)
	sp, err := r.x.PrepareStore(ks)
	mustOK("PrepareStore of as many blocks as are evictable", err)
	for _, k := range sp.Evicted {
		i := slices.Index(tierKeys(0, pinned+1), k)
		require(i < 0, ErrAliased, "block %d was evicted while pinned or while among the keys being stored", i)
	}
	for i, res := range r.x.Lookup(tierKeys(0, pinned+1), nil) {
		require(res == tier.Hit, ErrLost, "pinned block %d looks up as %v after a store that evicted", i, res)
	}
	mustOK("CompleteStore", r.x.CompleteStore(sp.Job, true))
	mustOK("CompleteLoad", r.x.CompleteLoad(lp.Job))
	tierVerify(r, 0, pinned+1)
	tierAccount(r.x, "after the pins", &[4]int{0, slots, 0, 0})
	return nil
}

func tierJobs(r *run[Tier]) error {
	tierStore(r, 0, 4)
	sp, err := r.x.PrepareStore(tierKeys(4, 6))
	mustOK("PrepareStore", err)
	lp, err := r.x.PrepareLoad(tierKeys(0, 2))
	mustOK("PrepareLoad", err)
	mustOK("CompleteStore", r.x.CompleteStore(sp.Job, true))
	must(wantIs("a second CompleteStore of one job", r.x.CompleteStore(sp.Job, true), tier.ErrInvalidJob))
	must(wantIs("CompleteLoad of the zero job", r.x.CompleteLoad(tier.Job{}), tier.ErrInvalidJob))
	other, err := r.another()
	must(err)
	op, err := other.PrepareStore(tierKeys(0, 1))
	mustOK("PrepareStore on a second tier", err)
	must(wantIs("CompleteStore of another tier's job", r.x.CompleteStore(op.Job, true), tier.ErrInvalidJob))
	// A reset with jobs in flight: their completions are stale.
	sp2, err := r.x.PrepareStore(tierKeys(10, 12))
	mustOK("PrepareStore", err)
	mustOK("Reset", r.x.Reset())
	must(wantIs("CompleteStore of a job issued before Reset", r.x.CompleteStore(sp2.Job, true), tier.ErrStaleJob))
	must(wantIs("CompleteLoad of a job issued before Reset", r.x.CompleteLoad(lp.Job), tier.ErrStaleJob))
	for i, res := range r.x.Lookup(append(tierKeys(0, 6), tierKeys(10, 12)...), nil) {
		require(res == tier.Miss, ErrAliased, "after Reset and a stale completion, key %d looks up as %v", i, res)
	}
	tierAccount(r.x, "after stale completions", &[4]int{r.x.Capacity(), 0, 0, 0})
	return nil
}

func tierEvents(r *run[Tier]) error {
	slots := r.x.Capacity()
	if slots > 512 {
		return skip("the event case fills the tier: %d slots is too many", slots)
	}
	r.x.TakeEvents(nil)
	tierStore(r, 0, slots)
	tierStore(r, slots, slots+1)
	stored, removed := map[tier.Key]bool{}, map[tier.Key]bool{}
	for _, e := range r.x.TakeEvents(nil) {
		require(e.Medium != "", ErrContract, "a %v event without a medium", e.Kind)
		for _, k := range e.Keys {
			switch e.Kind {
			case tier.BlockStored:
				stored[k] = true
			case tier.BlockRemoved:
				removed[k] = true
			}
		}
	}
	require(len(stored) == slots+1, ErrLost, "%d blocks stored, %d announced by BlockStored", slots+1, len(stored))
	require(len(removed) == 1, ErrLost, "one block evicted, %d announced by BlockRemoved", len(removed))
	return nil
}

func tierRemove(r *run[Tier]) error {
	rm, ok := r.x.(TierRemover)
	if !ok {
		return skip("the tier has no Remove")
	}
	n := tierSize(r.x)
	slots, half := r.x.Capacity(), n/2
	tierStore(r, 0, half)
	lp, err := r.x.PrepareLoad(tierKeys(0, 1))
	mustOK("PrepareLoad", err)
	sp, err := r.x.PrepareStore(tierKeys(half, half+1))
	mustOK("PrepareStore", err)
	r.x.TakeEvents(nil)
	// Blocks 1 and 2 are removable; 0 is load-pinned, half is being
	// stored, n+5 is absent, 1 is given twice.
	ks := append(tierKeys(0, 3), tierKey(half), tierKey(n+5), tierKey(1))
	removed, busy, err := rm.Remove(ks, nil)
	mustOK("Remove", err)
	wantBusy := []tier.Key{tierKey(0), tierKey(half)}
	require(removed == 2 && slices.Equal(busy, wantBusy), ErrContract, "Remove of 2 removable, 2 busy and 1 absent block removed %d and reported busy %v, want 2 and %v", removed, busy, wantBusy)
	for i, res := range r.x.Lookup(tierKeys(0, 3), nil) {
		want := [3]tier.Result{tier.Hit, tier.Miss, tier.Miss}[i]
		require(res == want, ErrAliased, "after Remove, block %d looks up as %v, want %v", i, res, want)
	}
	tierAccount(r.x, "after Remove", &[4]int{slots - half + 2 - 1, half - 3, 1, 1})
	var gone []tier.Key
	for _, e := range r.x.TakeEvents(nil) {
		require(e.Kind != tier.BlockStored && e.Medium != "", ErrContract, "Remove recorded a %v event (medium %q)", e.Kind, e.Medium)
		gone = append(gone, e.Keys...)
	}
	require(slices.Equal(gone, tierKeys(1, 3)), ErrLost, "Remove of blocks 1 and 2 announced %d keys by BlockRemoved", len(gone))
	mustOK("CompleteStore after a Remove that found it busy", r.x.CompleteStore(sp.Job, true))
	mustOK("CompleteLoad after a Remove that found it busy", r.x.CompleteLoad(lp.Job))
	tierVerify(r, 3, half)
	removed, busy, err = rm.Remove(tierKeys(0, 1), nil)
	require(err == nil && removed == 1 && len(busy) == 0, ErrContract, "Remove of a block whose load completed: %d removed, busy %v, %v", removed, busy, err)
	tierAccount(r.x, "after the jobs and a second Remove", &[4]int{slots - half + 2, half - 2, 0, 0})
	return nil
}
