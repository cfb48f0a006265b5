package idempotency

// Kind is what a statement does.
type Kind uint8

// Statement kinds. KindOther covers USE, schema and auth statements, and
// whatever was not understood; none of them is ever idempotent.
const (
	KindOther Kind = iota
	KindSelect
	KindInsert
	KindUpdate
	KindDelete
	KindBatch
)

var kindNames = [...]string{"other", "select", "insert", "update", "delete", "batch"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "other"
}

// isDML tells whether overrides may apply to statements of kind k: only
// reads and writes are ever hedged, whatever the configuration says.
func (k Kind) isDML() bool { return k >= KindSelect && k <= KindBatch }

// Reason says why a verdict is what it is: for a statement found not
// idempotent, the first rule that made it so; ReasonNone for one inferred
// idempotent; ReasonOverride or ReasonPayload for a forced verdict either
// way. Its String is short and fixed, fit for a metric label.
type Reason uint8

// Reasons. Keep reasonNames in step.
const (
	ReasonNone             Reason = iota // inferred idempotent
	ReasonUnparsable                     // the lexer or the parser gave up: unterminated string, unknown syntax
	ReasonUnknownStatement               // a statement kind the classifier does not know (DESCRIBE, ...)
	ReasonEmpty                          // no statement at all
	ReasonUse                            // USE keyspace
	ReasonSchema                         // CREATE/ALTER/DROP of schema objects, TRUNCATE
	ReasonAuth                           // roles, users, permissions, identities (GRANT, LIST ROLES, ...)
	ReasonLWT                            // IF NOT EXISTS, IF EXISTS, IF conditions
	ReasonCounter                        // counter increment or decrement
	ReasonCounterBatch                   // BEGIN COUNTER BATCH, or a protocol BATCH of type COUNTER
	ReasonListAppend                     // l = l + [...], l += ..., l = l + ? with a list bind type
	ReasonListPrepend                    // l = [...] + l
	ReasonListIndex                      // DELETE l[i], l[i] = null (deleting by position)
	ReasonListTimestamp                  // a whole list overwritten with USING TIMESTAMP: twice stores it twice
	ReasonNonDeterministic               // now(), uuid(), currentTimestamp(), ...
	ReasonUnknownFunction                // a user-defined or unknown function: it may not be deterministic
	ReasonUnknownType                    // x = x + ? whose bind type is unknown (list or counter would not be idempotent)
	ReasonOverride                       // forced by a configured override rule
	ReasonPayload                        // forced by the request's custom payload (PayloadKey)
	ReasonSerialRead                     // a read at SERIAL or LOCAL_SERIAL consistency (see ConsistencyIdempotent)
	numReasons
)

var reasonNames = [numReasons]string{
	"none", "unparsable", "unknown_statement", "empty", "use", "schema", "auth",
	"lwt", "counter", "counter_batch", "list_append", "list_prepend", "list_index", "list_overwrite_timestamp",
	"non_deterministic_function", "unknown_function", "unknown_bind_type",
	"override", "payload", "serial_read",
}

func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Verdict is the answer to "may this statement run twice?".
type Verdict struct {
	// Idempotent is true when running the statement twice (or concurrently
	// on two replicas) leaves the same data and gives an equivalent answer
	// as running it once, so that a hedge may send a second copy.
	Idempotent bool
	// Reason explains the verdict (see Reason).
	Reason Reason
	// Detail is the text that decided it, when there is one: a substring of
	// the statement (the function name, the IF keyword...) or the override
	// rule as configured. It is meant for logs, not for metric labels.
	Detail string
}

var idempotent = Verdict{Idempotent: true}

func notIdempotent(r Reason, detail string) Verdict { return Verdict{Reason: r, Detail: detail} }

