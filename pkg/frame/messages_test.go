package frame

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/datastax/go-cassandra-native-protocol/message"
	"github.com/datastax/go-cassandra-native-protocol/primitive"
)

var versions = []byte{V3, V4, V5}

// decodeWithLibrary decodes one whole frame produced by our encoders with
// the reference implementation, checking the header on the way.
func decodeWithLibrary(t *testing.T, f []byte, version byte, stream int16, response bool) message.Message {
	t.Helper()
	frames := libDecodeAll(t, libCodec(nil), f)
	if len(frames) != 1 {
		t.Fatalf("library decoded %d frames; want 1", len(frames))
	}
	h := frames[0].Header
	if byte(h.Version) != version || h.StreamId != stream || h.IsResponse != response || int(h.BodyLength) != len(f)-HeaderLen {
		t.Errorf("library header = %v; want version %d stream %d response %v length %d", h, version, stream, response, len(f)-HeaderLen)
	}
	return frames[0].Body.Message
}

func TestEncodersAgainstLibrary(t *testing.T) {
	for _, v := range versions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			const q = "SELECT * FROM system.local WHERE key = 'local'"

			f := AppendQuery(nil, v, 7, q, 0x0006, 0)
			got := decodeWithLibrary(t, f, v, 7, false).(*message.Query)
			if got.Query != q || got.Options.Consistency != 6 || got.Options.PageSize != 0 {
				t.Errorf("QUERY decoded as %q cl %v page %d", got.Query, got.Options.Consistency, got.Options.PageSize)
			}
			f = AppendQuery(nil, v, 8, q, 0x0001, 5000)
			got = decodeWithLibrary(t, f, v, 8, false).(*message.Query)
			if got.Query != q || got.Options.Consistency != 1 || got.Options.PageSize != 5000 {
				t.Errorf("paged QUERY decoded as %q cl %v page %d", got.Query, got.Options.Consistency, got.Options.PageSize)
			}

			f = AppendPrepare(nil, v, 9, q, "ks1")
			prep := decodeWithLibrary(t, f, v, 9, false).(*message.Prepare)
			wantKS := ""
			if v >= V5 {
				wantKS = "ks1"
			}
			if prep.Query != q || prep.Keyspace != wantKS {
				t.Errorf("PREPARE decoded as %q keyspace %q; want keyspace %q", prep.Query, prep.Keyspace, wantKS)
			}
			f = AppendPrepare(nil, v, 9, q, "")
			if prep := decodeWithLibrary(t, f, v, 9, false).(*message.Prepare); prep.Keyspace != "" {
				t.Errorf("PREPARE without keyspace decoded with keyspace %q", prep.Keyspace)
			}

			opts := map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "lz4", "DRIVER_NAME": "cqlgate"}
			f = AppendStartup(nil, v, 0, opts)
			if st := decodeWithLibrary(t, f, v, 0, false).(*message.Startup); !maps.Equal(st.Options, opts) {
				t.Errorf("STARTUP decoded as %v; want %v", st.Options, opts)
			}

			f = AppendOptions(nil, v, 3)
			if _, ok := decodeWithLibrary(t, f, v, 3, false).(*message.Options); !ok {
				t.Errorf("OPTIONS decoded as another message")
			}

			events := []string{"SCHEMA_CHANGE", "STATUS_CHANGE", "TOPOLOGY_CHANGE"}
			f = AppendRegister(nil, v, 4, events)
			reg := decodeWithLibrary(t, f, v, 4, false).(*message.Register)
			if len(reg.EventTypes) != 3 || string(reg.EventTypes[0]) != events[0] || string(reg.EventTypes[2]) != events[2] {
				t.Errorf("REGISTER decoded as %v", reg.EventTypes)
			}

			f = AppendReady(nil, v, 0)
			if _, ok := decodeWithLibrary(t, f, v, 0, true).(*message.Ready); !ok {
				t.Errorf("READY decoded as another message")
			}

			sup := map[string][]string{"CQL_VERSION": {"3.4.5"}, "COMPRESSION": {"lz4", "snappy"}, "PROTOCOL_VERSIONS": {"3/v3", "4/v4", "5/v5"}}
			f = AppendSupported(nil, v, 1, sup)
			if got := decodeWithLibrary(t, f, v, 1, true).(*message.Supported); !reflect.DeepEqual(got.Options, sup) {
				t.Errorf("SUPPORTED decoded as %v; want %v", got.Options, sup)
			}

			f = AppendError(nil, v, 11, ErrCodeProtocol, "frame body of 300000000 bytes exceeds the maximum of 16777216")
			if pe, ok := decodeWithLibrary(t, f, v, 11, true).(*message.ProtocolError); !ok || !strings.Contains(pe.ErrorMessage, "300000000") {
				t.Errorf("ERROR decoded as %#v", pe)
			}
			f = AppendError(nil, v, 12, ErrCodeServer, "boom")
			if se, ok := decodeWithLibrary(t, f, v, 12, true).(*message.ServerError); !ok || se.ErrorMessage != "boom" {
				t.Errorf("SERVER_ERROR decoded as %#v", se)
			}
			f = AppendError(nil, v, EventStream, ErrCodeOverloaded, "busy")
			if oe, ok := decodeWithLibrary(t, f, v, EventStream, true).(*message.Overloaded); !ok || oe.ErrorMessage != "busy" {
				t.Errorf("OVERLOADED decoded as %#v", oe)
			}

			id := []byte{0xde, 0xad, 0xbe, 0xef, 0, 1}
			f = AppendUnprepared(nil, v, 13, "unknown statement", id)
			if un, ok := decodeWithLibrary(t, f, v, 13, true).(*message.Unprepared); !ok || !bytes.Equal(un.Id, id) || un.ErrorMessage != "unknown statement" {
				t.Errorf("UNPREPARED decoded as %#v", un)
			}
		})
	}
}

