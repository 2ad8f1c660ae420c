package conformance

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/locus-go/locus/internal/race"
	"github.com/locus-go/locus/pool"
)

// TestTransport runs the transport suite. It checks, each case on fresh
// instances from newT:
//
//   - delivery: every handle a producer's Send accepted is delivered exactly
//     once, in the order that producer sent it, with every field intact,
//     repeats included, by many producers racing a draining owner, for
//     chunk lengths from 1 to several times any node, queue or batch size,
//     by thousands of producers made and retired while the owner drains,
//     and by one instance carrying millions of handles;
//     a Drain delivers everything published before it started, and passes
//     handles to the sink only while it runs; a chunk is copied at Send;
//     instances are independent; Send and Drain allocate nothing in steady
//     state;
//   - bounds, for a pool.BoundedTransport: its producers are TryProducers,
//     each queue (per producer or shared, as Bounds says) holds exactly
//     Capacity items, TrySend publishes what fits and reports pool.ErrFull,
//     Send waits on a full queue, and one Drain takes exactly the batch
//     limit of items from each queue, full or not (these cases skip an
//     unbounded transport);
//   - close and retirement: after Close every send path fails with
//     pool.ErrClosed for every chunk length and blocked producers return;
//     after Producer.Close the same holds for that producer, everything it
//     sent before is still delivered exactly once, and the transport then
//     forgets it (retired producers keep no memory or goroutines).
func TestTransport(t *testing.T, newT func(t *testing.T) pool.Transport) {
	t.Helper()
	transportSuite().runT(t, newT)
}

// CheckTransport runs the transport suite outside go test (it calls no
// testing function) and returns every violation found, joined with
// errors.Join. Cases that do not apply are left out, not reported.
func CheckTransport(newT func() (pool.Transport, error)) error {
	return transportSuite().runCheck(newT)
}

func transportSuite() suite[pool.Transport] {
	closeIt := func(tr pool.Transport) { _ = tr.Close() }
	return suite[pool.Transport]{cases: transportCases, abort: closeIt, release: closeIt}
}

// trRun is a transport case's run.
type trRun = run[pool.Transport]

var transportCases = []testCase[pool.Transport]{
	{name: "DrainEmpty", run: checkDrainEmpty, explanation: "a Drain with nothing sent delivers nothing, with no producer and with idle producers, every time"},
	{name: "DrainAfterSend", run: checkDrainAfterSend, explanation: "a Drain delivers everything published before it started (up to the batch limit of each queue): right after one Send of one handle, and after sends of several producers, hundreds of times"},
	{name: "ChunkLengths", run: checkChunkLengths, explanation: "a chunk of any length, from 1 to several times any node, queue or batch size, is delivered exactly, in order, also queued behind a short one, and so are hundreds of chunks pending at once"},
	{name: "HandleValues", run: checkHandleValues, explanation: "every field of every handle is delivered as sent, whatever its value (zero, maximal, random), and a handle sent n times is delivered n times"},
	{name: "ChunkCopied", run: checkCopied, explanation: "Send copies the chunk: the producer may overwrite it as soon as Send returns, at every chunk length"},
	{name: "EmptyChunk", run: checkEmptyChunk, explanation: "sending an empty chunk succeeds, delivers nothing and disturbs nothing sent around it"},
	{name: "ExactlyOnce", run: checkExactlyOnce, explanation: "with many producers, some made while the owner drains, racing each other and the owner's drains, every handle is delivered exactly once, each producer's in order, repeats and every field kept, nothing that was not sent"},
	{name: "Churn", run: checkChurn, explanation: "producers made, used and retired by the thousand, many live at once, racing each other and the owner's drains: every handle is delivered exactly once, each producer's in order, also the last ones a producer sends before it retires"},
	{name: "Volume", run: checkVolume, explanation: "one instance carries millions of handles, past any counter, index or buffer wrap, and delivers each exactly once, in order, unchanged"},
	{name: "Instances", run: checkInstances, explanation: "instances made by one constructor are independent: a handle is delivered only by the instance it was sent through, a full or closed instance does not affect another"},
	{name: "ZeroAllocs", run: checkTransportAllocs, whole: true, explanation: "in steady state Send (and TrySend) of a chunk and the Drain that delivers it allocate nothing, and neither does an idle Drain"},
	{name: "Bounds", run: checkBounds, explanation: "a bounded transport reports positive bounds that never change, and every producer it makes is a pool.TryProducer"},
	{name: "Capacity", run: checkCapacity, explanation: "a queue of a bounded transport holds exactly Capacity items, per producer or shared by every producer as Bounds says, every time it is filled; TrySend publishes from the front what fits and reports pool.ErrFull; a Send into a full queue blocks (without spinning) until a Drain makes room"},
	{name: "BatchLimit", run: checkBatch, explanation: "one Drain takes exactly min(Batch, items published) from each queue of a bounded transport, whether the queue is full or not, never splitting a chunk item"},
	{name: "Close", run: checkTransportClose, explanation: "after Close every send path (Send, TrySend, a producer made before or after) fails with pool.ErrClosed at every chunk length, and Close may be called again"},
	{name: "CloseWhileSending", run: checkCloseWhileSending, explanation: "Close while producers send: every Send returns, with nil or pool.ErrClosed, and every Send that starts after Close returned fails with pool.ErrClosed"},
	{name: "CloseReleasesBlocked", run: checkCloseReleases, explanation: "Close releases every producer blocked on a full bounded transport, on every send path, also one that a Drain woke and that blocked again"},
	{name: "Retire", run: checkRetire, explanation: "after Producer.Close later sends of that producer fail with pool.ErrClosed at every length, Close again returns nil, and everything it sent before (more than one batch, too) is delivered exactly once, also when producers retire while the owner drains; the Drain right after a producer retired still takes what every other producer published before it, wherever the retired one sat among them"},
	{name: "RetiredForgotten", run: checkRetiredForgotten, whole: true, explanation: "once what a retired producer sent is delivered, the transport forgets it: thousands of retired producers keep no memory and no goroutines"},
}

