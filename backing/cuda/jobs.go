package cuda

import (
	"fmt"

	"github.com/locus-go/locus/internal/ids"
)

// Job names one submitted batch of a Copier. The zero Job is never valid.
// A job is reported finished once, by Poll or by Wait; after that its id is
// stale and every call with it fails with ErrJob, as does a job of another
// copier. Jobs are comparable.
type Job struct {
	gen    uint64 // odd while pending
	slot   uint32
	copier uint32
}

// String formats the job for logs, as copier<id>/job<slot>@<generation>.
func (j Job) String() string {
	return fmt.Sprintf("copier%d/job%d@%d", j.copier, j.slot, j.gen)
}

// copierIDs numbers the copiers, so that a job names its copier.
var copierIDs ids.Source

// jobs hands out generation-checked job ids and keeps the pending ones in
// submission order. Its slots are reused; a slot's generation is bumped when
// it starts a job and again when the job is retired, as pool handles are.
type jobs struct {
	id      uint32
	gens    []uint64
	free    []uint32
	pending []uint32 // slots, oldest first
}

// start takes a slot for a new job and returns the job and its slot.
func (t *jobs) start() (Job, uint32) {
	var s uint32
	if n := len(t.free); n > 0 {
		s = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		s = uint32(len(t.gens))
		t.gens = append(t.gens, 0)
	}
	t.gens[s]++
	t.pending = append(t.pending, s)
	return Job{gen: t.gens[s], slot: s, copier: t.id}, s
}

// lookup returns the slot of a pending job, or an error wrapping ErrJob.
func (t *jobs) lookup(j Job) (uint32, error) {
	if j.copier != t.id || int(j.slot) >= len(t.gens) || t.gens[j.slot] != j.gen || j.gen%2 == 0 {
		return 0, fmt.Errorf("%w: %v", ErrJob, j)
	}
	return j.slot, nil
}

// job returns the pending job in slot s.
func (t *jobs) job(s uint32) Job { return Job{gen: t.gens[s], slot: s, copier: t.id} }

// retire ends the pending job in slot s and frees the slot.
func (t *jobs) retire(s uint32) {
	t.gens[s]++
	for i, p := range t.pending {
		if p == s {
			t.pending = append(t.pending[:i], t.pending[i+1:]...)
			break
		}
	}
	t.free = append(t.free, s)
}
