package systables

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Protocol constants, mirroring pkg/frame (frame.V3, frame.V5,
// frame.ResultRows). They are repeated here rather than imported so that this
// package builds on its own: the values are fixed by the protocol.
const (
	minVersion byte  = 3
	maxVersion byte  = 5
	resultRows int32 = 0x0002
)

// Errors returned by the rewriters and ParseLocal, always wrapped with
// context; match them with errors.Is.
var (
	// ErrMalformed means the body is not a well-formed RESULT of the kind
	// claimed (truncated field, negative count, unknown type id, ...).
	ErrMalformed = errors.New("systables: malformed RESULT body")
	// ErrUnsupportedVersion means a protocol version other than 3, 4 or 5.
	ErrUnsupportedVersion = errors.New("systables: unsupported protocol version")
	// ErrUnexpectedType means a column the package writes or reads has a CQL
	// type other than the one Cassandra gives it (e.g. rpc_address not inet).
	ErrUnexpectedType = errors.New("systables: unexpected column type")
	// ErrUnsupportedSelection means a system.local result whose columns could
	// carry node identity the package cannot rewrite: a SELECT JSON, or a
	// function of an identity column such as toJson(rpc_address).
	ErrUnsupportedSelection = errors.New("systables: unsupported selection")
	// ErrNoMetadata means a Rows result with the No_metadata flag where the
	// column names are needed (RewritePeers, ParseLocal).
	ErrNoMetadata = errors.New("systables: rows result without metadata")
	// ErrNotRows means a RESULT of another kind where rows are needed
	// (ParseLocal).
	ErrNotRows = errors.New("systables: not a rows result")
	// ErrBadNode means a Node value that cannot be written: nil or invalid
	// Address, Port out of range.
	ErrBadNode = errors.New("systables: invalid node")
)

// Rows metadata flags (section 4.2.5.2).
const (
	flagGlobalTablesSpec int32 = 0x0001
	flagHasMorePages     int32 = 0x0002
	flagNoMetadata       int32 = 0x0004
	flagMetadataChanged  int32 = 0x0008 // v5 only
)

// CQL type option ids (section 4.2.5.2) the package cares about.
const (
	typeCustom  uint16 = 0x0000
	typeAscii   uint16 = 0x0001
	typeInt     uint16 = 0x0009
	typeText    uint16 = 0x000A // protocol v1/v2 "text"; same as varchar
	typeUUID    uint16 = 0x000C
	typeVarchar uint16 = 0x000D
	typeInet    uint16 = 0x0010
	typeLastPri uint16 = 0x0015 // duration, the last native type
	typeList    uint16 = 0x0020
	typeMap     uint16 = 0x0021
	typeSet     uint16 = 0x0022
	typeUDT     uint16 = 0x0030
	typeTuple   uint16 = 0x0031
)

// maxTypeDepth bounds the nesting of collection/UDT/tuple types, so that a
// hostile body cannot exhaust the stack.
const maxTypeDepth = 64

// column is one column spec of a Rows result.
type column struct {
	name []byte // aliases the body
	typ  uint16 // option id
	elem uint16 // element option id for list and set, else 0
}

// rows is the parsed layout of a Rows result body.
type rows struct {
	flags      int32
	nCols      int
	pagingFrom int      // offset of the paging state [bytes] (flagHasMorePages)
	pagingTo   int      // offset after it; pagingFrom == pagingTo when absent
	cols       []column // nil when flagNoMetadata is set
	countAt    int      // offset of <rows_count>
	count      int      // rows_count
}

// reader is a bounds-checked cursor over a body. The first failed read sets
// err; later reads then return zero values.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at offset %d of %d", ErrMalformed, what, r.off, len(r.b))
	}
}

func (r *reader) int32(what string) int32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.fail("truncated " + what)
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v
}