// Statement is what Classify learns about one CQL statement.
type Statement struct {
	Kind Kind
	// Keyspace and Table are those the statement names (lower-cased unless
	// quoted; quotes removed). Keyspace is the keyspace passed to Classify
	// when the statement names none. For a BATCH they are set only when all
	// its statements name the same table. Empty when unknown.
	Keyspace, Table string
	// UsingTimestamp is set when the statement gives every write its own
	// timestamp (USING TIMESTAMP; for a BATCH, at the batch level or in
	// each statement), so a client-side timestamp set by the proxy would be
	// ignored for it.
	UsingTimestamp bool
	// ListOverwrite is set when the statement may overwrite a whole
	// non-frozen list (l = [1, 2], an INSERT of a list value, a bind
	// variable of list or unknown type in such a place, INSERT JSON with an
	// array). Such a write is idempotent only when its copies have different
	// timestamps: two copies with the same one store the list twice. So for
	// it the proxy must not give hedged copies a common client timestamp,
	// and must not hedge a request that carries one (the default timestamp
	// flag of QUERY, EXECUTE or BATCH). With USING TIMESTAMP the statement
	// is not idempotent (ReasonListTimestamp).
	ListOverwrite bool
	// Markers is the number of bind markers (? and :name) in the text, which
	// is the number of variables Cassandra's PREPARED metadata lists.
	Markers int
	// Verdict is the decision, overrides included. A statement that is not
	// a SELECT, INSERT, UPDATE, DELETE or BATCH is never idempotent.
	Verdict
}

// Protocol BATCH types (native protocol spec, section 4.1.7).
const (
	BatchLogged   byte = 0
	BatchUnlogged byte = 1
	BatchCounter  byte = 2
)

// CombineBatch returns the verdict of a protocol BATCH of the given type
// whose statements have the given verdicts (each from Classify, or from the
// cache of its prepared id): idempotent only if every child is and the
// batch is not a COUNTER batch. The first child that is not decides the
// reason. An unknown batch type is not idempotent.
func CombineBatch(batchType byte, children ...Verdict) Verdict {
	switch batchType {
	case BatchLogged, BatchUnlogged:
	case BatchCounter:
		return notIdempotent(ReasonCounterBatch, "")
	default:
		return notIdempotent(ReasonUnparsable, "batch type")
	}
	for _, c := range children {
		if !c.Idempotent {
			return c
		}
	}
	return idempotent
}

// Consistency levels (native protocol spec, section 3) that make a read a
// Paxos read.
const (
	ConsistencySerial      uint16 = 0x0008
	ConsistencyLocalSerial uint16 = 0x0009
)

// ConsistencyIdempotent tells whether a request at consistency level cl may
// be hedged as far as the level goes. SERIAL and LOCAL_SERIAL reads are
// not: such a read runs a Paxos round that may complete (commit) another
// client's in-progress lightweight transaction, so it is a write in
// disguise, and two of them contend with each other on the same partition.
// The caller checks it per request, in addition to the statement's verdict
// (a prepared statement's verdict does not depend on the level it is run
// at).
func ConsistencyIdempotent(cl uint16) bool {
	return cl != ConsistencySerial && cl != ConsistencyLocalSerial
}

// PayloadKey is the custom payload key (protocol v4+) with which a client
// tells the proxy, per request, whether the statement is idempotent: the
// value "true" or "false". Drivers commonly know it (the Java driver's
// Statement.setIdempotent, gocql's Query.Idempotent) and can forward it.
const PayloadKey = "cqlgate-idempotent"

// PayloadVerdict reads the value of PayloadKey. ok is false for any value
// other than "true" or "false" (in any case), which the caller then
// ignores. The caller should honour it only for statements of kind select,
// insert, update, delete or batch.
func PayloadVerdict(value []byte) (v Verdict, ok bool) {
	switch {
	case equalFoldBytes(value, "true"):
		return Verdict{Idempotent: true, Reason: ReasonPayload}, true
	case equalFoldBytes(value, "false"):
		return Verdict{Reason: ReasonPayload}, true
	}
	return Verdict{}, false
}

// equalFoldBytes is strings.EqualFold for a []byte and an ASCII lower-case
// word, without converting the bytes to a string.
func equalFoldBytes(b []byte, word string) bool {
	if len(b) != len(word) {
		return false
	}
	for i := range b {
		if b[i]|0x20 != word[i] {
			return false
		}
	}
	return true
}
