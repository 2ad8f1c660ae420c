package sharded

// Queues returns how many producer queues t keeps: live producers' and
// closed ones' not yet drained. Tests use it to see retired queues go.
func Queues(t *Transport) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queues.Load())
}
