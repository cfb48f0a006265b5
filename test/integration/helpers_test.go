package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/internal/proxytest"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// ---------------------------------------------------------------------------
// The proxy under test

type testProxy = proxytest.Proxy

// startProxy runs a proxy in this process in front of contact points, with
// config.Default() settings changed only by mod (may be nil); see
// proxytest.Start.
func startProxy(t testing.TB, contactPoints []string, mod func(*config.Config)) *testProxy {
	t.Helper()
	return proxytest.Start(t, contactPoints, mod)
}

// ---------------------------------------------------------------------------
// Drivers

// newSession opens a gocql v1.7.0 session to hosts with default settings
// changed only by mod (may be nil); it is closed at the end of the test.
func newSession(t testing.TB, hosts []string, mod func(*gocql.ClusterConfig)) *gocql.Session {
	t.Helper()
	cc := gocql.NewCluster(hosts...)
	if mod != nil {
		mod(cc)
	}
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatalf("gocql session to %v: %v", hosts, err)
	}
	t.Cleanup(s.Close)
	return s
}

// proxySession is a default gocql session whose only host is the proxy.
func proxySession(t testing.TB, p *testProxy, mod func(*gocql.ClusterConfig)) *gocql.Session {
	t.Helper()
	return newSession(t, []string{p.Addr}, mod)
}

func mustExec(t testing.TB, s *gocql.Session, q string, args ...any) {
	t.Helper()
	if err := s.Query(q, args...).Exec(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// recreateKeyspace drops ks if it exists and creates it with
// SimpleStrategy and rf replicas, then runs each statement in stmts.
func recreateKeyspace(t testing.TB, s *gocql.Session, ks string, rf int, stmts ...string) {
	t.Helper()
	mustExec(t, s, "DROP KEYSPACE IF EXISTS "+ks)
	mustExec(t, s, fmt.Sprintf("CREATE KEYSPACE %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", ks, rf))
	for _, q := range stmts {
		mustExec(t, s, q)
	}
}

// requestErrorCode returns the CQL error code carried by err, if any.
func requestErrorCode(err error) (int, bool) {
	var re gocql.RequestError
	if errors.As(err, &re) {
		return re.Code(), true
	}
	return 0, false
}

// ---------------------------------------------------------------------------
// Metrics

// metricSeries returns every series of the metric family name, keyed by its
// labels as "k=v,k=v" ("" for none).
func metricSeries(t testing.TB, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(labels)
			out[strings.Join(labels, ",")] = metricValue(m)
		}
	}
	return out
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// metricSum sums every series of name.
func metricSum(t testing.TB, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, v := range metricSeries(t, reg, name) {
		sum += v
	}
	return sum
}

// waitFor polls cond every 100 ms until it reports true or timeout passes,
// then fails the test with what cond last said.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// Raw native-protocol client, built on pkg/frame

const consistencyOne uint16 = 0x0001

type rawConn struct {
	t       testing.TB
	nc      net.Conn
	r       *frame.Reader
	w       *frame.Writer
	version byte
}

// dialRaw opens a TCP connection to addr; nothing is sent yet.
func dialRaw(t testing.TB, addr string, version byte) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: frame.NewReader(nc, 0), w: frame.NewWriter(nc), version: version}
}

// send writes one whole frame (through segments once they are enabled).
func (c *rawConn) send(f []byte) error {
	if err := c.w.WriteFrame(f); err != nil {
		return err
	}
	return c.w.Flush()
}

// readFrame reads the next frame, waiting at most timeout.
func (c *rawConn) readFrame(timeout time.Duration) ([]byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	b, err := c.r.ReadFrame()
	if err != nil {
		return nil, err
	}
	f := append([]byte(nil), b.B...)
	b.Release()
	return f, nil
}

// await reads frames until the answer on stream, skipping server events.
func (c *rawConn) await(stream int16, timeout time.Duration) []byte {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f, err := c.readFrame(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("raw client %s: waiting for the answer on stream %d: %v", c.nc.RemoteAddr(), stream, err)
		}
		if frame.Stream(f) == stream {
			return f
		}
		if frame.Stream(f) >= 0 {
			c.t.Fatalf("raw client: got %s on stream %d while waiting for stream %d", frame.OpcodeName(frame.Opcode(f)), frame.Stream(f), stream)
		}
	}
}

