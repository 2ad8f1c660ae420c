package pool

// Stats is a snapshot of a pool's accounting. Every count is exact:
//
//	Allocs - Frees == Live
//	Live + Free == Capacity
//	RemoteSubmitted >= RemoteDrained, equal once producers are quiet and the owner has drained
//
// Frees counts blocks returned to the free list, locally or by a drain;
// RemoteDrained counts handles a drain took out of the transport, including
// any it then rejected.
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
}
