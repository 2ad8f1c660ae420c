package conformance

import (
	"bytes"
	"errors"
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

func tierSize(x Tier) (int, error) {
	if n := x.Capacity(); n < tierMin || x.BlockSize() <= 0 {
		return 0, violationf(ErrContract, "a tier of %d slots of %d bytes: the suite needs %d slots or more", n, x.BlockSize(), tierMin)
	}
	return min(x.Capacity(), 256), nil
}

// tierWait drains until every job in want is reported, and returns the
// reports. A job never reported is lost.
func tierWait(r *run[Tier], want ...tier.Job) ([]tier.Done, error) {
	left := slices.Clone(want)
	var out []tier.Done
	deadline := time.Now().Add(20 * time.Second)
	for len(left) > 0 {
		done, err := r.x.Drain(nil)
		if err != nil {
			return out, violationf(ErrContract, "Drain: %v", err)
		}
		for _, d := range done {
			i := slices.Index(left, d.Job)
			if i < 0 {
				return out, violationf(ErrDuplicated, "Drain reported %v, which is not in flight", d.Job)
			}
			left = slices.Delete(left, i, i+1)
			out = append(out, d)
		}
		if len(done) == 0 {
			if time.Now().After(deadline) || r.ctx.Err() != nil {
				return out, violationf(ErrLost, "%d jobs never reported by Drain", len(left))
			}
			runtime.Gosched()
			time.Sleep(50 * time.Microsecond)
		}
	}
	return out, nil
}

// tierAccount checks the identity and, if want is not nil, the four counts.
func tierAccount(x Tier, what string, want *[4]int) error {
	s := x.Stats()
	got := [4]int{s.Free, s.Evictable, s.StorePending, s.LoadPinned}
	if got[0]+got[1]+got[2]+got[3] != s.Capacity || s.Capacity != x.Capacity() {
		return violationf(ErrAccounting, "%s: free %d + evictable %d + store-pending %d + load-pinned %d != capacity %d", what, got[0], got[1], got[2], got[3], s.Capacity)
	}
	if want != nil && got != *want {
		return violationf(ErrAccounting, "%s: free, evictable, store-pending, load-pinned = %v, want %v", what, got, *want)
	}
	return nil
}

// tierStore stores blocks lo..hi through Store and waits for the store.
func tierStore(r *run[Tier], lo, hi int) error {
	bs := r.x.BlockSize()
	srcs := make([][]byte, 0, hi-lo)
	for i := lo; i < hi; i++ {
		srcs = append(srcs, tierBlock(i, bs))
	}
	ks := tierKeys(lo, hi)
	plan, err := r.x.Store(ks, srcs)
	if err != nil {
		return contractErr(fmt.Sprintf("Store of blocks %d..%d", lo, hi), err)
	}
	if len(plan.Keys) != hi-lo {
		return violationf(ErrContract, "Store of %d new blocks planned %d", hi-lo, len(plan.Keys))
	}
	for i, res := range r.x.Lookup(ks, nil) {
		if res == tier.Hit {
			return violationf(ErrAliased, "block %d is a HIT before the Drain that reports its store", lo+i)
		}
	}
	done, err := tierWait(r, plan.Job)
	if err != nil {
		return err
	}
	if !done[0].OK {
		return violationf(ErrLost, "the store of blocks %d..%d failed: %v", lo, hi, done[0].Err)
	}
	return nil
}

// tierVerify loads blocks lo..hi and compares their bytes.
func tierVerify(r *run[Tier], lo, hi int) error {
	bs := r.x.BlockSize()
	ks := tierKeys(lo, hi)
	for i, res := range r.x.Lookup(ks, nil) {
		if res != tier.Hit {
			return violationf(ErrLost, "stored block %d looks up as %v", lo+i, res)
		}
	}
	dsts := make([][]byte, hi-lo)
	for i := range dsts {
		dsts[i] = make([]byte, bs)
	}
	j, err := r.x.Load(ks, dsts)
	if err != nil {
		return violationf(ErrLost, "Load of stored blocks %d..%d: %v", lo, hi, err)
	}
	done, err := tierWait(r, j)
	if err != nil {
		return err
	}
	if !done[0].OK {
		return violationf(ErrLost, "the load of stored blocks %d..%d failed: %v", lo, hi, done[0].Err)
	}
	for i := range dsts {
		if !bytes.Equal(dsts[i], tierBlock(lo+i, bs)) {
			return violationf(ErrCorrupted, "block %d loaded with other bytes than stored", lo+i)
		}
	}
	return nil
}

// tierCheck runs the steps of a tier case in order. The first step that
// finds a violation records it, and every later step's function is not
// run (its arguments are still evaluated): a case reads as the list of its
// steps and reports what a chain of early returns would.
type tierCheck struct {
	*run[Tier]
	err error
}

// step runs f unless an earlier step failed.
func (c *tierCheck) step(f func() error) {
	if c.err == nil {
		c.err = f()
	}
}

// call runs f as a step that must succeed; what names it in a violation.
func (c *tierCheck) call(what string, f func() error) {
	c.step(func() error { return contractErr(what, f()) })
}

// refused runs f as a step that must fail with want.
func (c *tierCheck) refused(what string, want error, f func() error) {
	c.step(func() error {
		if err := f(); !errors.Is(err, want) {
			return violationf(ErrContract, "%s: %v, want %v", what, err, want)
		}
		return nil
	})
}

func (c *tierCheck) prepareStore(what string, keys []tier.Key) (p tier.StorePlan) {
	c.call(what, func() (err error) { p, err = c.x.PrepareStore(keys); return err })
	return p
}

func (c *tierCheck) prepareLoad(keys []tier.Key) (p tier.LoadPlan) {
	c.call("PrepareLoad", func() (err error) { p, err = c.x.PrepareLoad(keys); return err })
	return p
}

func (c *tierCheck) store(lo, hi int)  { c.step(func() error { return tierStore(c.run, lo, hi) }) }
func (c *tierCheck) verify(lo, hi int) { c.step(func() error { return tierVerify(c.run, lo, hi) }) }
func (c *tierCheck) account(what string, want *[4]int) {
	c.step(func() error { return tierAccount(c.x, what, want) })
}

func tierRoundTrip(r *run[Tier]) error {
	n, err := tierSize(r.x)
	if err != nil {
		return err
	}
	c := &tierCheck{run: r}
	for round := range 3 {
		lo := round * n
		// The eviction policy is the tier's: only the blocks just
		// stored are sure to be there.
		for _, h := range [][2]int{{lo, lo + n/2}, {lo + n/2, lo + n}} {
			c.store(h[0], h[1])
			c.verify(h[0], h[1])
		}
		c.account("after a round trip", nil)
	}
	return c.err
}

func tierAccounting(r *run[Tier]) error {
	n, err := tierSize(r.x)
	if err != nil {
		return err
	}
	c, slots := &tierCheck{run: r}, r.x.Capacity()
	c.account("empty", &[4]int{slots, 0, 0, 0})
	c.store(0, n/2)
	c.account("after a store", &[4]int{slots - n/2, n / 2, 0, 0})
	sp := c.prepareStore("PrepareStore", tierKeys(n/2, n/2+2))
	lp := c.prepareLoad(tierKeys(0, 3))
	c.account("with a store and a load prepared", &[4]int{slots - n/2 - 2, n/2 - 3, 2, 3})
	c.call("CompleteStore(failed)", func() error { return r.x.CompleteStore(sp.Job, false) })
	c.call("CompleteLoad", func() error { return r.x.CompleteLoad(lp.Job) })
	c.account("after both completed (the store failed)", &[4]int{slots - n/2, n / 2, 0, 0})
	c.call("Reset", r.x.Reset)
	c.account("after Reset", &[4]int{slots, 0, 0, 0})
	return c.err
}

func tierPins(r *run[Tier]) error {
	slots := r.x.Capacity()
	if slots > 512 {
		return skip("the pin case fills the tier: %d slots is too many", slots)
	}
	c, pinned := &tierCheck{run: r}, slots/2
	c.store(0, slots)
	lp := c.prepareLoad(tierKeys(0, pinned))
	// Too many: refused, nothing evicted.
	c.refused("PrepareStore of more blocks than are evictable", tier.ErrNoSpace, func() error {
		_, err := r.x.PrepareStore(tierKeys(slots, slots+slots-pinned+1))
		return err
	})
	c.step(func() error {
		if s := r.x.Stats(); s.Evictable != slots-pinned {
			return violationf(ErrAccounting, "a refused PrepareStore evicted: %d evictable, want %d", s.Evictable, slots-pinned)
		}
		return nil
	})
	// Exactly enough, with one pinned and one unpinned key of the call
	// present: only unpinned blocks outside the call go.
	ks := append(tierKeys(pinned, pinned+1), tierKeys(slots, slots+slots-pinned-1)...)
	sp := c.prepareStore("PrepareStore of as many blocks as are evictable", ks)
	c.step(func() error {
		for _, k := range sp.Evicted {
			if i := slices.Index(tierKeys(0, pinned+1), k); i >= 0 {
				return violationf(ErrAliased, "block %d was evicted while pinned or while among the keys being stored", i)
			}
		}
		for i, res := range r.x.Lookup(tierKeys(0, pinned+1), nil) {
			if res != tier.Hit {
				return violationf(ErrLost, "pinned block %d looks up as %v after a store that evicted", i, res)
			}
		}
		return nil
	})
	c.call("CompleteStore", func() error { return r.x.CompleteStore(sp.Job, true) })
	c.call("CompleteLoad", func() error { return r.x.CompleteLoad(lp.Job) })
	c.verify(0, pinned+1)
	c.account("after the pins", &[4]int{0, slots, 0, 0})
	return c.err
}

func tierJobs(r *run[Tier]) error {
	c := &tierCheck{run: r}
	c.store(0, 4)
	sp := c.prepareStore("PrepareStore", tierKeys(4, 6))
	lp := c.prepareLoad(tierKeys(0, 2))
	c.call("CompleteStore", func() error { return r.x.CompleteStore(sp.Job, true) })
	c.refused("a second CompleteStore of one job", tier.ErrInvalidJob, func() error { return r.x.CompleteStore(sp.Job, true) })
	c.refused("CompleteLoad of the zero job", tier.ErrInvalidJob, func() error { return r.x.CompleteLoad(tier.Job{}) })
	var op tier.StorePlan
	c.step(func() error {
		other, err := r.another()
		if err != nil {
			return err
		}
		op, err = other.PrepareStore(tierKeys(0, 1))
		return contractErr("PrepareStore on a second tier", err)
	})
	c.refused("CompleteStore of another tier's job", tier.ErrInvalidJob, func() error { return r.x.CompleteStore(op.Job, true) })
	// A reset with jobs in flight: their completions are stale.
	sp2 := c.prepareStore("PrepareStore", tierKeys(10, 12))
	c.call("Reset", r.x.Reset)
	c.refused("CompleteStore of a job issued before Reset", tier.ErrStaleJob, func() error { return r.x.CompleteStore(sp2.Job, true) })
	c.refused("CompleteLoad of a job issued before Reset", tier.ErrStaleJob, func() error { return r.x.CompleteLoad(lp.Job) })
	c.step(func() error {
		for i, res := range r.x.Lookup(append(tierKeys(0, 6), tierKeys(10, 12)...), nil) {
			if res != tier.Miss {
				return violationf(ErrAliased, "after Reset and a stale completion, key %d looks up as %v", i, res)
			}
		}
		return nil
	})
	c.account("after stale completions", &[4]int{r.x.Capacity(), 0, 0, 0})
	return c.err
}

func tierEvents(r *run[Tier]) error {
	slots := r.x.Capacity()
	if slots > 512 {
		return skip("the event case fills the tier: %d slots is too many", slots)
	}
	r.x.TakeEvents(nil)
	if err := tierStore(r, 0, slots); err != nil {
		return err
	}
	if err := tierStore(r, slots, slots+1); err != nil {
		return err
	}
	stored, removed := map[tier.Key]bool{}, map[tier.Key]bool{}
	for _, e := range r.x.TakeEvents(nil) {
		if e.Medium == "" {
			return violationf(ErrContract, "a %v event without a medium", e.Kind)
		}
		for _, k := range e.Keys {
			switch e.Kind {
			case tier.BlockStored:
				stored[k] = true
			case tier.BlockRemoved:
				removed[k] = true
			}
		}
	}
	if len(stored) != slots+1 {
		return violationf(ErrLost, "%d blocks stored, %d announced by BlockStored", slots+1, len(stored))
	}
	if len(removed) != 1 {
		return violationf(ErrLost, "one block evicted, %d announced by BlockRemoved", len(removed))
	}
	return nil
}

func tierRemove(r *run[Tier]) error {
	rm, ok := r.x.(TierRemover)
	if !ok {
		return skip("the tier has no Remove")
	}
	n, err := tierSize(r.x)
	if err != nil {
		return err
	}
	c, slots, half := &tierCheck{run: r}, r.x.Capacity(), n/2
	c.store(0, half)
	lp := c.prepareLoad(tierKeys(0, 1))
	sp := c.prepareStore("PrepareStore", tierKeys(half, half+1))
	c.step(func() error {
		r.x.TakeEvents(nil)
		// Blocks 1 and 2 are removable; 0 is load-pinned, half is being
		// stored, n+5 is absent, 1 is given twice.
		ks := append(tierKeys(0, 3), tierKey(half), tierKey(n+5), tierKey(1))
		removed, busy, err := rm.Remove(ks, nil)
		if err != nil {
			return contractErr("Remove", err)
		}
		if want := []tier.Key{tierKey(0), tierKey(half)}; removed != 2 || !slices.Equal(busy, want) {
			return violationf(ErrContract, "Remove of 2 removable, 2 busy and 1 absent block removed %d and reported busy %v, want 2 and %v", removed, busy, want)
		}
		for i, res := range r.x.Lookup(tierKeys(0, 3), nil) {
			if want := [3]tier.Result{tier.Hit, tier.Miss, tier.Miss}[i]; res != want {
				return violationf(ErrAliased, "after Remove, block %d looks up as %v, want %v", i, res, want)
			}
		}
		return nil
	})
	c.account("after Remove", &[4]int{slots - half + 2 - 1, half - 3, 1, 1})
	c.step(func() error {
		var gone []tier.Key
		for _, e := range r.x.TakeEvents(nil) {
			if e.Kind == tier.BlockStored || e.Medium == "" {
				return violationf(ErrContract, "Remove recorded a %v event (medium %q)", e.Kind, e.Medium)
			}
			gone = append(gone, e.Keys...)
		}
		if !slices.Equal(gone, tierKeys(1, 3)) {
			return violationf(ErrLost, "Remove of blocks 1 and 2 announced %d keys by BlockRemoved", len(gone))
		}
		return nil
	})
	c.call("CompleteStore after a Remove that found it busy", func() error { return r.x.CompleteStore(sp.Job, true) })
	c.call("CompleteLoad after a Remove that found it busy", func() error { return r.x.CompleteLoad(lp.Job) })
	c.verify(3, half)
	c.step(func() error {
		if removed, busy, err := rm.Remove(tierKeys(0, 1), nil); err != nil || removed != 1 || len(busy) != 0 {
			return violationf(ErrContract, "Remove of a block whose load completed: %d removed, busy %v, %v", removed, busy, err)
		}
		return nil
	})
	c.account("after the jobs and a second Remove", &[4]int{slots - half + 2, half - 2, 0, 0})
	return c.err
}