// roundTrip sends f and returns the answer on its stream.
func (c *rawConn) roundTrip(f []byte) []byte {
	c.t.Helper()
	if err := c.send(f); err != nil {
		c.t.Fatalf("raw client: send %s: %v", frame.OpcodeName(frame.Opcode(f)), err)
	}
	return c.await(frame.Stream(f), 15*time.Second)
}

// startup performs STARTUP (with the given extra options) and switches to
// the negotiated compression and, for v5, to segment framing.
func (c *rawConn) startup(opts map[string]string) {
	c.t.Helper()
	o := map[string]string{"CQL_VERSION": "3.0.0"}
	for k, v := range opts {
		o[k] = v
	}
	resp := c.roundTrip(frame.AppendStartup(nil, c.version, 0, o))
	if op := frame.Opcode(resp); op != frame.OpReady {
		c.t.Fatalf("raw client: STARTUP answered with %s (%s), want READY", frame.OpcodeName(op), describe(resp))
	}
	comp, err := frame.ParseCompression(o["COMPRESSION"])
	if err != nil {
		c.t.Fatal(err)
	}
	if c.version >= frame.V5 {
		c.r.EnableSegments(comp)
		c.w.EnableSegments(comp)
	} else {
		c.r.SetCompression(comp)
		c.w.SetCompression(comp)
	}
}

// query runs q at consistency ONE without paging and returns the answer.
func (c *rawConn) query(stream int16, q string) []byte {
	c.t.Helper()
	return c.roundTrip(frame.AppendQuery(nil, c.version, stream, q, consistencyOne, 0))
}

// mustRows runs q and decodes its rows, failing on anything but RESULT Rows.
func (c *rawConn) mustRows(q string) rowsResult {
	c.t.Helper()
	resp := c.query(1, q)
	rs, err := decodeRows(resp)
	if err != nil {
		c.t.Fatalf("%s: %v (answer: %s)", q, err, describe(resp))
	}
	return rs
}

// errorOf returns the code and message of an ERROR frame.
func errorOf(f []byte) (code int32, msg string, ok bool) {
	if frame.Opcode(f) != frame.OpError {
		return 0, "", false
	}
	code, msg, err := frame.ErrorCode(frame.Body(f))
	return code, msg, err == nil
}

// describe summarizes a response frame for failure messages.
func describe(f []byte) string {
	if code, msg, ok := errorOf(f); ok {
		return fmt.Sprintf("ERROR 0x%04x %q on stream %d", code, msg, frame.Stream(f))
	}
	return fmt.Sprintf("%s (v%d) on stream %d, %d body bytes", frame.OpcodeName(frame.Opcode(f)), frame.Version(f), frame.Stream(f), len(f)-frame.HeaderLen)
}

// appendExecute appends an EXECUTE frame for the prepared id with values
// (resultMetaID is used from v5 on).
func appendExecute(dst []byte, version byte, stream int16, id, resultMetaID []byte, consistency uint16, values [][]byte) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint16(body, uint16(len(id)))
	body = append(body, id...)
	if version >= frame.V5 {
		body = binary.BigEndian.AppendUint16(body, uint16(len(resultMetaID)))
		body = append(body, resultMetaID...)
	}
	body = binary.BigEndian.AppendUint16(body, consistency)
	var flags uint32
	if len(values) > 0 {
		flags |= 0x01
	}
	if version >= frame.V5 {
		body = binary.BigEndian.AppendUint32(body, flags)
	} else {
		body = append(body, byte(flags))
	}
	if len(values) > 0 {
		body = binary.BigEndian.AppendUint16(body, uint16(len(values)))
		for _, v := range values {
			body = binary.BigEndian.AppendUint32(body, uint32(len(v)))
			body = append(body, v...)
		}
	}
	return frame.AppendFrame(nil, version, false, 0, stream, frame.OpExecute, body)
}

