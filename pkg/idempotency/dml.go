package idempotency

import "strings"

// This file parses INSERT, UPDATE, DELETE and BATCH (Cassandra 5.0's
// grammar, Parser.g) far enough to find everything that makes a write
// non-idempotent:
//
//   - a lightweight transaction: IF NOT EXISTS, IF EXISTS, IF conditions.
//     Running one twice gives a different answer ([applied] false the second
//     time), and its Paxos rounds contend;
//   - a counter update, c = c + 1, c = c - ?, c += 1: it adds twice;
//   - a list append or prepend, l = l + [1], l = [1] + l, l += ?: the list
//     grows twice;
//   - deleting a list element by position, DELETE l[1] or l[1] = null: the
//     second run deletes the next element. Setting one by position,
//     l[1] = 'x', is idempotent (it overwrites the same cell), and so is
//     removing by value, l = l - [1];
//   - a call of a non-deterministic function (now(), uuid(), ...) or of one
//     not known to be deterministic (a UDF), anywhere in the statement;
//   - a form the parser does not recognize.
//
// Set and map additions and removals, overwrites, UDT field updates and
// deletions of whole rows, columns, map keys and UDT fields are idempotent,
// with one exception that depends on timestamps: overwriting a whole
// non-frozen list (l = [1, 2], an INSERT of a list value) writes a
// tombstone at the write's timestamp minus one and cells whose names are
// timeuuids made afresh by each coordinator. Two copies with different
// timestamps leave one list (the later tombstone covers the earlier
// cells); two copies with the same timestamp leave the list twice (measured
// on Cassandra 5.0.4: [1, 2] became [1, 2, 1, 2]). So a list overwrite with
// USING TIMESTAMP is not idempotent, and one without it is idempotent only
// if the proxy sends its copies without a common client timestamp
// (Statement.ListOverwrite). A list literal may be a vector (a single cell,
// safe), and a bind variable of unknown type may be a list: both are
// treated as lists. USING TTL changes nothing.
//
// Several forms are ambiguous without the schema, which the proxy does not
// read: in x[k] = v and DELETE x[k], x may be a list (k a position) or a
// map (k a key). A key that cannot be a position (a string, a uuid, a bind
// variable of a non-int type) makes x a map; otherwise the statement is
// treated as a list access, so DELETE x[1] and x[1] = null (or = ?, which
// may be bound to null) are not idempotent.

// structural lists the keywords that may be followed by '(' without being
// a function call.
var structural = [...]string{
	"IN", "AND", "OR", "NOT", "WHERE", "IF", "VALUES", "SET", "KEY", "CONTAINS",
	"LIKE", "JSON", "USING", "FROM", "INTO", "EXISTS",
}

func isStructural(word string) bool {
	for _, s := range structural {
		if strings.EqualFold(word, s) {
			return true
		}
	}
	return false
}

// stmtInfo is what parsing one INSERT, UPDATE or DELETE yields.
type stmtInfo struct {
	kind          Kind
	ks, table     string
	usingTS       bool
	listOverwrite bool  // may overwrite a whole list (see above)
	listTok       token // where, for Verdict.Detail
	verdict       Verdict
}

// fail records a reason for not being idempotent; the first one wins.
func (s *stmtInfo) fail(r Reason, detail string) {
	if s.verdict.Idempotent {
		s.verdict = notIdempotent(r, detail)
	}
}

func (s *stmtInfo) statement() Statement {
	return Statement{Kind: s.kind, Keyspace: s.ks, Table: s.table, UsingTimestamp: s.usingTS,
		ListOverwrite: s.listOverwrite, Verdict: s.verdict}
}

// overwrites records that the term toks may overwrite a whole list.
func (p *parser) overwrites(toks []token, s *stmtInfo) {
	if !s.listOverwrite && p.mayBeList(toks) {
		s.listOverwrite, s.listTok = true, toks[0]
	}
}

// checkListTimestamp fails a statement that overwrites a list with a
// timestamp all its copies share.
func (p *parser) checkListTimestamp(s *stmtInfo, batchTS bool) {
	if s.listOverwrite && (s.usingTS || batchTS) {
		s.fail(ReasonListTimestamp, p.text(s.listTok))
	}
}

