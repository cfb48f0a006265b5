package stmtstats

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxCodes bounds the distinct error codes counted per entry; others add
// to the error total only.
const maxCodes = 6

// Entry is one statement's statistics. Its identity (id, text, keyspace,
// table) never changes; its counters change under mu.
type Entry struct {
	id         string // hex prepared id or fingerprint
	pid        string // raw prepared id (KindPrepared)
	fp         uint64 // fingerprint (KindQuery, KindBatch)
	kind       Kind
	text       string
	keyspace   string
	table      string
	statement  string
	idempotent bool
	first      int64 // unix ns
	idx        int   // in Table.list; under Table.mu
	evicted    atomic.Bool

	mu        sync.Mutex
	calls     uint64
	errors    uint64
	codes     [maxCodes]codeCount
	rows      uint64
	bytesIn   uint64
	bytesOut  uint64
	latSum    int64 // ns
	latMax    int64
	queued    uint64 // calls that waited in the limiter's queue
	queuedSum int64  // ns
	queuedMax int64
	rejected  uint64
	hedges    uint64
	hedgeWins uint64
	last      int64 // unix ns
	hist      histogram
}

type codeCount struct {
	code  int32
	count uint32
}

// ID is the entry's id: the prepared id or the fingerprint, in hex.
func (e *Entry) ID() string { return e.id }

// Evicted reports whether the entry left its table (evicted or reset):
// whoever cached it should look the statement up again.
func (e *Entry) Evicted() bool { return e.evicted.Load() }

// Text is the statement's text (normalized for QUERY, truncated).
func (e *Entry) Text() string { return e.text }

// Keyspace is the keyspace of the statement's table ("" if unknown).
func (e *Entry) Keyspace() string { return e.keyspace }

// Table is the statement's table ("" if unknown, or a BATCH of several).
func (e *Entry) Table() string { return e.table }

// KeyspaceTable is "keyspace.table", or what of it is known.
func (e *Entry) KeyspaceTable() string {
	if e.table == "" {
		return e.keyspace
	}
	return e.keyspace + "." + e.table
}

// Sample is what one request tells about its statement.
type Sample struct {
	Now     time.Time     // when it ended
	Latency time.Duration // from reading it to queueing its answer
	Queued  time.Duration // time waiting in the limiter's queue (0: none)
	// BytesIn and BytesOut are the request's and the answer's frame sizes.
	BytesIn, BytesOut int
	// Rows is the row count of a Rows RESULT (0 otherwise).
	Rows int32
	// Error is set when the client got an ERROR, with its code.
	Error bool
	Code  int32
	// Rejected is set for an OVERLOADED from the proxy's limiter (it is
	// counted as an error too).
	Rejected bool
	// Hedges is the number of hedges sent; HedgeWon is set when a hedge's
	// answer was the client's.
	Hedges   int
	HedgeWon bool
}

// Record adds one request to the entry. It allocates nothing.
func (e *Entry) Record(s *Sample) {
	lat := int64(s.Latency)
	b := bucketOf(s.Latency)
	e.mu.Lock()
	if s.Rejected {
		e.rejected++
	} else {
		e.calls++
		e.hist[b]++
		e.latSum += lat
		e.latMax = max(e.latMax, lat)
	}
	if s.Error {
		e.errors++
		for i := range e.codes {
			c := &e.codes[i]
			if c.count == 0 {
				c.code = s.Code
			}
			if c.code == s.Code {
				c.count++
				break
			}
		}
	}
	e.rows += uint64(s.Rows)
	e.bytesIn += uint64(s.BytesIn)
	e.bytesOut += uint64(s.BytesOut)
	if s.Queued > 0 {
		e.queued++
		e.queuedSum += int64(s.Queued)
		e.queuedMax = max(e.queuedMax, int64(s.Queued))
	}
	e.hedges += uint64(s.Hedges)
	if s.HedgeWon {
		e.hedgeWins++
	}
	e.last = s.Now.UnixNano()
	e.mu.Unlock()
}

