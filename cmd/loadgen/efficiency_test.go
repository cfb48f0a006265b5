package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/cputime"
)

// BenchmarkGeneratorCPU measures loadgen's own CPU per request, gocql
// included, against a real node: the process's user and system CPU
// (getrusage) over b.N prepared single-row reads by 64 closed-loop
// workers (LOADGEN_BENCH_WORKERS to change), reported as cpu-µs/op, user-µs/op and sys-µs/op. Cassandra's
// CPU is not counted (it is another process); the wall time per op is
// Cassandra's throughput, not loadgen's cost. docs/loadgen.md has the
// figures of this machine.
//
//	CQLGATE_TEST_CASSANDRA_SINGLE=127.0.10.1:9042 go test -run '^$' -bench GeneratorCPU -benchtime 100000x ./cmd/loadgen/
//
// The bare-gocql case runs the same reads from 64 plain goroutines with no
// recording at all: the difference to "read" is loadgen's own cost.
func BenchmarkGeneratorCPU(b *testing.B) {
	for _, workload := range []string{workloadRead, workloadWrite, "bare-gocql"} {
		b.Run(workload, func(b *testing.B) { benchGeneratorCPU(b, workload) })
	}
}

func benchGeneratorCPU(b *testing.B, workload string) {
	bare := workload == "bare-gocql"
	if bare {
		workload = workloadRead
	}
	addr := os.Getenv("CQLGATE_TEST_CASSANDRA_SINGLE")
	if addr == "" {
		b.Skip("set CQLGATE_TEST_CASSANDRA_SINGLE=host:port of a running node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cfg := defaultConfig()
	cfg.Hosts = []string{addr}
	cfg.Keyspace = "loadgen_bench_" + strconv.Itoa(os.Getpid())
	cfg.Rows = 1000
	cfg.Workload = workload
	cfg.Workers = 64
	if n, err := strconv.Atoi(os.Getenv("LOADGEN_BENCH_WORKERS")); err == nil && n > 0 {
		cfg.Workers = n
	}
	cfg.Quiet = true
	if err := runSetup(ctx, cfg, io.Discard); err != nil {
		b.Fatal(err)
	}
	defer func() {
		s, err := schemaSession(cfg, io.Discard)
		if err == nil {
			_ = s.Query("DROP KEYSPACE IF EXISTS " + cfg.Keyspace).Exec()
			s.Close()
		}
	}()
	w, err := newWorkload(cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := (Endpoint{Name: "bench", Hosts: cfg.Hosts}).Session(sessionOptionsFrom(cfg, cfg.Keyspace, io.Discard))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := newDriver(cfg, s, w, "bench", io.Discard)
	// Prepare the statements and fill the pools outside the measurement.
	if _, err := d.Measure(ctx, 500*time.Millisecond, 0, 0); err != nil {
		b.Fatal(err)
	}

	if bare {
		benchBareGocql(b, s, cfg.Workers)
		return
	}
	b.ResetTimer()
	m, err := d.Measure(ctx, 0, 0, int64(b.N))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	f := figuresOf(m)
	if f.ErrorsTotal > 0 {
		b.Logf("%d errors: %v", f.ErrorsTotal, f.ErrorSamples)
	}
	b.ReportMetric(f.LoadgenCPUPerOp, "cpu-µs/op")
	b.ReportMetric(f.LoadgenUserPerOp, "user-µs/op")
	b.ReportMetric(f.LoadgenSysPerOp, "sys-µs/op")
	b.ReportMetric(f.Throughput, "ops/s")
}

// benchBareGocql runs b.N reads of table kv from workers goroutines, with
// nothing but gocql in the loop, and reports the process's CPU per read.
func benchBareGocql(b *testing.B, s *gocql.Session, workers int) {
	var next atomic.Int64
	var failed atomic.Int64
	u0, s0, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for id := range workers {
		wg.Go(func() {
			var v []byte
			for k := int64(id); next.Add(1) <= int64(b.N); k++ {
				if err := readKV(context.Background(), s, k%1000, &v); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	u1, s1, err := cputime.Self()
	if err != nil {
		b.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		b.Logf("%d reads failed", n)
	}
	n := float64(b.N)
	b.ReportMetric(float64((u1-u0+s1-s0).Nanoseconds())/1e3/n, "cpu-µs/op")
	b.ReportMetric(float64((u1-u0).Nanoseconds())/1e3/n, "user-µs/op")
	b.ReportMetric(float64((s1-s0).Nanoseconds())/1e3/n, "sys-µs/op")
	b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
}
