package host

// SetAfterCopy makes p call fn between a Read's copy and its second check,
// where a concurrent owner's write would land.
func (p *Peer) SetAfterCopy(fn func()) { p.afterCopy = fn }