// libBody encodes msg with the library and returns the message part of the
// frame's body, going through MessageBody.
func libBody(t *testing.T, v byte, msg message.Message, decorate func(f *libFrame)) []byte {
	t.Helper()
	f := newLibFrame(primitive.ProtocolVersion(v), 5, msg)
	if decorate != nil {
		decorate(f)
	}
	var buf bytes.Buffer
	if err := libCodec(nil).EncodeFrame(f.Frame, &buf); err != nil {
		t.Fatal(err)
	}
	b, err := MessageBody(buf.Bytes())
	if err != nil {
		t.Fatalf("MessageBody: %v", err)
	}
	return b
}

func TestDecodersAgainstLibrary(t *testing.T) {
	uuid := primitive.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	warnings := []string{"Aggregation query used without partition key", "second"}
	payload := map[string][]byte{"k": {1, 2, 3}, "empty": {}}
	// Each case decorates requests and responses with what the header flags
	// may put before the message. Warnings and custom payloads are v4+, and
	// requests only ask for tracing, they carry no id. The library writes
	// the custom payload before the warnings, unlike Cassandra and the spec,
	// so the two are not combined here.
	tests := []struct {
		name       string
		minVersion byte
		req, resp  func(f *libFrame)
	}{
		{"plain", V3, nil, nil},
		{"tracing", V3,
			func(f *libFrame) { f.RequestTracingId(true) },
			func(f *libFrame) { f.SetTracingId(&uuid) }},
		{"tracing+warnings", V4,
			func(f *libFrame) { f.RequestTracingId(true) },
			func(f *libFrame) { f.SetTracingId(&uuid); f.SetWarnings(warnings) }},
		{"tracing+custom payload", V4,
			func(f *libFrame) { f.RequestTracingId(true); f.SetCustomPayload(payload) },
			func(f *libFrame) { f.SetTracingId(&uuid); f.SetCustomPayload(payload) }},
	}
	for _, v := range versions {
		for _, tt := range tests {
			if v < tt.minVersion {
				continue
			}
			t.Run(fmt.Sprintf("v%d/%s", v, tt.name), func(t *testing.T) {
				testDecodersAgainstLibrary(t, v, tt.req, tt.resp)
			})
		}
	}
}

