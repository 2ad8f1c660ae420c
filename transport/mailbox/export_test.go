package mailbox

// Boxes returns how many mailboxes t keeps: live producers' and closed ones'
// not yet drained. Tests use it to see retired mailboxes go.
func Boxes(t *Transport) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.boxes.Load())
}
