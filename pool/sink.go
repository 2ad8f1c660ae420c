package pool

// Sink receives the chunks that a Transport drains. A pool passes its own Sink
// to Transport.Drain; the transport calls Put once per chunk (or per batch of
// handles). Put is a concrete call, so a transport's drain loop pays no
// dictionary or interface dispatch per chunk.
type Sink struct {
	c  *core
	fn func(chunk []Handle)
}

// NewSink returns a Sink that passes every chunk to fn, for testing or
// instrumenting a transport outside a pool. fn must not keep chunk: the
// transport may reuse it after Put returns. fn must not call the Drain of
// the transport that delivers to it: the in-tree transports ignore such a
// nested Drain.
func NewSink(fn func(chunk []Handle)) *Sink { return &Sink{fn: fn} }

// Put takes a chunk of remotely freed handles. A pool's sink validates every
// handle, frees the good ones and counts and remembers the bad ones for the
// Drain to report. Put does not keep chunk. A nil or zero Sink drops it.
func (s *Sink) Put(chunk []Handle) {
	if s == nil {
		return
	}
	if s.c != nil {
		s.c.release(chunk)
		return
	}
	if s.fn != nil {
		s.fn(chunk)
	}
}
