package frame

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

// testBatch is an unlogged batch of a query child and a prepared child,
// with every optional parameter the version has.
func testBatch(v byte) *message.Batch {
	serial := primitive.ConsistencyLevelSerial
	b := &message.Batch{
		Type: primitive.BatchTypeUnlogged,
		Children: []*message.BatchChild{
			{Query: "INSERT INTO ks.t (k, v) VALUES (?, ?)", Values: []*primitive.Value{
				primitive.NewValue(valInt), primitive.NewValue(valText)}},
			{Id: []byte{0xab, 0xcd}, Values: []*primitive.Value{
				primitive.NewValue(valText), primitive.NewNullValue(), primitive.NewValue(valInt)}},
			{Query: "UPDATE ks.t SET v = 1 WHERE k = 2"},
		},
		Consistency:       primitive.ConsistencyLevelLocalQuorum,
		SerialConsistency: &serial,
	}
	if v >= V5 {
		b.Keyspace = "ks"
		b.NowInSeconds = ptr[int32](77)
	}
	return b
}

func TestParseBatchAgainstLibrary(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			msg := testBatch(v)
			body := routingLibBody(t, v, msg)
			b, err := ParseBatch(v, body)
			if err != nil {
				t.Fatal(err)
			}
			if b.Type != BatchUnlogged || b.Count != 3 {
				t.Errorf("type %d, %d children; want %d, 3", b.Type, b.Count, BatchUnlogged)
			}
			checkParams(t, b.Params, &message.QueryOptions{
				Consistency: msg.Consistency, SerialConsistency: msg.SerialConsistency,
				Keyspace: msg.Keyspace, NowInSeconds: msg.NowInSeconds}, 0)
			cl, err := Consistency(v, OpBatch, body)
			if err != nil || cl != uint16(msg.Consistency) {
				t.Errorf("Consistency = %#x, %v; want %#x", cl, err, msg.Consistency)
			}
			it := b.Children()
			var i int
			for c, ok := it.Next(); ok; c, ok = it.Next() {
				want := msg.Children[i]
				if want.Id != nil {
					if c.Kind != BatchChildPrepared || !bytes.Equal(c.ID, want.Id) || c.Query != nil {
						t.Errorf("child %d: kind %d id %x query %q; want prepared %x", i, c.Kind, c.ID, c.Query, want.Id)
					}
				} else if c.Kind != BatchChildQuery || string(c.Query) != want.Query || c.ID != nil {
					t.Errorf("child %d: kind %d id %x query %q; want query %q", i, c.Kind, c.ID, c.Query, want.Query)
				}
				if c.ValueCount != len(want.Values) {
					t.Errorf("child %d: %d values; want %d", i, c.ValueCount, len(want.Values))
				}
				for j, wv := range want.Values {
					got, err := c.Values([]uint16{uint16(j)}, nil)
					if err != nil || !bytes.Equal(got[0], wv.Contents) || (got[0] == nil) != (wv.Contents == nil) {
						t.Errorf("child %d value %d = %q, %v; want %q", i, j, got, err, wv.Contents)
					}
				}
				i++
			}
			if i != 3 {
				t.Errorf("iterated %d children; want 3", i)
			}
			if _, ok := it.Next(); ok {
				t.Error("Next after the end returned a child")
			}
		})
	}
}

func TestBatchAppendWithTimestamp(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			msg := testBatch(v)
			checkAppendWithTimestamp(t, v, msg, 99)
			msg.DefaultTimestamp = ptr[int64](12345)
			checkAppendWithTimestamp(t, v, msg, 99)
		})
	}
}

func TestParseBatchErrors(t *testing.T) {
	for _, v := range []byte{V3, V4, V5} {
		body := routingLibBody(t, v, testBatch(v))
		for i := range len(body) {
			if _, err := ParseBatch(v, body[:i]); !errors.Is(err, ErrShortBody) {
				t.Fatalf("v%d: %d of %d bytes: error %v; want ErrShortBody", v, i, len(body), err)
			}
			// Consistency reads no further than the consistency.
			if cl, err := Consistency(v, OpBatch, body[:i]); err == nil && cl != uint16(primitive.ConsistencyLevelLocalQuorum) {
				t.Fatalf("v%d: Consistency of %d of %d bytes = %#x", v, i, len(body), cl)
			}
		}
	}
	// One child of kind 2.
	bad := []byte{0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0}
	if _, err := ParseBatch(V4, bad); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("child kind 2: error %v; want ErrMalformedBody", err)
	}
}
