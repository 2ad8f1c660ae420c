package pool

import "math/bits"

// Stats is a snapshot of a pool's accounting. Every count is exact:
//
//	Allocs - Frees == Live
//	Live + Free == Capacity
//	RemoteSubmitted >= RemoteDrained, equal once producers are quiet and the owner has drained
//
// Frees counts blocks returned to the free list, locally or by a drain;
// RemoteDrained counts handles a drain took out of the transport, including
// any it then rejected.
//
// Pool.Stats returns the counts as they are now, to the owner; Pool.Snapshot
// returns them as the owner last published them, to any goroutine.
type Stats struct {
	BlockSize int   // bytes per block
	Capacity  int   // blocks in the pool
	Order     Order // the reuse order

	Live      int // blocks allocated and not yet freed back to the free list
	Free      int // blocks on the free list
	HighWater int // the most blocks ever live at once

	Allocs uint64 // blocks handed out
	Frees  uint64 // blocks freed back to the free list

	RemoteSubmitted uint64 // handles accepted by senders
	RemoteDrained   uint64 // handles taken out of the transport by drains
	Rejected        uint64 // handles refused: stale, double-freed, foreign, zero or out of range

	// Drains counts the transport drains: every Drain and every drain an
	// allocation did because the free list was short.
	Drains uint64
	// DrainSizes is the distribution of handles taken per drain:
	// DrainSizes[0] counts drains that took none, DrainSizes[k] for k >= 1
	// those that took 2^(k-1) to 2^k - 1, and the last bucket also counts
	// everything larger. Its sum is Drains; the handles drained in all are
	// RemoteDrained.
	DrainSizes [DrainBuckets]uint64
}

// DrainBuckets is the number of buckets of Stats.DrainSizes.
const DrainBuckets = 24

// DrainBucketBound returns the largest drain size that bucket k of
// Stats.DrainSizes counts: 0 for bucket 0, 2^k - 1 after it, and -1 (no bound)
// for the last bucket.
func DrainBucketBound(k int) int {
	switch {
	case k <= 0:
		return 0
	case k >= DrainBuckets-1:
		return -1
	}
	return 1<<k - 1
}

// drainBucket returns the bucket of a drain that took n handles.
func drainBucket(n uint64) int {
	return min(bits.Len64(n), DrainBuckets-1)
}
