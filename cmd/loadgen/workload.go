package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
)

const (
	workloadRead  = "read"
	workloadWrite = "write"
	workloadMixed = "mixed"
)

func newWorkload(cfg *Config) (driver.Workload, error) {
	keys, err := newKeySource(cfg.KeyDist, cfg.Rows, cfg.ZipfS)
	if err != nil {
		return nil, err
	}
	kv := kvWorkload{keys: keys, valueSize: cfg.ValueSize, name: cfg.Workload, insert: insertKV}
	switch cfg.Workload {
	case workloadRead:
		kv.readRatio = 1
	case workloadWrite:
		kv.readRatio = 0
	case workloadMixed:
		if cfg.ReadRatio < 0 || cfg.ReadRatio > 1 {
			return nil, fmt.Errorf("--read-ratio %v is outside [0, 1]", cfg.ReadRatio)
		}
		kv.readRatio = cfg.ReadRatio
	default:
		return nil, fmt.Errorf("unknown --workload %q (want read, write or mixed)", cfg.Workload)
	}
	return kv, nil
}

// The statements are unqualified: the session's keyspace names the table.
// gocql prepares any statement with bind values and caches it per
// connection, so each of these is a prepared single-partition request.
const (
	selectKV = `SELECT v FROM kv WHERE k = ?`
	insertKV = `INSERT INTO kv (k, v) VALUES (?, ?)`
)

// kvWorkload reads and writes single partitions of table kv with keys drawn
// from keys.
type kvWorkload struct {
	name      string
	keys      keySource
	valueSize int
	readRatio float64 // 1 = reads only, 0 = writes only
	insert    string  // the write statement: insertKV, or another table's
}

func (w kvWorkload) Name() string { return w.name }

func (w kvWorkload) NewWorker(id int) driver.Worker {
	// A seeded source per worker: no lock shared between workers, and a
	// run's key sequence does not depend on scheduling.
	rng := rand.New(rand.NewPCG(uint64(id), 0x636f6c67617465))
	value := make([]byte, w.valueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	return &kvWorker{kvWorkload: w, rng: rng, keys: w.keys.forWorker(rng), value: value}
}

type kvWorker struct {
	kvWorkload
	rng   *rand.Rand
	keys  keyGen
	value []byte // written as is: the content does not matter, its size does
	read  []byte // scan target: gocql appends into its capacity, so reads stop allocating
}

func (w *kvWorker) Do(ctx context.Context, s *gocql.Session) error {
	k := w.keys.Next()
	if w.readRatio >= 1 || (w.readRatio > 0 && w.rng.Float64() < w.readRatio) {
		return readKV(ctx, s, k, &w.read)
	}
	q := s.Query(w.insert, k, w.value)
	err := q.Exec()
	q.Release()
	return err
}

// readKV reads row k of table kv into *v.
//
// The hot-path queries carry no context: gocql's WithContext copies the
// whole Query onto the heap and leaves the pooled original to the garbage
// collector, on every request. The session timeout bounds each request
// instead, and the workers check ctx between requests, so an interrupt
// waits at most one timeout. ctx stays in the signature for workloads
// that need it.
func readKV(_ context.Context, s *gocql.Session, k int64, v *[]byte) error {
	q := s.Query(selectKV, k)
	err := q.Scan(v)
	q.Release()
	if err == gocql.ErrNotFound {
		// A missing row is a correct answer (run without setup, or with
		// more --rows than were loaded), not a failed request.
		return nil
	}
	return err
}
