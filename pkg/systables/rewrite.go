package systables

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Rewriter rewrites RESULT bodies of system table queries so that drivers
// see Local, the proxy endpoint the client is connected to, as system.local,
// and Peers, the other proxy endpoints, as system.peers / system.peers_v2
// (empty for a single-endpoint proxy). A Rewriter is not modified by its
// methods and may be used by several goroutines at once.
type Rewriter struct {
	Local Node
	Peers []Node
}

// role is what a column of a system table carries, as far as rewriting goes.
type role uint8

const (
	roleOther   role = iota
	roleAddress      // inet: the endpoint's address
	rolePort         // int: the endpoint's native port
	roleHostID       // uuid
	roleTokens       // set<text>
	roleDC           // text
	roleRack         // text
	roleSchema       // uuid: schema_version (peers only)
	roleRelease      // text: release_version (peers only)
)

// localRoles are the system.local columns RewriteLocal replaces.
var localRoles = map[string]role{
	"rpc_address":       roleAddress,
	"broadcast_address": roleAddress,
	"listen_address":    roleAddress,
	"native_address":    roleAddress,
	"rpc_port":          rolePort,
	"broadcast_port":    rolePort,
	"listen_port":       rolePort,
	"native_port":       rolePort,
	"host_id":           roleHostID,
	"tokens":            roleTokens,
	"data_center":       roleDC,
	"rack":              roleRack,
}

// peersRoles are the system.peers / system.peers_v2 columns RewritePeers
// fills; every other column is null.
var peersRoles = map[string]role{
	"peer":            roleAddress,
	"rpc_address":     roleAddress,
	"native_address":  roleAddress,
	"preferred_ip":    roleAddress,
	"peer_port":       rolePort,
	"native_port":     rolePort,
	"preferred_port":  rolePort,
	"host_id":         roleHostID,
	"tokens":          roleTokens,
	"data_center":     roleDC,
	"rack":            roleRack,
	"schema_version":  roleSchema,
	"release_version": roleRelease,
}

// identityWords are substrings of the names of the system.local columns that
// identify the real node. A computed column (a function call, a cast) whose
// name contains one of them would leak what RewriteLocal replaces.
var identityWords = [][]byte{
	[]byte("address"), []byte("port"), []byte("host_id"), []byte("tokens"),
	[]byte("data_center"), []byte("rack"),
}

// checkType reports whether a column of role ro may have type c.
func checkType(ro role, c column) error {
	ok := true
	switch ro {
	case roleAddress:
		ok = c.typ == typeInet
	case rolePort:
		ok = c.typ == typeInt
	case roleHostID, roleSchema:
		ok = c.typ == typeUUID
	case roleTokens:
		ok = c.typ == typeSet && isTextType(c.elem)
	case roleDC, roleRack, roleRelease:
		ok = isTextType(c.typ)
	}
	if !ok {
		return fmt.Errorf("%w: column %q has type 0x%04x (element 0x%04x)", ErrUnexpectedType, c.name, c.typ, c.elem)
	}
	return nil
}

func isTextType(id uint16) bool {
	return id == typeVarchar || id == typeAscii || id == typeText
}

// cell returns the encoding of n's value for a column of role ro as a
// [bytes] cell (length prefix included); a nil slice means "keep the
// original" for system.local. schemaVersion and release are only used for
// roleSchema and roleRelease.
func (n *Node) cell(ro role, schemaVersion *[16]byte, release string) ([]byte, error) {
	switch ro {
	case roleAddress:
		ip := n.Address.To4()
		if ip == nil {
			ip = n.Address.To16()
		}
		if ip == nil {
			return nil, fmt.Errorf("%w: address %v", ErrBadNode, n.Address)
		}
		return appendCell(nil, ip), nil
	case rolePort:
		if n.Port < 0 || n.Port > 65535 {
			return nil, fmt.Errorf("%w: port %d", ErrBadNode, n.Port)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n.Port))
		return appendCell(nil, b[:]), nil
	case roleHostID:
		return appendCell(nil, n.HostID[:]), nil
	case roleTokens:
		size := 8
		for _, t := range n.Tokens {
			size += 4 + len(t)
		}
		b := binary.BigEndian.AppendUint32(make([]byte, 0, size), uint32(size-4))
		b = binary.BigEndian.AppendUint32(b, uint32(len(n.Tokens)))
		for _, t := range n.Tokens {
			b = binary.BigEndian.AppendUint32(b, uint32(len(t)))
			b = append(b, t...)
		}
		return b, nil
	case roleDC:
		return textCell(n.DataCenter), nil
	case roleRack:
		return textCell(n.Rack), nil
	case roleSchema:
		return appendCell(nil, schemaVersion[:]), nil
	case roleRelease:
		return textCell(release), nil
	}
	return nil, nil
}

// textCell encodes s, or returns nil for an empty s.
func textCell(s string) []byte {
	if s == "" {
		return nil
	}
	return appendCell(nil, []byte(s))
}

