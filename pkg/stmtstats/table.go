package stmtstats

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"weak"

	"github.com/cqlgate/cqlgate/pkg/idempotency"
)

// Kind is how a statement reached the proxy.
type Kind uint8

// Statement kinds.
const (
	KindQuery    Kind = iota + 1 // a QUERY string, keyed by fingerprint
	KindPrepared                 // an EXECUTE, keyed by prepared id
	KindBatch                    // a BATCH, keyed by its type and statements
)

func (k Kind) String() string {
	switch k {
	case KindQuery:
		return "query"
	case KindPrepared:
		return "prepared"
	case KindBatch:
		return "batch"
	}
	return "unknown"
}

// Defaults of Config.
const (
	DefaultMaxEntries   = 5000
	DefaultMaxTextBytes = 1024
	// sampleSize is how many entries are looked at to pick one to evict.
	sampleSize = 16
	// maxCachedText is the longest QUERY text kept in the text cache;
	// longer ones are normalized on every request.
	maxCachedText = 4096
	textShards    = 16
	// maxBatchFingerprints is how many statements of a BATCH are looked at
	// for its text (the proxy passes at most 32).
	maxBatchFingerprints = 32
)

// Info describes a statement when it is first seen.
type Info struct {
	Keyspace, Table string
	Statement       string // SELECT, INSERT, UPDATE, DELETE, BATCH or OTHER
	Idempotent      bool
}

// Config configures a Table.
type Config struct {
	// MaxEntries bounds the statements kept (DefaultMaxEntries if 0).
	MaxEntries int
	// MaxTextBytes truncates the statement texts kept (DefaultMaxTextBytes
	// if 0).
	MaxTextBytes int
	// Classifier classifies statement texts for Info (nil: the default,
	// without overrides).
	Classifier *idempotency.Classifier
}

// Table is the set of statements and their statistics.
type Table struct {
	cfg   Config
	clock func() time.Time

	mu        sync.Mutex
	byID      map[string]*Entry // prepared ids, as raw bytes
	byFP      map[uint64]*Entry // query and batch fingerprints
	list      []*Entry          // every entry, for sampling
	since     time.Time         // creation or last Reset
	evictions atomic.Uint64

	seed  maphash.Seed
	texts [textShards]textShard
}

// textShard caches exact QUERY texts: text -> the statements it is, by
// keyspace (the keyspace the client is in decides unqualified tables).
type textShard struct {
	mu    sync.RWMutex
	m     map[string][]textEntry
	bytes int
}

type textEntry struct {
	keyspace string
	// e is weak: an entry evicted from the table is garbage once the
	// requests that hold it end, though texts of it stay cached, so that
	// the table's memory is bounded by its entries, not by the cache.
	e weak.Pointer[Entry]
}

// New returns an empty Table.
func New(cfg Config) *Table {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.MaxTextBytes <= 0 {
		cfg.MaxTextBytes = DefaultMaxTextBytes
	}
	if cfg.Classifier == nil {
		cfg.Classifier = idempotency.NewClassifier(idempotency.Overrides{})
	}
	t := &Table{
		cfg:   cfg,
		clock: time.Now,
		byID:  map[string]*Entry{},
		byFP:  map[uint64]*Entry{},
		seed:  maphash.MakeSeed(),
	}
	t.since = t.clock()
	for i := range t.texts {
		t.texts[i].m = map[string][]textEntry{}
	}
	return t
}

// MaxEntries is the bound on entries.
func (t *Table) MaxEntries() int { return t.cfg.MaxEntries }

// Evictions is the number of entries evicted to make room since the last
// Reset.
func (t *Table) Evictions() uint64 { return t.evictions.Load() }

// Len is the number of entries.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.list)
}

// textBudget is the bytes one cache shard may hold: its texts, each
// charged textOverhead more.
func (t *Table) textBudget() int { return t.cfg.MaxEntries * 1024 / textShards }

// textOverhead is what a cached text costs beyond its bytes: its map slot
// (key and value headers, at the map's load), its one-element entry slice,
// and the rounding of both allocations to Go's size classes.
// TestCarelessQueriesFold measures the whole cache against the budget.
const textOverhead = 192