func testDecodersAgainstLibrary(t *testing.T, v byte, reqDeco, respDeco func(*libFrame)) {
	const q = "INSERT INTO ks.t (k, v) VALUES (?, ?)"
	body := libBody(t, v, &message.Query{Query: q, Options: &message.QueryOptions{Consistency: 1}}, reqDeco)
	if got, err := QueryString(body); err != nil || string(got) != q {
		t.Errorf("QueryString = %q, %v; want %q", got, err, q)
	}

	prep := &message.Prepare{Query: q}
	if v >= V5 {
		prep.Keyspace = "my_ks"
	}
	body = libBody(t, v, prep, reqDeco)
	if got, err := QueryString(body); err != nil || string(got) != q {
		t.Errorf("PREPARE QueryString = %q, %v; want %q", got, err, q)
	}
	if ks, err := PrepareKeyspace(v, body); err != nil || ks != prep.Keyspace {
		t.Errorf("PrepareKeyspace = %q, %v; want %q", ks, err, prep.Keyspace)
	}

	id := []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa}
	exec := &message.Execute{QueryId: id, Options: &message.QueryOptions{Consistency: 4}}
	if v >= V5 {
		exec.ResultMetadataId = []byte{42}
	}
	body = libBody(t, v, exec, reqDeco)
	if got, err := ExecuteID(body); err != nil || !bytes.Equal(got, id) {
		t.Errorf("ExecuteID = %x, %v; want %x", got, err, id)
	}

	startup := map[string]string{"CQL_VERSION": "3.0.0", "COMPRESSION": "snappy"}
	body = libBody(t, v, &message.Startup{Options: startup}, nil)
	if got, err := ReadStringMap(body); err != nil || !maps.Equal(got, startup) {
		t.Errorf("ReadStringMap = %v, %v; want %v", got, err, startup)
	}

	body = libBody(t, v, &message.Register{EventTypes: []primitive.EventType{"SCHEMA_CHANGE", "STATUS_CHANGE"}}, nil)
	if got, err := ReadStringList(body); err != nil || !slices.Equal(got, []string{"SCHEMA_CHANGE", "STATUS_CHANGE"}) {
		t.Errorf("ReadStringList = %v, %v", got, err)
	}

	sup := map[string][]string{"COMPRESSION": {"lz4", "snappy"}, "CQL_VERSION": {"3.4.7"}}
	body = libBody(t, v, &message.Supported{Options: sup}, nil)
	if got, err := ReadStringMultimap(body); err != nil || !reflect.DeepEqual(got, sup) {
		t.Errorf("ReadStringMultimap = %v, %v; want %v", got, err, sup)
	}

	body = libBody(t, v, &message.ProtocolError{ErrorMessage: "bad"}, respDeco)
	if code, msg, err := ErrorCode(body); err != nil || code != ErrCodeProtocol || msg != "bad" {
		t.Errorf("ErrorCode = %#x, %q, %v", code, msg, err)
	}
	if _, err := UnpreparedID(body); !errors.Is(err, ErrWrongKind) {
		t.Errorf("UnpreparedID(PROTOCOL_ERROR) error = %v; want ErrWrongKind", err)
	}

	body = libBody(t, v, &message.Unprepared{ErrorMessage: "gone", Id: id}, respDeco)
	if code, msg, err := ErrorCode(body); err != nil || code != ErrCodeUnprepared || msg != "gone" {
		t.Errorf("UNPREPARED ErrorCode = %#x, %q, %v", code, msg, err)
	}
	if got, err := UnpreparedID(body); err != nil || !bytes.Equal(got, id) {
		t.Errorf("UnpreparedID = %x, %v; want %x", got, err, id)
	}

	pr := &message.PreparedResult{
		PreparedQueryId:   id,
		VariablesMetadata: &message.VariablesMetadata{},
		ResultMetadata:    &message.RowsMetadata{},
	}
	if v >= V5 {
		pr.ResultMetadataId = []byte{1, 2}
	}
	body = libBody(t, v, pr, respDeco)
	if k, err := ResultKind(body); err != nil || k != ResultPrepared {
		t.Errorf("ResultKind(Prepared) = %d, %v", k, err)
	}
	if got, err := PreparedID(body); err != nil || !bytes.Equal(got, id) {
		t.Errorf("PreparedID = %x, %v; want %x", got, err, id)
	}
	if _, err := SetKeyspaceName(body); !errors.Is(err, ErrWrongKind) {
		t.Errorf("SetKeyspaceName(Prepared) error = %v; want ErrWrongKind", err)
	}

	body = libBody(t, v, &message.SetKeyspaceResult{Keyspace: "Ks_2"}, respDeco)
	if ks, err := SetKeyspaceName(body); err != nil || ks != "Ks_2" {
		t.Errorf("SetKeyspaceName = %q, %v", ks, err)
	}
	body = libBody(t, v, &message.VoidResult{}, respDeco)
	if k, err := ResultKind(body); err != nil || k != ResultVoid {
		t.Errorf("ResultKind(Void) = %d, %v", k, err)
	}
	if _, err := PreparedID(body); !errors.Is(err, ErrWrongKind) {
		t.Errorf("PreparedID(Void) error = %v; want ErrWrongKind", err)
	}

	ev := &message.SchemaChangeEvent{ChangeType: primitive.SchemaChangeTypeCreated, Target: primitive.SchemaChangeTargetKeyspace, Keyspace: "ks"}
	body = libBody(t, v, ev, nil)
	if et, err := EventType(body); err != nil || et != "SCHEMA_CHANGE" {
		t.Errorf("EventType = %q, %v", et, err)
	}
}

