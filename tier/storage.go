package tier

import (
	"fmt"

	"github.com/locus-go/locus/pool"
)

// Storage is the medium under a Manager: Slots() slots of BlockSize() bytes
// each. tier/host and tier/disk implement it; implement it to put a Manager
// over another medium (a remote store, a device).
//
// The Manager is the only caller. It calls WriteSlot and ReadSlot from its
// copy workers, several at a time, but never two calls on one slot at once
// when one of them is a write (see the package's invariant); the other
// methods from the owner goroutine. A storage never chooses slots, evicts
// or counts: the Manager does.
type Storage interface {
	// Medium names the medium on events and in Stats.
	Medium() Medium
	// BlockSize is the size of every block, in bytes (> 0).
	BlockSize() int
	// Slots is the number of slots (> 0); the tier's capacity.
	Slots() int
	// WriteSlot writes block src (BlockSize bytes) of key k into slot,
	// stamped with write generation gen. It returns once the block is
	// written as far as the medium promises (for a file, handed to the
	// kernel; not synced).
	WriteSlot(slot int, k Key, gen uint64, src []byte) error
	// ReadSlot reads the block of key k written with generation gen from
	// slot into dst (BlockSize bytes). It returns an error wrapping
	// ErrCorrupt if the slot does not hold exactly that block, intact:
	// another key, another generation (stale), a torn or corrupt write.
	// On error dst holds garbage and must not be used.
	ReadSlot(slot int, k Key, gen uint64, dst []byte) error
	// Recovered lists the blocks the medium still holds from an earlier
	// run, served again by a new Manager (nil for a volatile medium), and
	// the lowest write generation the Manager may use from now on.
	Recovered() (blocks []Recovered, nextGen uint64)
	// Reset forgets every block: blocks written with a generation below
	// floor must never be recovered again. The Manager calls it from
	// Reset, with the first generation it will use afterwards.
	Reset(floor uint64) error
	// Close releases the medium. The Manager calls it from Close, after
	// its copy workers have stopped.
	Close() error
}

// BatchStorage is a Storage that moves the blocks of one job in one call:
// a remote medium sends them in one pipelined round trip instead of one
// per block (tier/redis implements it). A Manager whose storage implements
// it calls WriteSlots and ReadSlots for every Store or Load job of more
// than one block, holding the guard of every slot of the job for the call;
// WriteSlot and ReadSlot for a job of one block. Implement it only where a
// batch is cheaper than its blocks one by one; a memory or file medium
// gains nothing.
type BatchStorage interface {
	Storage
	// WriteSlots writes srcs[i], the block of keys[i], into slots[i], all
	// stamped with generation gen, as WriteSlot does each. It returns the
	// index of the first block that failed and its error, or -1 and nil;
	// the blocks after a failed one may or may not have been written.
	WriteSlots(slots []int, keys []Key, gen uint64, srcs [][]byte) (failed int, err error)
	// ReadSlots reads the block of keys[i] written with generation gens[i]
	// from slots[i] into dsts[i], with ReadSlot's checks per block. It
	// returns as WriteSlots does; the dst of the failed block and of every
	// block after it holds garbage.
	ReadSlots(slots []int, keys []Key, gens []uint64, dsts [][]byte) (failed int, err error)
}

// DirectStorage is a Storage whose slots an engine may also write itself,
// between PrepareStore and CompleteStore (a DMA from the device into the
// host rows of the plan's slots: tier/host's Slot). The medium keeps its
// own record of what a slot holds (what ReadSlot checks, what a restart
// recovers, a header that other processes read), which such a write
// bypasses, so the Manager keeps it right: PrepareStore invalidates every
// slot it hands out before it returns the plan (the engine may write from
// then on), and CompleteStore with ok commits every stored slot (the
// engine has written it by then). Store, which copies on the Manager's
// workers through WriteSlot, needs neither. Implement it for a medium an
// engine can address directly; a file or a remote store cannot be.
type DirectStorage interface {
	Storage
	// Invalidate records that slot holds no block. It fails only on a
	// closed medium.
	Invalidate(slot int) error
	// Commit records that slot holds the block of key k, written with
	// generation gen. It fails only on a closed medium.
	Commit(slot int, k Key, gen uint64) error
}

// Recovered is a block a Storage holds from an earlier run.
type Recovered struct {
	Slot int
	Key  Key
	Gen  uint64
}

// CheckSlot is the argument check every Storage's WriteSlot and ReadSlot
// starts with: slot in [0, slots) and a buffer of exactly blockSize bytes,
// else an error wrapping pool.ErrInvalidArgument that names the storage
// (who). A Storage of your own can use it; whether the storage is closed is
// the storage's to check first.
func CheckSlot(who string, slot, slots, blockSize int, buf []byte) error {
	switch {
	case slot < 0 || slot >= slots:
		return fmt.Errorf("%w: %s: slot %d of %d", pool.ErrInvalidArgument, who, slot, slots)
	case len(buf) != blockSize:
		return fmt.Errorf("%w: %s: %d-byte buffer for %d-byte blocks", pool.ErrInvalidArgument, who, len(buf), blockSize)
	}
	return nil
}
