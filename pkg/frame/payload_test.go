package frame

import "testing"

func TestCustomPayloadValue(t *testing.T) {
	payload := []byte{0, 2, 0, 1, 'a', 0, 0, 0, 1, 'x', 0, 1, 'b', 0, 0, 0, 2, 'y', 'z'}
	req := AppendFrame(nil, V4, false, FlagCustomPayload, 1, OpQuery, payload)
	// A response puts a tracing id and warnings first.
	body := append(make([]byte, 16), 0, 1, 0, 1, 'w')
	body = append(body, payload...)
	resp := AppendFrame(nil, V4, true, FlagCustomPayload|FlagTracing|FlagWarning, 1, OpResult, body)
	for _, f := range [][]byte{req, resp} {
		if v, ok := CustomPayloadValue(f, "b"); !ok || string(v) != "yz" {
			t.Errorf("b = %q, %v; want yz", v, ok)
		}
		if _, ok := CustomPayloadValue(f, "c"); ok {
			t.Error("c found")
		}
		for n := 0; n < len(f); n++ {
			CustomPayloadValue(f[:n], "b") // truncated: no panic
		}
	}
	if _, ok := CustomPayloadValue(AppendQuery(nil, V4, 1, "SELECT 1", 1, 0), "b"); ok {
		t.Error("found a value without a custom payload")
	}
}
