package frame

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// CQL type option ids (spec section 4.2.5.2), as found in PreparedMeta.VarTypes.
const (
	TypeCustom    uint16 = 0x0000
	TypeASCII     uint16 = 0x0001
	TypeBigint    uint16 = 0x0002
	TypeBlob      uint16 = 0x0003
	TypeBoolean   uint16 = 0x0004
	TypeCounter   uint16 = 0x0005
	TypeDecimal   uint16 = 0x0006
	TypeDouble    uint16 = 0x0007
	TypeFloat     uint16 = 0x0008
	TypeInt       uint16 = 0x0009
	TypeTimestamp uint16 = 0x000B
	TypeUUID      uint16 = 0x000C
	TypeVarchar   uint16 = 0x000D
	TypeVarint    uint16 = 0x000E
	TypeTimeuuid  uint16 = 0x000F
	TypeInet      uint16 = 0x0010
	TypeDate      uint16 = 0x0011
	TypeTime      uint16 = 0x0012
	TypeSmallint  uint16 = 0x0013
	TypeTinyint   uint16 = 0x0014
	TypeDuration  uint16 = 0x0015
	TypeList      uint16 = 0x0020
	TypeMap       uint16 = 0x0021
	TypeSet       uint16 = 0x0022
	TypeUDT       uint16 = 0x0030
	TypeTuple     uint16 = 0x0031
)

// Metadata flags of RESULT Rows and Prepared.
const (
	metaGlobalTableSpec = 0x0001
	metaHasMorePages    = 0x0002
	metaNoMetadata      = 0x0004
	metaChanged         = 0x0008 // v5: a new result metadata id follows
)

// maxTypeDepth bounds the nesting of type options (list<map<int, tuple<...>>>),
// so that a hostile body cannot drive the recursion arbitrarily deep. Real
// schemas nest a handful of levels.
const maxTypeDepth = 64

// PreparedMeta is what routing needs from a RESULT Prepared body: the
// statement's ids and its bind variables. Unlike the other decoders' results
// it owns its memory (nothing aliases the body), so it can be cached after
// the frame is released.
type PreparedMeta struct {
	// ID is the prepared statement id.
	ID []byte
	// ResultMetadataID is the result metadata id (v5; nil before).
	ResultMetadataID []byte
	// Keyspace and Table are those of the bind variables: the global table
	// spec, or the first variable's. Empty for a statement without
	// variables.
	Keyspace, Table string
	// PKIndexes are the positions of the bind variables that make up the
	// partition key, in partition-key order (v4+). Nil before v4, and when
	// some partition-key column has no bind variable of its own (pk_count 0).
	PKIndexes []uint16
	// VarNames and VarTypes are each bind variable's name and top-level type
	// option id (TypeInt, TypeCounter, TypeList, ...).
	VarNames []string
	VarTypes []uint16
	// Shape is a hash of the bind variables' and the result columns'
	// specs (keyspace, table, name and type of each). Two answers for one
	// statement id differ in Shape when a client that kept the first would
	// bind or decode by the second wrongly: after ALTER TABLE ADD, say, the
	// id stays the same (Cassandra derives it from keyspace and text) but
	// the columns of SELECT * do not. It is the same for v4 and v5; v3
	// encodes a few newer types (date, time, smallint, tinyint) as custom
	// types, so its Shape can differ from theirs for the same statement.
	Shape uint64
}

// ParsePrepared decodes a RESULT Prepared body (kind included) of the given
// protocol version. A body of another RESULT kind gets an error wrapping
// ErrWrongKind. Of the result metadata that follows the bind variables only
// the Shape is taken.
func ParsePrepared(version byte, body []byte) (*PreparedMeta, error) {
	version &^= ResponseBit
	rest, err := resultOfKind(body, ResultPrepared, "Prepared")
	if err != nil {
		return nil, err
	}
	m := &PreparedMeta{}
	var id []byte
	var ok bool
	if id, rest, ok = readShortBytes(rest); !ok {
		return nil, short("RESULT Prepared statement id")
	}
	m.ID = append([]byte{}, id...)
	if version >= V5 {
		if id, rest, ok = readShortBytes(rest); !ok {
			return nil, short("RESULT Prepared result metadata id")
		}
		m.ResultMetadataID = append([]byte{}, id...)
	}
	flags, rest, ok := readInt(rest)
	if !ok {
		return nil, short("RESULT Prepared metadata flags")
	}
	count, rest, ok := readInt(rest)
	if !ok {
		return nil, short("RESULT Prepared column count")
	}
	if count < 0 {
		return nil, fmt.Errorf("frame: RESULT Prepared column count %d: %w", count, ErrMalformedBody)
	}
	if version >= V4 {
		if rest, err = m.readPKIndexes(rest, count); err != nil {
			return nil, err
		}
	} else {
		// v3 uses the Rows metadata here, whose extra flags Cassandra
		// never sets for bind variables; honour them anyway.
		if flags&metaHasMorePages != 0 {
			if _, _, rest, err = readValue(rest); err != nil {
				return nil, fmt.Errorf("RESULT Prepared paging state: %w", err)
			}
		}
		if flags&metaNoMetadata != 0 {
			return m, nil
		}
	}
	varSpecs := rest
	global := flags&metaGlobalTableSpec != 0
	if global {
		var ks, table []byte
		if ks, rest, ok = readShortBytes(rest); !ok {
			return nil, short("RESULT Prepared keyspace")
		}
		if table, rest, ok = readShortBytes(rest); !ok {
			return nil, short("RESULT Prepared table")
		}
		m.Keyspace, m.Table = string(ks), string(table)
	}
	// Each column spec takes at least 4 bytes ([string] name, [short] type).
	n := min(int(count), len(rest)/4)
	m.VarNames = make([]string, 0, n)
	m.VarTypes = make([]uint16, 0, n)
	for i := range int(count) {
		if !global {
			var ks, table []byte
			if ks, rest, ok = readShortBytes(rest); !ok {
				return nil, short(fmt.Sprintf("RESULT Prepared keyspace of variable %d", i))
			}
			if table, rest, ok = readShortBytes(rest); !ok {
				return nil, short(fmt.Sprintf("RESULT Prepared table of variable %d", i))
			}
			if i == 0 {
				m.Keyspace, m.Table = string(ks), string(table)
			}
		}
		var name []byte
		if name, rest, ok = readShortBytes(rest); !ok {
			return nil, short(fmt.Sprintf("RESULT Prepared name of variable %d", i))
		}
		typ, after, err := skipOption(rest, 0)
		if err != nil {
			return nil, fmt.Errorf("RESULT Prepared type of variable %d: %w", i, err)
		}
		rest = after
		m.VarNames = append(m.VarNames, string(name))
		m.VarTypes = append(m.VarTypes, typ)
	}
	shape, err := resultShape(flags, count, varSpecs[:len(varSpecs)-len(rest)], rest)
	if err != nil {
		return nil, err
	}
	m.Shape = shape
	return m, nil
}

