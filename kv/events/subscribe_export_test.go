package events

// DropConnection closes a subscription's connection, as a network failure
// would: it connects again by itself.
func DropConnection(s *Subscription) { s.closeConn() }

// WithRedialHold makes a subscription wait, each time it lost its
// connection, for a value from hold (or its close) before it connects
// again.
func WithRedialHold(hold chan struct{}) SubscribeOption {
	return subOptionFunc(func(c *subConfig) { c.hold = hold })
}
