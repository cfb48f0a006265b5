package backend

import (
	"testing"
)

// Cassandra pauses reading a connection that exceeds its in-flight limits
// unless the client asked for OVERLOADED errors instead; a paused shared
// backend connection would freeze every client behind it.
func TestStartupAsksThrowOnOverload(t *testing.T) {
	n := newFakeNode(t, nil)
	dialFake(t, n, DialConfig{}, nil)
	s := n.Startups()
	if len(s) != 1 {
		t.Fatalf("got %d STARTUPs, want 1", len(s))
	}
	// The server compares the value with the string "1".
	if got, ok := s[0]["THROW_ON_OVERLOAD"]; !ok || got != "1" {
		t.Errorf("STARTUP options %v: THROW_ON_OVERLOAD = %q (present %v), want \"1\"", s[0], got, ok)
	}
}
