package events

import (
	"fmt"
	"net"
	"strings"

	"github.com/locus-go/locus/pool"
)

// parseEndpoint turns a ZMQ endpoint into what package net listens on or
// dials: "tcp://host:port" (host "*" for every interface, as ZMQ writes it)
// or "ipc://path" (a Unix socket). Other transports (inproc, pgm) are not
// supported: their subscribers live in one process or need multicast, and
// neither is a router's setup. The error wraps pool.ErrInvalidConfig.
func parseEndpoint(endpoint string) (network, address string, err error) {
	scheme, rest, ok := strings.Cut(endpoint, "://")
	if !ok {
		return "", "", fmt.Errorf("events: %w: endpoint %q: want tcp://host:port or ipc://path", pool.ErrInvalidConfig, endpoint)
	}
	switch scheme {
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return "", "", fmt.Errorf("events: %w: endpoint %q: %v", pool.ErrInvalidConfig, endpoint, err)
		}
		if port == "" || strings.ContainsAny(port, "/ ") {
			return "", "", fmt.Errorf("events: %w: endpoint %q: no port", pool.ErrInvalidConfig, endpoint)
		}
		if host == "*" {
			host = ""
		}
		return "tcp", net.JoinHostPort(host, port), nil
	case "ipc":
		if rest == "" || strings.ContainsRune(rest, 0) {
			return "", "", fmt.Errorf("events: %w: endpoint %q: no path", pool.ErrInvalidConfig, endpoint)
		}
		return "unix", rest, nil
	}
	return "", "", fmt.Errorf("events: %w: endpoint %q: transport %q not supported (tcp or ipc)", pool.ErrInvalidConfig, endpoint, scheme)
}