// prepared decodes a RESULT Prepared frame's id and (v5) result metadata id.
func prepared(f []byte, version byte) (id, resultMetaID []byte, err error) {
	body, err := frame.MessageBody(f)
	if err != nil {
		return nil, nil, err
	}
	d := decoder{b: body}
	if k := d.int(); k != frame.ResultPrepared {
		return nil, nil, fmt.Errorf("RESULT kind %d, want Prepared (%s)", k, describe(f))
	}
	id = d.shortBytes()
	if version >= frame.V5 {
		resultMetaID = d.shortBytes()
	}
	return id, resultMetaID, d.err
}

// rowsResult is a decoded RESULT Rows message.
type rowsResult struct {
	cols        []string
	rows        [][][]byte
	pagingState []byte
}

// col returns the value of column name in row i.
func (r rowsResult) col(i int, name string) ([]byte, bool) {
	for j, c := range r.cols {
		if c == name {
			return r.rows[i][j], true
		}
	}
	return nil, false
}

// decodeRows decodes a RESULT Rows frame (spec section 4.2.5.2).
func decodeRows(f []byte) (rowsResult, error) {
	var rs rowsResult
	if frame.Opcode(f) != frame.OpResult {
		return rs, fmt.Errorf("got %s, want RESULT", describe(f))
	}
	body, err := frame.MessageBody(f)
	if err != nil {
		return rs, err
	}
	d := decoder{b: body}
	if k := d.int(); k != frame.ResultRows {
		return rs, fmt.Errorf("RESULT kind %d, want Rows", k)
	}
	flags := d.int()
	ncols := int(d.int())
	if flags&0x0002 != 0 {
		rs.pagingState = d.bytes()
	}
	if flags&0x0008 != 0 {
		d.shortBytes() // new_metadata_id
	}
	if flags&0x0004 == 0 {
		global := flags&0x0001 != 0
		if global {
			d.string()
			d.string()
		}
		for i := 0; i < ncols && d.err == nil; i++ {
			if !global {
				d.string()
				d.string()
			}
			rs.cols = append(rs.cols, d.string())
			d.skipType()
		}
	}
	nrows := int(d.int())
	for i := 0; i < nrows && d.err == nil; i++ {
		row := make([][]byte, ncols)
		for j := range row {
			row[j] = d.bytes()
		}
		rs.rows = append(rs.rows, row)
	}
	return rs, d.err
}

// decoder reads protocol primitives; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) need(n int) bool {
	if d.err == nil && len(d.b) < n {
		d.err = fmt.Errorf("message truncated: need %d bytes, have %d", n, len(d.b))
	}
	return d.err == nil
}

func (d *decoder) short() uint16 {
	if !d.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func (d *decoder) int() int32 {
	if !d.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.b))
	d.b = d.b[4:]
	return v
}

func (d *decoder) string() string { return string(d.shortBytes()) }

func (d *decoder) shortBytes() []byte {
	n := int(d.short())
	if !d.need(n) {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// bytes reads [bytes]; a negative length is null (nil).
func (d *decoder) bytes() []byte {
	n := int(d.int())
	if n < 0 || !d.need(n) {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) skipType() {
	switch id := d.short(); id {
	case 0x0000: // custom
		d.string()
	case 0x0020, 0x0022: // list, set
		d.skipType()
	case 0x0021: // map
		d.skipType()
		d.skipType()
	case 0x0030: // UDT
		d.string()
		d.string()
		n := int(d.short())
		for i := 0; i < n && d.err == nil; i++ {
			d.string()
			d.skipType()
		}
	case 0x0031: // tuple
		n := int(d.short())
		for i := 0; i < n && d.err == nil; i++ {
			d.skipType()
		}
	}
}

// eventInfo decodes a SCHEMA_CHANGE EVENT body: change type, target,
// keyspace and (for non-keyspace targets) the object name.
func eventInfo(f []byte) (typ, change, target, keyspace, name string, err error) {
	d := decoder{b: frame.Body(f)}
	typ = d.string()
	if typ != "SCHEMA_CHANGE" {
		return typ, "", "", "", "", d.err
	}
	change, target, keyspace = d.string(), d.string(), d.string()
	if target != "KEYSPACE" {
		name = d.string()
	}
	return typ, change, target, keyspace, name, d.err
}

// ---------------------------------------------------------------------------
// Misc

func joinSorted(s []string) string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return strings.Join(s, " ")
}
