package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// row is one decoded row of a system table, by column name. Only the
// control connection decodes rows, a few times per topology change.
type row map[string][]byte

func (r row) bytes(col string) []byte { return r[col] }
func (r row) text(col string) string  { return string(r[col]) }

func (r row) inet(col string) net.IP {
	b := r[col]
	if len(b) != 4 && len(b) != 16 {
		return nil
	}
	return net.IP(append([]byte(nil), b...))
}

func (r row) int(col string) (int32, bool) {
	b := r[col]
	if len(b) != 4 {
		return 0, false
	}
	return int32(binary.BigEndian.Uint32(b)), true
}

// textSet decodes a set<text> (v3+ encoding: [int n] then n [int len][bytes]).
func (r row) textSet(col string) []string {
	b := r[col]
	if len(b) < 4 {
		return nil
	}
	n := int(int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	var out []string
	for i := 0; i < n && len(b) >= 4; i++ {
		l := int(int32(binary.BigEndian.Uint32(b)))
		b = b[4:]
		if l < 0 || l > len(b) {
			return out
		}
		out = append(out, string(b[:l]))
		b = b[l:]
	}
	return out
}

// waiter is a Handler that delivers the outcome to a channel.
type waiter chan waitResult

type waitResult struct {
	b   *frame.Buf
	err error
}

func (w waiter) OnTimeout(*Conn)                         {}
func (w waiter) OnResponse(_ *Conn, b *frame.Buf)        { w <- waitResult{b: b} }
func (w waiter) OnFailure(_ *Conn, err error, sent bool) { w <- waitResult{err: err} }

// Request sends the frame f and waits for its response, which the caller
// must Release. An ERROR response is returned as a *ServerError.
func (c *Conn) Request(ctx context.Context, f []byte) (*frame.Buf, error) {
	w := make(waiter, 1)
	if err := c.Send(f, w); err != nil {
		return nil, err
	}
	select {
	case res := <-w:
		if res.err != nil {
			return nil, res.err
		}
		if frame.Opcode(res.b.B) == frame.OpError {
			code, msg, _ := frame.ErrorCode(frame.Body(res.b.B))
			se := &ServerError{Code: code, Message: msg, Body: append([]byte(nil), frame.Body(res.b.B)...)}
			res.b.Release()
			return nil, se
		}
		return res.b, nil
	case <-ctx.Done():
		// The response, if it comes, lands in w's buffer and is
		// collected with it.
		return nil, ctx.Err()
	}
}

// query runs a CQL query without values and decodes the rows (the first
// 5,000).
func (c *Conn) query(ctx context.Context, version byte, cql string) ([]row, error) {
	return c.queryPage(ctx, version, cql, 5000)
}

// queryPage runs a CQL query without values and decodes the first page of
// up to pageSize rows.
func (c *Conn) queryPage(ctx context.Context, version byte, cql string, pageSize int32) ([]row, error) {
	req := frame.AppendQuery(nil, version, 0, cql, 0x0001, pageSize)
	b, err := c.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	return decodeRows(version, frame.Body(b.B))
}

var resultCodec = func() message.Codec {
	for _, c := range message.DefaultMessageCodecs {
		if c.GetOpCode() == primitive.OpCodeResult {
			return c
		}
	}
	panic("go-cassandra-native-protocol has no RESULT codec")
}()

func decodeRows(version byte, body []byte) ([]row, error) {
	msg, err := resultCodec.Decode(bytes.NewReader(body), primitive.ProtocolVersion(version))
	if err != nil {
		return nil, fmt.Errorf("decode rows: %w", err)
	}
	rows, ok := msg.(*message.RowsResult)
	if !ok {
		return nil, fmt.Errorf("decode rows: got %T", msg)
	}
	if rows.Metadata == nil || len(rows.Metadata.Columns) == 0 {
		return nil, fmt.Errorf("decode rows: result has no column metadata")
	}
	out := make([]row, 0, len(rows.Data))
	for _, data := range rows.Data {
		r := row{}
		for i, col := range rows.Metadata.Columns {
			if i < len(data) {
				r[col.Name] = data[i]
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// parseStatusChange decodes a STATUS_CHANGE EVENT body:
// [string "STATUS_CHANGE"][string UP|DOWN][inet] where [inet] is
// [byte n][n address bytes][int port].
func parseStatusChange(body []byte) (change, addr string, err error) {
	str := func() (string, error) {
		if len(body) < 2 {
			return "", frame.ErrShortBody
		}
		n := int(binary.BigEndian.Uint16(body))
		if len(body) < 2+n {
			return "", frame.ErrShortBody
		}
		v := string(body[2 : 2+n])
		body = body[2+n:]
		return v, nil
	}
	if _, err = str(); err != nil {
		return "", "", err
	}
	if change, err = str(); err != nil {
		return "", "", err
	}
	if len(body) < 1 {
		return "", "", frame.ErrShortBody
	}
	n := int(body[0])
	if (n != 4 && n != 16) || len(body) < 1+n+4 {
		return "", "", frame.ErrShortBody
	}
	ip := net.IP(append([]byte(nil), body[1:1+n]...))
	port := int(int32(binary.BigEndian.Uint32(body[1+n:])))
	return change, net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
}
