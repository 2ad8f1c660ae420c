package adapters

import (
	"sync"
	"sync/atomic"
)

// decodeChunk is the bytes of weights one claim of a parallel decode
// writes: large enough that claiming costs nothing next to the work,
// small enough that a late helper finds work left.
const decodeChunk = 256 << 10

// decodeJob is one int8 decode split across the owner and the copy
// workers in contiguous ranges of groups, claimed chunk by chunk from an
// atomic counter. The owner fills it before sending it on parts and reads
// or refills it only after wg.Wait: a helper's writes to dst happen
// before its wg.Done, which happens before the owner's Wait returns.
type decodeJob struct {
	q        Quant
	dst, src []byte
	groups   int // groups of the encoding
	per      int // groups per claim
	next     atomic.Int64
	wg       sync.WaitGroup
}

// run decodes claimed chunks until none is left.
func (j *decodeJob) run() {
	for {
		g0 := int(j.next.Add(1)-1) * j.per
		if g0 >= j.groups {
			return
		}
		j.q.decodeGroups(j.dst, j.src, g0, min(g0+j.per, j.groups))
	}
}

// decode is Quant.Decode for the owner's synchronous loads (Acquire,
// Pin): a large adapter is decoded by the owner together with the copy
// workers that are idle (WithWorkers), each a contiguous range of groups
// at a time. A worker busy with a Prefetch does not delay it: the owner
// takes back the requests no worker picked up once it runs out of work,
// and waits only for helpers already decoding a chunk.
func (m *Manager) decode(dst, src []byte) error {
	q := m.cfg.quant
	if sz := q.EncodedSize(len(dst)); sz < 0 || len(src) != sz || len(dst) < 2*decodeChunk || m.parts == nil {
		return q.Decode(dst, src)
	}
	j := &m.job
	j.q, j.dst, j.src = q, dst, src
	j.groups = q.groups(len(dst))
	j.per = max(1, decodeChunk/(2*q.Group))
	j.next.Store(0)
	chunks := (j.groups + j.per - 1) / j.per
	for range min(m.cfg.workers, chunks-1) {
		j.wg.Add(1)
		select {
		case m.parts <- j:
		default:
			j.wg.Done()
		}
	}
	j.run()
	for taken := false; !taken; {
		select {
		case <-m.parts: // a request no worker picked up
			j.wg.Done()
		default:
			taken = true
		}
	}
	j.wg.Wait()
	j.dst, j.src = nil, nil
	return nil
}