func (r *reader) uint16(what string) uint16 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 2 {
		r.fail("truncated " + what)
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

// skip advances n bytes.
func (r *reader) skip(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("truncated " + what)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

// string reads a [string] (short length).
func (r *reader) string(what string) []byte {
	return r.skip(int(r.uint16(what)), what)
}

// bytes reads a [bytes] value: the content, or nil with null set for a
// negative length.
func (r *reader) bytes(what string) (v []byte, null bool) {
	n := r.int32(what)
	if r.err != nil {
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	return r.skip(int(n), what), false
}

// option reads a type [option] and returns its id and, for lists and sets,
// the id of the element type.
func (r *reader) option(depth int) (id, elem uint16) {
	id = r.uint16("type id")
	if r.err != nil {
		return 0, 0
	}
	if depth > maxTypeDepth {
		r.fail("type nested too deep")
		return 0, 0
	}
	switch {
	case id == typeCustom:
		r.string("custom type class")
	case id <= typeLastPri:
	case id == typeList || id == typeSet:
		elem, _ = r.option(depth + 1)
	case id == typeMap:
		r.option(depth + 1)
		r.option(depth + 1)
	case id == typeUDT:
		r.string("UDT keyspace")
		r.string("UDT name")
		n := int(r.uint16("UDT field count"))
		for i := 0; i < n && r.err == nil; i++ {
			r.string("UDT field name")
			r.option(depth + 1)
		}
	case id == typeTuple:
		n := int(r.uint16("tuple arity"))
		for i := 0; i < n && r.err == nil; i++ {
			r.option(depth + 1)
		}
	default:
		r.off -= 2
		r.fail(fmt.Sprintf("unknown type id 0x%04x", id))
	}
	return id, elem
}

// checkVersion rejects protocol versions the package does not speak.
func checkVersion(version byte) error {
	if version < minVersion || version > maxVersion {
		return fmt.Errorf("%w: %d", ErrUnsupportedVersion, version)
	}
	return nil
}

// resultKind reads the [int] kind at the start of a RESULT body.
func resultKind(body []byte) (int32, error) {
	if len(body) < 4 {
		return 0, fmt.Errorf("%w: body of %d bytes has no result kind", ErrMalformed, len(body))
	}
	return int32(binary.BigEndian.Uint32(body)), nil
}

// parseRows parses the metadata and rows_count of a Rows result body whose
// kind has already been checked. The rows themselves are left to the caller.
func parseRows(version byte, body []byte) (rows, error) {
	r := reader{b: body, off: 4}
	var rs rows
	rs.flags = r.int32("rows flags")
	nCols := r.int32("columns count")
	if r.err == nil && nCols < 0 {
		r.fail(fmt.Sprintf("negative columns count %d", nCols))
	}
	rs.nCols = int(nCols)
	rs.pagingFrom = r.off
	if rs.flags&flagHasMorePages != 0 {
		r.bytes("paging state")
	}
	rs.pagingTo = r.off
	if version >= 5 && rs.flags&flagMetadataChanged != 0 {
		r.string("new result metadata id")
	}
	if rs.flags&flagNoMetadata == 0 && r.err == nil {
		global := rs.flags&flagGlobalTablesSpec != 0
		if global {
			r.string("global keyspace")
			r.string("global table")
		}
		// Every column spec takes at least 4 bytes: bound the allocation
		// by what the body can hold, not by the claimed count.
		rs.cols = make([]column, 0, min(rs.nCols, (len(body)-r.off)/4))
		for i := 0; i < rs.nCols && r.err == nil; i++ {
			if !global {
				r.string("column keyspace")
				r.string("column table")
			}
			var c column
			c.name = r.string("column name")
			c.typ, c.elem = r.option(0)
			rs.cols = append(rs.cols, c)
		}
	}
	rs.countAt = r.off
	n := r.int32("rows count")
	if r.err == nil && n < 0 {
		r.fail(fmt.Sprintf("negative rows count %d", n))
	}
	rs.count = int(n)
	if r.err != nil {
		return rows{}, fmt.Errorf("parsing rows metadata: %w", r.err)
	}
	return rs, nil
}

// forEachCell walks the rows of a body parsed into rs, calling f for every
// cell with its row and column index and its complete encoding (the [int]
// length and the content). It returns the offset just after the last row.
func forEachCell(body []byte, rs rows, f func(row, col int, cell []byte)) (int, error) {
	off := rs.countAt + 4
	if rs.nCols == 0 {
		return off, nil // rows without cells take no bytes
	}
	for row := 0; row < rs.count; row++ {
		for col := 0; col < rs.nCols; col++ {
			if len(body)-off < 4 {
				return 0, fmt.Errorf("%w: truncated cell length (row %d, column %d) at offset %d", ErrMalformed, row, col, off)
			}
			n := int(int32(binary.BigEndian.Uint32(body[off:])))
			end := off + 4
			if n > 0 {
				if len(body)-end < n {
					return 0, fmt.Errorf("%w: truncated cell (row %d, column %d): %d bytes at offset %d", ErrMalformed, row, col, n, end)
				}
				end += n
			}
			if f != nil {
				f(row, col, body[off:end])
			}
			off = end
		}
	}
	return off, nil
}