// Stat is an entry's statistics at one moment, as /statements shows them.
// Durations are in milliseconds.
type Stat struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind"`
	Statement  string            `json:"statement"`
	Text       string            `json:"text"`
	Keyspace   string            `json:"keyspace"`
	Table      string            `json:"table"`
	Idempotent bool              `json:"idempotent"`
	Calls      uint64            `json:"calls"`
	Errors     uint64            `json:"errors"`
	ErrorCodes map[string]uint64 `json:"errors_by_code,omitempty"`
	Rows       uint64            `json:"rows"`
	BytesIn    uint64            `json:"bytes_in"`
	BytesOut   uint64            `json:"bytes_out"`
	MeanMs     float64           `json:"mean_ms"`
	P50Ms      float64           `json:"p50_ms"`
	P99Ms      float64           `json:"p99_ms"`
	MaxMs      float64           `json:"max_ms"`
	TotalMs    float64           `json:"total_ms"`
	Queued     uint64            `json:"queued"`
	QueuedMs   float64           `json:"queued_ms"`
	QueuedMax  float64           `json:"queued_max_ms"`
	Rejected   uint64            `json:"rejected"`
	Hedges     uint64            `json:"hedges"`
	HedgeWins  uint64            `json:"hedge_wins"`
	FirstSeen  time.Time         `json:"first_seen"`
	LastSeen   time.Time         `json:"last_seen"`
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

func (e *Entry) stat() Stat {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stat{
		ID: e.id, Kind: e.kind.String(), Statement: e.statement, Text: e.text,
		Keyspace: e.keyspace, Table: e.table, Idempotent: e.idempotent,
		Calls: e.calls, Errors: e.errors, Rows: e.rows, BytesIn: e.bytesIn, BytesOut: e.bytesOut,
		MaxMs: ms(e.latMax), TotalMs: ms(e.latSum), Queued: e.queued, QueuedMs: ms(e.queuedSum),
		QueuedMax: ms(e.queuedMax), Rejected: e.rejected, Hedges: e.hedges, HedgeWins: e.hedgeWins,
		FirstSeen: time.Unix(0, e.first).UTC(),
	}
	if e.last != 0 {
		s.LastSeen = time.Unix(0, e.last).UTC()
	}
	if e.calls > 0 {
		s.MeanMs = ms(e.latSum / int64(e.calls))
		maxLat := time.Duration(e.latMax)
		s.P50Ms = ms(int64(e.hist.quantile(0.5, e.calls, maxLat)))
		s.P99Ms = ms(int64(e.hist.quantile(0.99, e.calls, maxLat)))
	}
	for _, c := range e.codes {
		if c.count == 0 {
			break
		}
		if s.ErrorCodes == nil {
			s.ErrorCodes = map[string]uint64{}
		}
		s.ErrorCodes[fmt.Sprintf("0x%04x", uint32(c.code))] = uint64(c.count)
	}
	return s
}

// Report is the answer of Snapshot.
type Report struct {
	Since      time.Time `json:"since"` // creation or last reset
	Entries    int       `json:"entries"`
	MaxEntries int       `json:"max_entries"`
	Evictions  uint64    `json:"evictions"`
	Sort       string    `json:"sort"`
	Statements []Stat    `json:"statements"`
}

// Sort orders known to Snapshot.
var Sorts = []string{"calls", "p99", "errors", "queued", "total", "rejected", "rows", "max", "mean", "hedges"}

// Snapshot returns the statistics of up to limit entries (0: all), sorted
// by the given key, highest first (see Sorts; unknown keys sort by calls).
func (t *Table) Snapshot(sortBy string, limit int) Report {
	t.mu.Lock()
	entries := slices.Clone(t.list)
	r := Report{Since: t.since.UTC(), Entries: len(t.list), MaxEntries: t.cfg.MaxEntries, Evictions: t.evictions.Load()}
	t.mu.Unlock()
	if !slices.Contains(Sorts, sortBy) {
		sortBy = "calls"
	}
	r.Sort = sortBy
	stats := make([]Stat, len(entries))
	for i, e := range entries {
		stats[i] = e.stat()
	}
	key := func(s *Stat) float64 {
		switch sortBy {
		case "p99":
			return s.P99Ms
		case "errors":
			return float64(s.Errors)
		case "queued":
			return s.QueuedMs
		case "total":
			return s.TotalMs
		case "rejected":
			return float64(s.Rejected)
		case "rows":
			return float64(s.Rows)
		case "max":
			return s.MaxMs
		case "mean":
			return s.MeanMs
		case "hedges":
			return float64(s.Hedges)
		}
		return float64(s.Calls)
	}
	slices.SortStableFunc(stats, func(a, b Stat) int {
		if c := cmp.Compare(key(&b), key(&a)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if limit > 0 && len(stats) > limit {
		stats = stats[:limit]
	}
	r.Statements = stats
	return r
}