// mayBeList tells whether a value term may be a whole list: a list literal
// (or a vector), a bind variable of list or unknown type, a type hint or
// cast naming a list, or fromJson().
func (p *parser) mayBeList(term []token) bool {
	if len(term) == 0 {
		return false
	}
	if p.punct(term, 0, "(") {
		end := p.matching(term, 0)
		if end < 0 || p.mentionsList(term[:end]) {
			return true
		}
		if end < len(term) {
			term = term[end:] // a type hint: (text) ?
		}
	}
	t := term[0]
	switch {
	case p.punct(term, 0, "["):
		return true
	case t.kind == tkMarker:
		return p.types == nil || p.types[t.marker] == typeList
	case (t.kind == tkIdent || t.kind == tkQIdent) && p.punct(term, 1, "("):
		name := p.text(t)
		return strings.EqualFold(name, "fromjson") || strings.EqualFold(name, "from_json") || p.mentionsList(term)
	}
	return false
}

func (p *parser) mentionsList(toks []token) bool {
	for i := range toks {
		if p.kw(toks, i, "LIST") {
			return true
		}
	}
	return false
}

// dml classifies a lone INSERT, UPDATE or DELETE.
func (p *parser) dml(toks []token) Statement {
	s := p.write(toks)
	return s.statement()
}

// write parses one INSERT, UPDATE or DELETE that spans all of toks.
func (p *parser) write(toks []token) stmtInfo {
	s := stmtInfo{verdict: idempotent}
	var ok bool
	switch {
	case p.kw(toks, 0, "INSERT"):
		s.kind = KindInsert
		ok = p.insert(toks, &s)
	case p.kw(toks, 0, "UPDATE"):
		s.kind = KindUpdate
		ok = p.update(toks, &s)
	case p.kw(toks, 0, "DELETE"):
		s.kind = KindDelete
		ok = p.delete(toks, &s)
	}
	if !ok {
		// A reason found before the parser gave up is the more telling one.
		s.fail(ReasonUnparsable, "")
	}
	p.checkListTimestamp(&s, false)
	return s
}

