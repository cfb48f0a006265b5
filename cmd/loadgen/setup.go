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

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
)

// runSetup creates the keyspace and table kv and preloads rows 0..Rows-1,
// so a read workload finds every key it asks for.
func runSetup(ctx context.Context, cfg *Config, stderr io.Writer) error {
	s, err := schemaSession(cfg, stderr)
	if err != nil {
		return err
	}
	defer s.Close()

	if err := createSchema(ctx, s, cfg, kvTableDDL); err != nil {
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

// schemaSession connects for DDL and preloading: without a keyspace, which
// may not exist yet, and at QUORUM, so that preloaded rows are readable at
// ONE from any replica afterwards (the cheapest level that makes that
// likely for rf > 1).
func schemaSession(cfg *Config, stderr io.Writer) (*gocql.Session, error) {
	ep := Endpoint{Name: "setup", Hosts: cfg.Hosts}
	opts := sessionOptionsFrom(cfg, "", stderr)
	quorum := gocql.Quorum
	opts.Consistency = &quorum
	if opts.Timeout > 0 && opts.Timeout < 10*time.Second {
		// DDL and a preload on a cold node are slow; a benchmark's short
		// timeout is not meant for them.
		opts.Timeout = 10 * time.Second
	}
	return ep.Session(opts)
}

// kvTableDDL creates the table of the kv workloads; %s is the keyspace.
const kvTableDDL = `CREATE TABLE IF NOT EXISTS %s.kv (k bigint PRIMARY KEY, v blob)`

// createSchema creates the keyspace (replication from --rf or
// --replication) and the tables of ddl, each a statement with one %s for
// the keyspace.
func createSchema(ctx context.Context, s *gocql.Session, cfg *Config, ddl ...string) error {
	repl, err := replicationMap(cfg.Keyspace, cfg.RF, cfg.Replication)
	if err != nil {
		return err
	}
	// The keyspace was checked against keyspaceName and the map built
	// from checked parts, so interpolating them is safe.
	stmts := []string{fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s`, cfg.Keyspace, repl)}
	for _, d := range ddl {
		stmts = append(stmts, fmt.Sprintf(d, cfg.Keyspace))
	}
	for _, stmt := range stmts {
		// gocql waits for schema agreement after each DDL statement.
		if err := execIdempotent(ctx, s, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// preload inserts rows 0..Rows-1 of table kv.
func preload(ctx context.Context, s *gocql.Session, cfg *Config) error {
	insert := fmt.Sprintf(`INSERT INTO %s.kv (k, v) VALUES (?, ?)`, cfg.Keyspace)
	return insertAll(ctx, s, cfg.Rows, cfg.SetupConcurrency, func(k int64) (string, []any) {
		return insert, []any{k, rowValue(k, cfg.ValueSize)}
	})
}

// insertAll runs the statements stmt(0..n-1) with at most concurrency in
// flight, and stops at the first failure.
func insertAll(ctx context.Context, s *gocql.Session, n int64, concurrency int, stmt func(i int64) (string, []any)) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i := range n {
		if gctx.Err() != nil {
			break // a request failed; g.Wait returns its error
		}
		g.Go(func() error {
			q, values := stmt(i)
			if err := execIdempotent(gctx, s, q, values...); err != nil {
				return fmt.Errorf("preload row %d: %w", i, err)
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
		if err == nil || errclass.Classify(err) == errclass.Other {
			return err
		}
		if attempt < setupAttempts {
			if serr := driver.Sleep(ctx, time.Duration(attempt)*200*time.Millisecond); serr != nil {
				return errors.Join(err, serr)
			}
		}
	}
	return fmt.Errorf("%d attempts: %w", setupAttempts, err)
}