// TestOurEncodersRoundTrip decodes what the encoders produce with the
// package's own decoders.
func TestOurEncodersRoundTrip(t *testing.T) {
	for _, v := range versions {
		q := "SELECT v FROM ks.t WHERE k = 1"
		f := AppendQuery(nil, v, 1, q, 1, 100)
		if got, err := QueryString(Body(f)); err != nil || string(got) != q {
			t.Errorf("v%d QueryString(AppendQuery) = %q, %v", v, got, err)
		}
		f = AppendPrepare(nil, v, 1, q, "ks")
		wantKS := map[bool]string{true: "ks", false: ""}[v >= V5]
		if ks, err := PrepareKeyspace(v, Body(f)); err != nil || ks != wantKS {
			t.Errorf("v%d PrepareKeyspace(AppendPrepare) = %q, %v; want %q", v, ks, err, wantKS)
		}
		f = AppendError(nil, v, 1, ErrCodeInvalid, "nope")
		if code, msg, err := ErrorCode(Body(f)); err != nil || code != ErrCodeInvalid || msg != "nope" {
			t.Errorf("v%d ErrorCode(AppendError) = %#x, %q, %v", v, code, msg, err)
		}
		if Version(f) != v || f[0]&ResponseBit == 0 || Opcode(f) != OpError || Stream(f) != 1 {
			t.Errorf("v%d AppendError header = % x", v, f[:HeaderLen])
		}
		f = AppendUnprepared(nil, v, 1, "x", []byte{1, 2, 3})
		if id, err := UnpreparedID(Body(f)); err != nil || !bytes.Equal(id, []byte{1, 2, 3}) {
			t.Errorf("v%d UnpreparedID(AppendUnprepared) = %x, %v", v, id, err)
		}
		m := map[string]string{"a": "1", "b": ""}
		f = AppendStartup(nil, v, 0, m)
		if got, err := ReadStringMap(Body(f)); err != nil || !maps.Equal(got, m) {
			t.Errorf("v%d ReadStringMap(AppendStartup) = %v, %v", v, got, err)
		}
		l := []string{"TOPOLOGY_CHANGE"}
		f = AppendRegister(nil, v, 0, l)
		if got, err := ReadStringList(Body(f)); err != nil || !slices.Equal(got, l) {
			t.Errorf("v%d ReadStringList(AppendRegister) = %v, %v", v, got, err)
		}
		mm := map[string][]string{"X": {}, "Y": {"1", "2"}}
		f = AppendSupported(nil, v, 0, mm)
		if got, err := ReadStringMultimap(Body(f)); err != nil || !reflect.DeepEqual(got, mm) {
			t.Errorf("v%d ReadStringMultimap(AppendSupported) = %v, %v", v, got, err)
		}
		f = AppendFrame([]byte("prefix"), v|ResponseBit, true, FlagTracing, -1, OpEvent, []byte{0, 2, 'h', 'i'})
		if !bytes.HasPrefix(f, []byte("prefix")) {
			t.Errorf("AppendFrame dropped dst")
		}
		f = f[len("prefix"):]
		if h := ParseHeader(f); h != (Header{Version: v, Response: true, Flags: FlagTracing, Stream: -1, Opcode: OpEvent, Length: 4}) {
			t.Errorf("AppendFrame header = %+v", h)
		}
		if et, err := EventType(Body(f)); err != nil || et != "hi" {
			t.Errorf("EventType = %q, %v", et, err)
		}
	}
}

func TestAppendErrorTruncatesLongMessages(t *testing.T) {
	msg := strings.Repeat("é", 40000) // 80000 bytes
	f := AppendError(nil, V4, 1, ErrCodeInvalid, msg)
	_, got, err := ErrorCode(Body(f))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > maxShortLen || !strings.HasPrefix(msg, got) || len(got) < maxShortLen-1 {
		t.Errorf("message truncated to %d bytes; want a valid UTF-8 prefix of at most %d", len(got), maxShortLen)
	}
	if int(ParseHeader(f).Length) != len(f)-HeaderLen {
		t.Errorf("length field %d; body is %d bytes", ParseHeader(f).Length, len(f)-HeaderLen)
	}
}

