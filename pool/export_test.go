package pool

// LiveSenders returns how many senders p still tracks, for tests of
// retirement.
func LiveSenders[B Backing, T Transport, P ReusePolicy](p *Pool[B, T, P]) int {
	p.senders.mu.Lock()
	defer p.senders.mu.Unlock()
	return len(p.senders.live)
}