// resultShape hashes the bind variables' specs (varSpecs, with their flags
// and count) and the result metadata that follows them (result), leaving
// out what varies by protocol version or by answer: partition-key indexes,
// the v5 result metadata id, paging state.
func resultShape(varFlags, varCount int32, varSpecs, result []byte) (uint64, error) {
	flags, rest, ok := readInt(result)
	if !ok {
		return 0, short("RESULT Prepared result metadata flags")
	}
	count, rest, ok := readInt(rest)
	if !ok {
		return 0, short("RESULT Prepared result column count")
	}
	if flags&metaHasMorePages != 0 {
		var err error
		if _, _, rest, err = readValue(rest); err != nil {
			return 0, fmt.Errorf("RESULT Prepared result paging state: %w", err)
		}
	}
	if flags&metaChanged != 0 {
		if _, rest, ok = readShortBytes(rest); !ok {
			return 0, short("RESULT Prepared result metadata id")
		}
	}
	h := fnv.New64a()
	var n [4]byte
	put := func(v int32) {
		binary.BigEndian.PutUint32(n[:], uint32(v))
		_, _ = h.Write(n[:])
	}
	put(varFlags & metaGlobalTableSpec)
	put(varCount)
	_, _ = h.Write(varSpecs)
	put(flags & (metaGlobalTableSpec | metaNoMetadata))
	put(count)
	if flags&metaNoMetadata == 0 {
		_, _ = h.Write(rest)
	}
	return h.Sum64(), nil
}

// readPKIndexes reads <pk_count><pk_index_1>...<pk_index_n> (v4+).
func (m *PreparedMeta) readPKIndexes(b []byte, columns int32) ([]byte, error) {
	n, b, ok := readInt(b)
	if !ok {
		return b, short("RESULT Prepared pk count")
	}
	if n < 0 || n > columns {
		return b, fmt.Errorf("frame: RESULT Prepared pk count %d with %d variables: %w", n, columns, ErrMalformedBody)
	}
	if int64(len(b)) < 2*int64(n) {
		return b, short("RESULT Prepared pk indexes")
	}
	if n == 0 {
		return b, nil
	}
	m.PKIndexes = make([]uint16, n)
	for i := range m.PKIndexes {
		ix, _, _ := readShort(b[2*i:])
		if int32(ix) >= columns {
			return b, fmt.Errorf("frame: RESULT Prepared pk index %d with %d variables: %w", ix, columns, ErrMalformedBody)
		}
		m.PKIndexes[i] = ix
	}
	return b[2*n:], nil
}

// skipOption reads a type [option] and skips what it carries (the class
// name of a custom type, the element types of collections, UDT fields, tuple
// components), returning its id.
func skipOption(b []byte, depth int) (uint16, []byte, error) {
	if depth > maxTypeDepth {
		return 0, b, fmt.Errorf("frame: type nested deeper than %d: %w", maxTypeDepth, ErrMalformedBody)
	}
	id, rest, ok := readShort(b)
	if !ok {
		return 0, b, short("type option id")
	}
	var err error
	switch id {
	case TypeCustom:
		if _, rest, ok = readShortBytes(rest); !ok {
			return 0, b, short("custom type class")
		}
	case TypeList, TypeSet:
		if _, rest, err = skipOption(rest, depth+1); err != nil {
			return 0, b, err
		}
	case TypeMap:
		for range 2 {
			if _, rest, err = skipOption(rest, depth+1); err != nil {
				return 0, b, err
			}
		}
	case TypeUDT:
		if _, rest, ok = readShortBytes(rest); !ok {
			return 0, b, short("UDT keyspace")
		}
		if _, rest, ok = readShortBytes(rest); !ok {
			return 0, b, short("UDT name")
		}
		var n uint16
		if n, rest, ok = readShort(rest); !ok {
			return 0, b, short("UDT field count")
		}
		for range n {
			if _, rest, ok = readShortBytes(rest); !ok {
				return 0, b, short("UDT field name")
			}
			if _, rest, err = skipOption(rest, depth+1); err != nil {
				return 0, b, err
			}
		}
	case TypeTuple:
		var n uint16
		if n, rest, ok = readShort(rest); !ok {
			return 0, b, short("tuple size")
		}
		for range n {
			if _, rest, err = skipOption(rest, depth+1); err != nil {
				return 0, b, err
			}
		}
	}
	// Other ids are native types without a value. An id this package does
	// not know (a future native type) is taken to have none either, as the
	// protocol adds types only with a new version.
	return id, rest, nil
}
