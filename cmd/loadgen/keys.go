package main

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// keyGen draws the keys of one worker's requests. It is used by one
// goroutine; a distribution that needs shared state (sequential) holds a
// pointer to it.
type keyGen interface {
	Next() int64
}

// keySource builds per-worker key generators of one distribution over
// [0, rows). It is shared by all workers and safe for concurrent use.
type keySource struct {
	dist  string
	rows  int64
	zipfS float64
	// next is the sequential distribution's shared cursor: workers take
	// consecutive keys, so a run writes or reads 0, 1, 2, ... in order,
	// whatever the number of workers.
	next *atomic.Int64
}

func newKeySource(dist string, rows int64, zipfS float64) (keySource, error) {
	switch dist {
	case keysUniform, keysSequential:
	case keysZipf:
		if !(zipfS > 1) {
			return keySource{}, fmt.Errorf("--zipf-s %v must be above 1", zipfS)
		}
	default:
		return keySource{}, fmt.Errorf("unknown --keys %q (want uniform, sequential or zipf)", dist)
	}
	if rows <= 0 {
		return keySource{}, fmt.Errorf("--rows must be positive")
	}
	return keySource{dist: dist, rows: rows, zipfS: zipfS, next: new(atomic.Int64)}, nil
}

// forWorker returns the generator of one worker, drawing from rng.
func (s keySource) forWorker(rng *rand.Rand) keyGen {
	switch s.dist {
	case keysSequential:
		return sequentialKeys{next: s.next, rows: s.rows}
	case keysZipf:
		// Key 0 is the hottest. Cassandra hashes partition keys onto its
		// ring, so hot keys are not neighbours on disk or in tokens.
		return zipfKeys{rand.NewZipf(rng, s.zipfS, 1, uint64(s.rows-1))}
	}
	return uniformKeys{rng: rng, rows: s.rows}
}

type uniformKeys struct {
	rng  *rand.Rand
	rows int64
}

func (u uniformKeys) Next() int64 { return u.rng.Int64N(u.rows) }

type sequentialKeys struct {
	next *atomic.Int64
	rows int64
}

func (s sequentialKeys) Next() int64 { return (s.next.Add(1) - 1) % s.rows }

type zipfKeys struct{ z *rand.Zipf }

func (z zipfKeys) Next() int64 { return int64(z.z.Uint64()) }