// nullCell is a [bytes] null.
var nullCell = []byte{0xff, 0xff, 0xff, 0xff}

// appendCell appends v as a [bytes] value.
func appendCell(dst, v []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// RewriteLocal takes the body of a RESULT frame (starting with the [int]
// kind) that Cassandra returned for a system.local query in protocol version
// version (3, 4 or 5), and returns a new body in which every selected column
// that describes node identity or placement holds Local's value:
//
//   - rpc_address, broadcast_address, listen_address, native_address (inet):
//     Local.Address;
//   - rpc_port, broadcast_port, listen_port, native_port (int): Local.Port;
//   - host_id (uuid): Local.HostID;
//   - tokens (set<text>): Local.Tokens;
//   - data_center, rack (text): Local.DataCenter, Local.Rack when non-empty,
//     else Cassandra's value.
//
// Everything else (key, schema_version, release_version, partitioner,
// cluster_name, cql_version, truncated_at, ...), the metadata (any subset and
// order of columns, global or per-column table spec, paging state, v5 new
// metadata id) and any bytes after the rows are kept byte for byte; every row
// is rewritten. The body is returned unchanged if it is not a Rows result
// (e.g. Void) or has the No_metadata flag (the columns cannot be told apart).
//
// It fails with ErrUnexpectedType if an identity column has another CQL type,
// with ErrUnsupportedSelection for a SELECT JSON or a computed column over an
// identity column, with ErrBadNode if Local cannot be written, and with
// ErrMalformed for a malformed body; the original body must then not be
// forwarded.
func (r *Rewriter) RewriteLocal(version byte, body []byte) ([]byte, error) {
	if err := checkVersion(version); err != nil {
		return nil, fmt.Errorf("rewriting system.local: %w", err)
	}
	kind, err := resultKind(body)
	if err != nil {
		return nil, fmt.Errorf("rewriting system.local: %w", err)
	}
	if kind != resultRows {
		return body, nil
	}
	rs, err := parseRows(version, body)
	if err != nil {
		return nil, fmt.Errorf("rewriting system.local: %w", err)
	}
	if rs.flags&flagNoMetadata != 0 {
		return body, nil
	}
	repl := make([][]byte, len(rs.cols)) // nil: keep the original cell
	for i, c := range rs.cols {
		ro, ok := localRoles[string(c.name)]
		if !ok {
			if isComputedIdentity(c.name) {
				return nil, fmt.Errorf("rewriting system.local: %w: column %q", ErrUnsupportedSelection, c.name)
			}
			continue
		}
		if err := checkType(ro, c); err != nil {
			return nil, fmt.Errorf("rewriting system.local: %w", err)
		}
		if repl[i], err = r.Local.cell(ro, nil, ""); err != nil {
			return nil, fmt.Errorf("rewriting system.local column %q: %w", c.name, err)
		}
	}
	out := make([]byte, rs.countAt+4, len(body)+64)
	copy(out, body[:rs.countAt+4])
	end, err := forEachCell(body, rs, func(_, col int, cell []byte) {
		if repl[col] != nil {
			out = append(out, repl[col]...)
		} else {
			out = append(out, cell...)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rewriting system.local: %w", err)
	}
	return append(out, body[end:]...), nil
}

// isComputedIdentity reports whether a result column name is a JSON
// selection or a computed selector (function call, cast) that mentions an
// identity column.
func isComputedIdentity(name []byte) bool {
	if bytes.Equal(name, []byte("[json]")) {
		return true
	}
	if bytes.IndexByte(name, '(') < 0 {
		return false
	}
	for _, w := range identityWords {
		if bytes.Contains(name, w) {
			return true
		}
	}
	return false
}

// RewritePeers takes a RESULT body that Cassandra returned for a system.peers
// or system.peers_v2 query in protocol version version, and returns a body
// with the same column metadata whose rows are exactly one per r.Peers entry,
// in order (none when Peers is empty). Each row holds:
//
//   - peer, rpc_address, native_address, preferred_ip (inet): the Address;
//   - peer_port, native_port, preferred_port (int): the Port;
//   - host_id, tokens, data_center, rack: the Node's values (empty data_center
//     and rack are written as null);
//   - schema_version: schemaVersion; release_version: releaseVersion (null
//     when empty); the caller takes them from the real local row (ParseLocal);
//   - any other column (including aliases and computed columns): null.
//
// The Has_more_pages flag and the paging state are removed, so drivers do not
// ask for more pages; any v5 new metadata id and bytes after the rows are
// kept. A non-Rows result is returned unchanged. It fails with ErrNoMetadata
// if the No_metadata flag is set (the columns are unknown and the real peers
// must not reach the driver), with ErrUnexpectedType if a filled column has
// another CQL type, with ErrBadNode if a peer cannot be written, and with
// ErrMalformed for a malformed body.
func (r *Rewriter) RewritePeers(version byte, body []byte, schemaVersion [16]byte, releaseVersion string) ([]byte, error) {
	if err := checkVersion(version); err != nil {
		return nil, fmt.Errorf("rewriting system.peers: %w", err)
	}
	kind, err := resultKind(body)
	if err != nil {
		return nil, fmt.Errorf("rewriting system.peers: %w", err)
	}
	if kind != resultRows {
		return body, nil
	}
	rs, err := parseRows(version, body)
	if err != nil {
		return nil, fmt.Errorf("rewriting system.peers: %w", err)
	}
	if rs.flags&flagNoMetadata != 0 {
		return nil, fmt.Errorf("rewriting system.peers: %w", ErrNoMetadata)
	}
	end, err := forEachCell(body, rs, nil) // validate, and find the trailing bytes
	if err != nil {
		return nil, fmt.Errorf("rewriting system.peers: %w", err)
	}
	roles := make([]role, len(rs.cols))
	for i, c := range rs.cols {
		ro := peersRoles[string(c.name)]
		if err := checkType(ro, c); err != nil {
			return nil, fmt.Errorf("rewriting system.peers: %w", err)
		}
		roles[i] = ro
	}

	size := len(body) - (end - rs.countAt) - (rs.pagingTo - rs.pagingFrom) + 4
	out := make([]byte, 0, size+len(r.Peers)*len(roles)*24)
	out = append(out, body[:4]...) // kind
	out = binary.BigEndian.AppendUint32(out, uint32(rs.flags&^flagHasMorePages))
	out = append(out, body[8:rs.pagingFrom]...) // columns count
	out = append(out, body[rs.pagingTo:rs.countAt]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(r.Peers)))
	for p := range r.Peers {
		peer := &r.Peers[p]
		for i, ro := range roles {
			c, err := peer.cell(ro, &schemaVersion, releaseVersion)
			if err != nil {
				return nil, fmt.Errorf("rewriting system.peers: peer %d column %q: %w", p, rs.cols[i].name, err)
			}
			if c == nil {
				c = nullCell
			}
			out = append(out, c...)
		}
	}
	return append(out, body[end:]...), nil
}

// LocalInfo is what the proxy keeps from the real system.local row.
type LocalInfo struct {
	SchemaVersion  [16]byte
	ReleaseVersion string
	DataCenter     string
	Rack           string
	Partitioner    string
	ClusterName    string
}

// ParseLocal extracts schema_version (uuid), release_version, data_center,
// rack, partitioner and cluster_name (text) from the first row of a
// system.local RESULT body in protocol version version. Columns that were not
// selected, null values and a result without rows give zero values. The
// whole body is validated, not just the first row. It fails
// with ErrNotRows for another kind of RESULT, ErrNoMetadata if the No_metadata
// flag is set, ErrUnexpectedType if one of these columns has another CQL type
// and ErrMalformed for a malformed body.
func ParseLocal(version byte, body []byte) (LocalInfo, error) {
	var info LocalInfo
	if err := checkVersion(version); err != nil {
		return info, fmt.Errorf("parsing system.local: %w", err)
	}
	kind, err := resultKind(body)
	if err != nil {
		return info, fmt.Errorf("parsing system.local: %w", err)
	}
	if kind != resultRows {
		return info, fmt.Errorf("parsing system.local: %w (kind %d)", ErrNotRows, kind)
	}
	rs, err := parseRows(version, body)
	if err != nil {
		return info, fmt.Errorf("parsing system.local: %w", err)
	}
	if rs.flags&flagNoMetadata != 0 {
		return info, fmt.Errorf("parsing system.local: %w", ErrNoMetadata)
	}
	for _, c := range rs.cols {
		var err error
		switch string(c.name) {
		case "schema_version":
			err = checkType(roleSchema, c)
		case "release_version", "data_center", "rack", "partitioner", "cluster_name":
			err = checkType(roleRelease, c) // any text type
		}
		if err != nil {
			return info, fmt.Errorf("parsing system.local: %w", err)
		}
	}
	var bad error
	_, err = forEachCell(body, rs, func(row, col int, cell []byte) {
		v := cell[4:]
		if row > 0 || int32(binary.BigEndian.Uint32(cell)) < 0 {
			return // null
		}
		switch string(rs.cols[col].name) {
		case "schema_version":
			if len(v) != 16 {
				bad = fmt.Errorf("%w: schema_version of %d bytes", ErrMalformed, len(v))
				return
			}
			copy(info.SchemaVersion[:], v)
		case "release_version":
			info.ReleaseVersion = string(v)
		case "data_center":
			info.DataCenter = string(v)
		case "rack":
			info.Rack = string(v)
		case "partitioner":
			info.Partitioner = string(v)
		case "cluster_name":
			info.ClusterName = string(v)
		}
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return LocalInfo{}, fmt.Errorf("parsing system.local: %w", err)
	}
	return info, nil
}
