package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/gocql/gocql"
	"golang.org/x/sync/errgroup"
)

// runSetup creates the keyspace and table and preloads rows 0..Rows-1, so a
// read workload finds every key it asks for.
func runSetup(ctx context.Context, cfg *Config, stderr io.Writer) error {
	ep := Endpoint{Name: "setup", Hosts: cfg.Hosts}
	// The schema session has no keyspace: it may not exist yet.
	opts := sessionOptionsFrom(cfg, "", stderr)
	// Preloaded rows must be readable at ONE from any replica afterwards;
	// QUORUM is the cheapest level that makes that likely for rf > 1.
	opts.Consistency = gocql.Quorum
	s, err := ep.Session(opts)
	if err != nil {
		return err
	}
	defer s.Close()

	if err := createSchema(ctx, s, cfg.Keyspace, cfg.RF); err != nil {
		return err
	}
	start := time.Now()
	if err := preload(ctx, s, cfg); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "loadgen: setup: %d rows of %d bytes in %s.kv loaded in %s\n",
		cfg.Rows, cfg.ValueSize, cfg.Keyspace, time.Since(start).Round(time.Millisecond))
	return nil
}

func createSchema(ctx context.Context, s *gocql.Session, keyspace string, rf int) error {
	// keyspace was checked against keyspaceName, so interpolating it is safe.
	stmts := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`, keyspace, rf),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.kv (k bigint PRIMARY KEY, v blob)`, keyspace),
	}
	for _, stmt := range stmts {
		// gocql waits for schema agreement after each DDL statement.
		if err := execIdempotent(ctx, s, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// preload inserts every row with at most SetupConcurrency requests in
// flight, and stops at the first failure.
func preload(ctx context.Context, s *gocql.Session, cfg *Config) error {
	insert := fmt.Sprintf(`INSERT INTO %s.kv (k, v) VALUES (?, ?)`, cfg.Keyspace)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.SetupConcurrency)
	for k := range cfg.Rows {
		if gctx.Err() != nil {
			break // a request failed; g.Wait returns its error
		}
		g.Go(func() error {
			if err := execIdempotent(gctx, s, insert, k, rowValue(k, cfg.ValueSize)); err != nil {
				return fmt.Errorf("preload row %d: %w", k, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// gctx is cancelled by Wait itself; only the caller's ctx tells an
	// interrupted preload from a finished one.
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("preload interrupted: %w", err)
	}
	return nil
}

// rowValue is the preloaded value of row k: deterministic, so a rerun of
// setup writes the same data, and not constant, so compression cannot
// shrink it to nothing.
func rowValue(k int64, size int) []byte {
	rng := rand.New(rand.NewPCG(uint64(k), 0x7365747570))
	v := make([]byte, size)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// setupAttempts bounds the tries of one setup statement. A node that has
// just started (cold JIT, first flushes, a busy machine) times out a few
// requests, and setup must still finish; run and compare never retry, so
// their numbers stay honest.
const setupAttempts = 5

// execIdempotent runs a statement that is safe to repeat (IF NOT EXISTS,
// an INSERT of a fixed value), retrying transient failures with a growing
// pause.
func execIdempotent(ctx context.Context, s *gocql.Session, stmt string, values ...any) error {
	var err error
	for attempt := 1; attempt <= setupAttempts; attempt++ {
		q := s.Query(stmt, values...).WithContext(ctx)
		err = q.Exec()
		q.Release()
		if err == nil || classifyError(err) == ErrKindOther {
			return err
		}
		if attempt < setupAttempts {
			if serr := sleepCtx(ctx, time.Duration(attempt)*200*time.Millisecond); serr != nil {
				return errors.Join(err, serr)
			}
		}
	}
	return fmt.Errorf("%d attempts: %w", setupAttempts, err)
}