// Query returns the entry of a QUERY string run in keyspace (the client's
// current one), creating it if needed. A repeated text costs a hash and a
// read-locked map lookup.
func (t *Table) Query(q []byte, keyspace string) *Entry {
	if len(q) > maxCachedText {
		return t.byFingerprint(string(q), keyspace)
	}
	sh := &t.texts[maphash.Bytes(t.seed, q)%textShards]
	sh.mu.RLock()
	for _, te := range sh.m[string(q)] {
		if te.keyspace == keyspace {
			if e := te.e.Value(); e != nil && !e.Evicted() {
				sh.mu.RUnlock()
				return e
			}
		}
	}
	sh.mu.RUnlock()
	text := string(q)
	e := t.byFingerprint(text, keyspace)
	sh.mu.Lock()
	if sh.bytes+len(text)+textOverhead > t.textBudget() {
		clear(sh.m) // a flood of distinct texts: start over
		sh.bytes = 0
	}
	list := sh.m[text]
	for i, te := range list {
		if te.keyspace == keyspace {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		sh.bytes += len(text) + textOverhead
	}
	sh.m[text] = append(list, textEntry{keyspace: keyspace, e: weak.Make(e)})
	sh.mu.Unlock()
	return e
}

// fingerprint normalizes q and hashes it with the keyspace the statement
// works in.
func (t *Table) fingerprint(q, keyspace string) (fp uint64, norm string, info Info) {
	n, _ := idempotency.Normalize(make([]byte, 0, len(q)), q)
	cs := t.cfg.Classifier.Classify(q, keyspace, nil)
	info = infoOf(cs)
	h := fnv.New64a()
	h.Write([]byte{byte(KindQuery)})
	h.Write([]byte(info.Keyspace))
	h.Write([]byte{0})
	h.Write(n)
	return h.Sum64(), string(n), info
}

func infoOf(cs idempotency.Statement) Info {
	kind := "OTHER"
	switch cs.Kind {
	case idempotency.KindSelect:
		kind = "SELECT"
	case idempotency.KindInsert:
		kind = "INSERT"
	case idempotency.KindUpdate:
		kind = "UPDATE"
	case idempotency.KindDelete:
		kind = "DELETE"
	case idempotency.KindBatch:
		kind = "BATCH"
	}
	return Info{Keyspace: cs.Keyspace, Table: cs.Table, Statement: kind, Idempotent: cs.Idempotent}
}

func (t *Table) byFingerprint(q, keyspace string) *Entry {
	fp, norm, info := t.fingerprint(q, keyspace)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byFP[fp]; e != nil {
		return e
	}
	e := t.newEntryLocked(KindQuery, fpID(fp), norm, info)
	e.fp = fp
	t.byFP[fp] = e
	return e
}

func fpID(fp uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], fp)
	return hex.EncodeToString(b[:])
}