// insert parses
//
//	INSERT INTO t (cols) VALUES (terms) [IF NOT EXISTS] [USING ...]
//	INSERT INTO t JSON term [DEFAULT NULL|UNSET] [IF NOT EXISTS] [USING ...]
func (p *parser) insert(toks []token, s *stmtInfo) bool {
	if !p.kw(toks, 1, "INTO") {
		return false
	}
	var i int
	var ok bool
	if s.ks, s.table, i, ok = p.tableName(toks, 2); !ok {
		return false
	}
	switch {
	case p.punct(toks, i, "("):
		if i = p.matching(toks, i); i < 0 || !p.kw(toks, i, "VALUES") || !p.punct(toks, i+1, "(") {
			return false
		}
		end := p.matching(toks, i+1)
		if end < 0 {
			return false
		}
		p.checkFuncs(toks[i+1:end], s)
		for j := i + 2; j < end-1; {
			k := p.regionEnd(toks[:end-1], j, true)
			if k < 0 || k == j {
				return false
			}
			p.overwrites(toks[j:k], s)
			j = k + 1
		}
		i = end
	case p.kw(toks, i, "JSON"):
		// The JSON document overwrites the columns it names, so it is
		// idempotent, but an array in it may be a whole list (or the
		// document may hold one, when it is a bind variable).
		if i+1 >= len(toks) || !(toks[i+1].kind == tkString || toks[i+1].kind == tkMarker) {
			return false
		}
		if doc := toks[i+1]; doc.kind == tkMarker || strings.IndexByte(p.text(doc), '[') >= 0 {
			s.listOverwrite, s.listTok = true, doc // a JSON array may be a list
		}
		i += 2
		if p.kw(toks, i, "DEFAULT") {
			if !p.kw(toks, i+1, "NULL") && !p.kw(toks, i+1, "UNSET") {
				return false
			}
			i += 2
		}
	default:
		return false
	}
	for i < len(toks) {
		switch {
		case p.kw(toks, i, "IF"):
			s.fail(ReasonLWT, p.text(toks[i]))
			if !p.kw(toks, i+1, "NOT") || !p.kw(toks, i+2, "EXISTS") {
				return false
			}
			i += 3
		case p.kw(toks, i, "USING"):
			if i, ok = p.using(toks, i, s); !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// using parses USING (TTL|TIMESTAMP) value [AND ...] at toks[i].
func (p *parser) using(toks []token, i int, s *stmtInfo) (int, bool) {
	i++
	for {
		switch {
		case p.kw(toks, i, "TIMESTAMP"):
			s.usingTS = true
		case p.kw(toks, i, "TTL"):
		default:
			return i, false
		}
		if i+1 >= len(toks) || !(toks[i+1].kind == tkNumber || toks[i+1].kind == tkMarker) {
			return i, false
		}
		i += 2
		if !p.kw(toks, i, "AND") {
			return i, true
		}
		i++
	}
}

// update parses
//
//	UPDATE t [USING ...] SET assignment, ... WHERE relations [IF ...]
func (p *parser) update(toks []token, s *stmtInfo) bool {
	var i int
	var ok bool
	if s.ks, s.table, i, ok = p.tableName(toks, 1); !ok {
		return false
	}
	if p.kw(toks, i, "USING") {
		if i, ok = p.using(toks, i, s); !ok {
			return false
		}
	}
	if !p.kw(toks, i, "SET") {
		return false
	}
	i++
	for {
		end := p.regionEnd(toks, i, true, "WHERE")
		if end < 0 || end == i || !p.assignment(toks[i:end], s) {
			return false
		}
		i = end
		if !p.punct(toks, i, ",") {
			break
		}
		i++
	}
	return p.whereIf(toks, i, s)
}

// delete parses
//
//	DELETE [selector, ...] FROM t [USING TIMESTAMP v] WHERE relations [IF ...]
func (p *parser) delete(toks []token, s *stmtInfo) bool {
	i := 1
	if !p.kw(toks, i, "FROM") {
		for {
			end := p.regionEnd(toks, i, true, "FROM")
			if end < 0 || end == i || !p.deletion(toks[i:end], s) {
				return false
			}
			i = end
			if !p.punct(toks, i, ",") {
				break
			}
			i++
		}
	}
	if !p.kw(toks, i, "FROM") {
		return false
	}
	var ok bool
	if s.ks, s.table, i, ok = p.tableName(toks, i+1); !ok {
		return false
	}
	if p.kw(toks, i, "USING") {
		if i, ok = p.using(toks, i, s); !ok {
			return false
		}
	}
	return p.whereIf(toks, i, s)
}

// whereIf parses WHERE relations [IF EXISTS | IF conditions] at toks[i],
// to the end. A relation that calls now() or uuid() picks a different row
// each time, so the function check covers the WHERE clause too.
func (p *parser) whereIf(toks []token, i int, s *stmtInfo) bool {
	if !p.kw(toks, i, "WHERE") {
		return false
	}
	end := p.regionEnd(toks, i+1, false, "IF")
	if end < 0 || end == i+1 {
		return false
	}
	p.checkFuncs(toks[i+1:end], s)
	if end < len(toks) {
		s.fail(ReasonLWT, p.text(toks[end]))
		if end+1 == len(toks) {
			return false
		}
	}
	return true
}

// deletion checks one selector of a DELETE: a column, a UDT field
// (col.field) or a collection element (col[key]).
func (p *parser) deletion(toks []token, s *stmtInfo) bool {
	if _, ok := p.name(toks[0]); !ok {
		return false
	}
	switch {
	case len(toks) == 1:
		return true
	case len(toks) == 3 && p.punct(toks, 1, "."):
		_, ok := p.name(toks[2])
		return ok
	case p.punct(toks, 1, "[") && p.matching(toks, 1) == len(toks):
		key := toks[2 : len(toks)-1]
		if len(key) == 0 {
			return false
		}
		p.checkFuncs(key, s)
		if !p.isMapKey(key) {
			s.fail(ReasonListIndex, p.text(toks[0]))
		}
		return true
	}
	return false
}