// boundsOf returns tr's bounds, if it is bounded.
func boundsOf(tr pool.Transport) (pool.Bounds, bool) {
	if b, ok := tr.(pool.BoundedTransport); ok {
		return b.Bounds(), true
	}
	return pool.Bounds{}, false
}

// fits reports whether n handles sent as one chunk fit into an empty queue
// of a transport with bounds bd, so that Send returns without a drain.
func fits(bd pool.Bounds, bounded bool, n int) bool {
	return !bounded || bd.Chunked || n <= bd.Capacity
}

// chunkLengths returns the chunk lengths a case sweeps, up to longest:
// every length from 1 to 40, the powers of two and their neighbours,
// multiples of 4096 and 1000, lengths drawn at random, and for a bounded
// transport its capacity and batch, their neighbours and small multiples.
func chunkLengths(bd pool.Bounds, bounded bool, longest int) []int {
	ls := []int{48, 100, 333, 1000, 3000, 3*4096 - 1, 3*4096 + 1, 10000}
	for n := 1; n <= 40; n++ {
		ls = append(ls, n)
	}
	for p := 64; p <= 1<<14; p *= 2 {
		ls = append(ls, p-1, p, p+1)
	}
	rng := rand.New(rand.NewPCG(uint64(bd.Capacity), uint64(bd.Batch)))
	for range 6 {
		ls = append(ls, 1+rng.IntN(longest))
	}
	if bounded {
		for _, b := range []int{bd.Capacity, bd.Batch} {
			for _, m := range []int{1, 2, 3} {
				ls = append(ls, m*b-1, m*b, m*b+1)
			}
		}
	}
	slices.Sort(ls)
	return slices.DeleteFunc(slices.Compact(ls), func(n int) bool { return n < 1 || n > longest })
}

// maxChunk is the longest chunk the cases send: several times any node,
// queue or batch size a transport is likely to have; lightChunk is the
// longest in a light run.
const (
	maxChunk   = 20000
	lightChunk = 2100
)

// scaled returns n, or a quarter of it under the race detector, which
// slows the exchanges down about tenfold.
func scaled(n int) int {
	if race.Enabled {
		return max(n/4, 1)
	}
	return n
}