// Prepared returns the entry of the prepared statement id, creating it if
// needed with the text and keyspace describe returns (describe may be nil
// or return an empty text: the statement was prepared before the proxy saw
// it). Callers should cache the result with the statement and look it up
// again once it is Evicted.
func (t *Table) Prepared(id []byte, describe func() (query, keyspace string)) *Entry {
	t.mu.Lock()
	if e := t.byID[string(id)]; e != nil {
		t.mu.Unlock()
		return e
	}
	t.mu.Unlock()
	var query, keyspace string
	if describe != nil {
		query, keyspace = describe()
	}
	info := Info{Keyspace: keyspace, Statement: "OTHER"}
	if query != "" {
		info = infoOf(t.cfg.Classifier.Classify(query, keyspace, nil))
	} else {
		query = "(prepared before the proxy saw it)"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[string(id)]; e != nil {
		return e
	}
	e := t.newEntryLocked(KindPrepared, hex.EncodeToString(id), query, info)
	e.pid = string(id)
	t.byID[e.pid] = e
	return e
}

// BatchChild is one statement of a BATCH, for Batch: a prepared id or a
// query string.
type BatchChild struct {
	ID    []byte
	Query []byte
}

// Batch returns the entry of a BATCH of type typ (the protocol's number)
// run in keyspace with the given statements, creating it if needed. Query
// children are fingerprinted through the text cache. A run of one statement
// repeated (an application writing N rows in one batch) counts once, so
// that batches of 2 or 30 such statements are one entry, whose text shows
// the run as "...".
func (t *Table) Batch(typ byte, keyspace string, children []BatchChild, describe func(id []byte) string) *Entry {
	h := fnv.New64a()
	h.Write([]byte{byte(KindBatch), typ})
	var fps [maxBatchFingerprints]uint64
	var repeat [maxBatchFingerprints]bool // child i repeats child i-1
	inRun := false
	var prevFP uint64
	for i, c := range children {
		var fp uint64
		if c.ID == nil {
			fp = t.Query(c.Query, keyspace).fp
		}
		same := i > 0 && (c.ID == nil) == (children[i-1].ID == nil) &&
			(c.ID != nil && bytes.Equal(c.ID, children[i-1].ID) || c.ID == nil && fp == prevFP)
		prevFP = fp
		if i < len(fps) {
			fps[i], repeat[i] = fp, same
		}
		if same {
			if !inRun {
				h.Write([]byte{2})
				inRun = true
			}
			continue
		}
		inRun = false
		if c.ID != nil {
			h.Write([]byte{1})
			h.Write(c.ID)
		} else {
			var b [9]byte
			binary.BigEndian.PutUint64(b[1:], fp)
			h.Write(b[:])
		}
	}
	key := h.Sum64()
	t.mu.Lock()
	if e := t.byFP[key]; e != nil {
		t.mu.Unlock()
		return e
	}
	t.mu.Unlock()
	var sb strings.Builder
	sb.WriteString([]string{"BEGIN BATCH", "BEGIN UNLOGGED BATCH", "BEGIN COUNTER BATCH"}[min(int(typ), 2)])
	info := Info{Statement: "BATCH", Idempotent: typ != 2}
	for i, c := range children {
		if sb.Len() > t.cfg.MaxTextBytes {
			break
		}
		if i < len(repeat) && repeat[i] {
			if !repeat[i-1] {
				sb.WriteString(" ...")
			}
			continue
		}
		var text string
		var ci Info
		if c.ID != nil {
			if describe != nil {
				text = describe(c.ID)
			}
			if text == "" {
				text = "EXECUTE " + hex.EncodeToString(c.ID)
			} else {
				ci = infoOf(t.cfg.Classifier.Classify(text, keyspace, nil))
			}
		} else {
			t.mu.Lock()
			e := t.byFP[fps[min(i, len(fps)-1)]]
			t.mu.Unlock()
			if e != nil {
				text, ci = e.text, Info{Keyspace: e.keyspace, Table: e.table, Idempotent: e.idempotent}
			}
		}
		if i == 0 {
			info.Keyspace, info.Table = ci.Keyspace, ci.Table
		} else if info.Keyspace != ci.Keyspace || info.Table != ci.Table {
			info.Keyspace, info.Table = "", ""
		}
		info.Idempotent = info.Idempotent && ci.Idempotent
		sb.WriteString(" ")
		sb.WriteString(text)
		sb.WriteString(";")
	}
	sb.WriteString(" APPLY BATCH")
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byFP[key]; e != nil {
		return e
	}
	e := t.newEntryLocked(KindBatch, fpID(key), sb.String(), info)
	e.fp = key
	t.byFP[key] = e
	return e
}

// newEntryLocked adds an entry, evicting the least used of a sample first
// when the table is full. t.mu is held.
func (t *Table) newEntryLocked(kind Kind, id, text string, info Info) *Entry {
	for len(t.list) >= t.cfg.MaxEntries {
		t.evictLocked()
	}
	e := &Entry{
		id:         id,
		kind:       kind,
		text:       truncate(text, t.cfg.MaxTextBytes),
		keyspace:   info.Keyspace,
		table:      info.Table,
		statement:  info.Statement,
		idempotent: info.Idempotent,
		first:      t.clock().UnixNano(),
		idx:        len(t.list),
	}
	t.list = append(t.list, e)
	return e
}

func (t *Table) evictLocked() {
	var victim *Entry
	var least uint64
	n := len(t.list)
	for i := 0; i < min(sampleSize, n); i++ {
		e := t.list[rand.IntN(n)]
		e.mu.Lock()
		calls := e.calls + e.rejected
		e.mu.Unlock()
		if victim == nil || calls < least {
			victim, least = e, calls
		}
	}
	t.removeLocked(victim)
	t.evictions.Add(1)
}

func (t *Table) removeLocked(e *Entry) {
	e.evicted.Store(true)
	last := t.list[len(t.list)-1]
	t.list[e.idx] = last
	last.idx = e.idx
	t.list = t.list[:len(t.list)-1]
	switch e.kind {
	case KindPrepared:
		delete(t.byID, e.pid)
	default:
		delete(t.byFP, e.fp)
	}
}

// Reset forgets every statement and the eviction count.
func (t *Table) Reset() {
	t.mu.Lock()
	for _, e := range t.list {
		e.evicted.Store(true)
	}
	t.list = nil
	t.byID = map[string]*Entry{}
	t.byFP = map[uint64]*Entry{}
	t.since = t.clock()
	t.evictions.Store(0)
	t.mu.Unlock()
	for i := range t.texts {
		sh := &t.texts[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.bytes = 0
		sh.mu.Unlock()
	}
}

// truncate cuts s to at most n bytes at a character boundary, marking the
// cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return strings.Clone(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
