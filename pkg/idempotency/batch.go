package idempotency

// BATCH: its children parsed one by one, and their verdicts combined.

// batch classifies
//
//	BEGIN [UNLOGGED | COUNTER] BATCH [USING TIMESTAMP v]
//	  statement [;] ...
//	APPLY BATCH [;]
//
// Statements end at a ';' or where the next INSERT, UPDATE or DELETE
// begins (Cassandra makes the ';' optional, and allows one).
func (p *parser) batch(toks []token) Statement {
	st := Statement{Kind: KindBatch, Verdict: idempotent}
	bad := func(i int) Statement {
		d := ""
		if i < len(toks) {
			d = p.text(toks[i])
		}
		if st.Idempotent {
			st.Verdict = notIdempotent(ReasonUnparsable, d)
		}
		return st
	}
	i := 1
	if p.kw(toks, i, "UNLOGGED") {
		i++
	} else if p.kw(toks, i, "COUNTER") {
		st.Verdict = notIdempotent(ReasonCounterBatch, p.text(toks[i]))
		i++
	}
	if !p.kw(toks, i, "BATCH") {
		return bad(i)
	}
	i++
	var info stmtInfo
	if p.kw(toks, i, "USING") {
		var ok bool
		if i, ok = p.using(toks, i, &info); !ok {
			return bad(i)
		}
	}
	batchTS := info.usingTS
	allTS := true
	children := 0
	for {
		if p.kw(toks, i, "APPLY") {
			break
		}
		if !p.kw(toks, i, "INSERT") && !p.kw(toks, i, "UPDATE") && !p.kw(toks, i, "DELETE") {
			return bad(i)
		}
		end := p.childEnd(toks, i)
		if end < 0 {
			return bad(i)
		}
		child := p.write(toks[i:end])
		p.checkListTimestamp(&child, batchTS)
		if p.rules.has() {
			c := child.statement()
			if v, ok := p.rules.match(&c, p.q, toks[i:end]); ok {
				child.verdict = v
			}
		}
		if !child.verdict.Idempotent && st.Idempotent {
			st.Verdict = child.verdict
		}
		allTS = allTS && child.usingTS
		st.ListOverwrite = st.ListOverwrite || child.listOverwrite
		if children == 0 {
			st.Keyspace, st.Table = child.ks, child.table
		} else if st.Keyspace != child.ks || st.Table != child.table {
			st.Keyspace, st.Table = "", ""
		}
		children++
		i = end
		if p.punct(toks, i, ";") { // one, optional
			i++
		}
	}
	if !p.kw(toks, i+1, "BATCH") {
		return bad(i + 1)
	}
	for _, t := range toks[i+2:] {
		if !(t.kind == tkPunct && p.text(t) == ";") {
			return bad(len(toks))
		}
	}
	st.UsingTimestamp = batchTS || (allTS && children > 0)
	return st
}

// childEnd returns where the batch statement starting at toks[i] ends: at
// the first ';', or INSERT, UPDATE, DELETE or APPLY outside brackets.
func (p *parser) childEnd(toks []token, i int) int {
	end := p.regionEnd(toks, i+1, false, "INSERT", "UPDATE", "DELETE", "APPLY")
	if end < 0 {
		return -1
	}
	for j := i + 1; j < end; j++ {
		if p.punct(toks, j, ";") {
			return j
		}
	}
	if end == len(toks) {
		return -1 // no APPLY BATCH
	}
	return end
}