// TestDecodersRejectEveryTruncation cuts minimal valid bodies at every length
// and expects ErrShortBody each time.
func TestDecodersRejectEveryTruncation(t *testing.T) {
	id := []byte{1, 2, 3, 4}
	tests := []struct {
		name   string
		body   []byte
		decode func([]byte) error
	}{
		{"ReadStringMap", Body(AppendStartup(nil, V4, 0, map[string]string{"CQL_VERSION": "3.0.0", "X": ""})),
			func(b []byte) error { _, err := ReadStringMap(b); return err }},
		{"ReadStringList", Body(AppendRegister(nil, V4, 0, []string{"A", "BB"})),
			func(b []byte) error { _, err := ReadStringList(b); return err }},
		{"ReadStringMultimap", Body(AppendSupported(nil, V4, 0, map[string][]string{"K": {"v1", "v2"}})),
			func(b []byte) error { _, err := ReadStringMultimap(b); return err }},
		{"QueryString", []byte{0, 0, 0, 3, 'a', 'b', 'c'},
			func(b []byte) error { _, err := QueryString(b); return err }},
		{"PrepareKeyspace", Body(AppendPrepare(nil, V5, 0, "q", "ks")),
			func(b []byte) error { _, err := PrepareKeyspace(V5, b); return err }},
		{"ExecuteID", []byte{0, 4, 1, 2, 3, 4},
			func(b []byte) error { _, err := ExecuteID(b); return err }},
		{"ErrorCode", Body(AppendError(nil, V4, 0, ErrCodeServer, "msg")),
			func(b []byte) error { _, _, err := ErrorCode(b); return err }},
		{"UnpreparedID", Body(AppendUnprepared(nil, V4, 0, "m", id)),
			func(b []byte) error { _, err := UnpreparedID(b); return err }},
		{"ResultKind", []byte{0, 0, 0, 2},
			func(b []byte) error { _, err := ResultKind(b); return err }},
		{"PreparedID", append([]byte{0, 0, 0, 4, 0, 4}, id...),
			func(b []byte) error { _, err := PreparedID(b); return err }},
		{"SetKeyspaceName", []byte{0, 0, 0, 3, 0, 2, 'k', 's'},
			func(b []byte) error { _, err := SetKeyspaceName(b); return err }},
		{"EventType", []byte{0, 3, 'A', 'B', 'C'},
			func(b []byte) error { _, err := EventType(b); return err }},
		{"MessageBody", AppendFrame(nil, V4, true, FlagTracing|FlagWarning|FlagCustomPayload, 0, OpResult,
			append(append(make([]byte, 16), 0, 1, 0, 1, 'w'), 0, 1, 0, 1, 'k', 0, 0, 0, 1, 'v')),
			func(b []byte) error {
				if len(b) < HeaderLen {
					_, err := MessageBody(b)
					return err
				}
				// Keep the header's length consistent with the cut.
				f := bytes.Clone(b)
				PutHeader(f, Header{Version: V4, Response: true, Flags: FlagTracing | FlagWarning | FlagCustomPayload, Opcode: OpResult, Length: int32(len(f) - HeaderLen)})
				_, err := MessageBody(f)
				return err
			}},
	}
	for _, tt := range tests {
		if err := tt.decode(tt.body); err != nil {
			t.Errorf("%s(whole body % x): %v", tt.name, tt.body, err)
			continue
		}
		for n := range len(tt.body) {
			if err := tt.decode(tt.body[:n]); !errors.Is(err, ErrShortBody) {
				t.Errorf("%s(first %d of %d bytes): error %v; want ErrShortBody", tt.name, n, len(tt.body), err)
			}
		}
	}
}

func TestDecodersRejectNegativeLongStringLength(t *testing.T) {
	if _, err := QueryString([]byte{0xff, 0xff, 0xff, 0xff, 'a'}); !errors.Is(err, ErrShortBody) {
		t.Errorf("QueryString(length -1) error = %v; want ErrShortBody", err)
	}
}

func TestDecodedSlicesHaveCappedCapacity(t *testing.T) {
	body := []byte{0, 2, 'a', 'b', 'c', 'd'}
	id, err := ExecuteID(body)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(id, 'X')
	if body[4] != 'c' {
		t.Errorf("appending to the returned id overwrote the body")
	}
}
