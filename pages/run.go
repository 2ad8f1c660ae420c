package pages

import (
	"encoding/binary"
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Run names one allocation of a run of pages: the Pool it came from, the
// run's first page and that page's generation at the allocation.
//
// A Pool bumps the generation of a run's first page when it hands the run
// out and again when the run is freed or evicted, so a Run matches only
// between those two events, exactly as a pool.Handle matches its block. A
// stale Run (freed, evicted, double-freed, or kept after its pages were
// reused), a Run of another Pool, the zero Run and forged ones are rejected
// by every call with an error matching pool.ErrInvalidHandle; they never
// reach the pages of a live run.
//
// Runs are comparable and may be copied, stored and sent across goroutines;
// only the owner of the Pool may use them.
type Run struct {
	gen   uint64 // odd while the run is allocated
	first uint32
	pool  uint32 // the owning Pool's id; never 0 for a Run a Pool issued
}

// RunSize is the length of a Run's binary encoding.
const RunSize = 16

// First returns the index of the run's first page.
func (r Run) First() int { return int(r.first) }

// Generation returns the generation the run was issued with.
func (r Run) Generation() uint64 { return r.gen }

// IsZero reports whether r is the zero Run.
func (r Run) IsZero() bool { return r == Run{} }

// String formats the run for debugging, as pages<id>/page<first>@<generation>.
func (r Run) String() string {
	if r.IsZero() {
		return "pages.Run{}"
	}
	return fmt.Sprintf("pages%d/page%d@%d", r.pool, r.first, r.gen)
}

// AppendBinary appends the run's 16-byte little-endian encoding to b: the
// same layout as a pool.Handle (generation, page index, pool id).
func (r Run) AppendBinary(b []byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint64(b, r.gen)
	b = binary.LittleEndian.AppendUint32(b, r.first)
	return binary.LittleEndian.AppendUint32(b, r.pool), nil
}

// MarshalBinary returns the run's 16-byte encoding, for keeping a run
// outside Go memory. Decoding gives back an equal Run; the Pool validates it
// like any other.
func (r Run) MarshalBinary() ([]byte, error) {
	return r.AppendBinary(make([]byte, 0, RunSize))
}

// UnmarshalBinary decodes a run written by MarshalBinary. It rejects data
// that is not exactly RunSize bytes with an error wrapping
// pool.ErrInvalidArgument and leaves r unchanged. It does not check that
// the run is live: the Pool does that on use.
func (r *Run) UnmarshalBinary(data []byte) error {
	if len(data) != RunSize {
		return fmt.Errorf("%w: run encoding is %d bytes, want %d", pool.ErrInvalidArgument, len(data), RunSize)
	}
	r.gen = binary.LittleEndian.Uint64(data)
	r.first = binary.LittleEndian.Uint32(data[8:])
	r.pool = binary.LittleEndian.Uint32(data[12:])
	return nil
}
