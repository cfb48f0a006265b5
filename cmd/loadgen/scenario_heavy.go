package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/gocql/gocql"

	"github.com/cqlgate/cqlgate/internal/loadgen/errclass"
	"github.com/cqlgate/cqlgate/internal/loadgen/stepstats"
)

// The heavy scenario is a mixed workload of single-partition reads and
// writes of table kv plus, on workers of their own, one deliberately heavy
// statement: a SELECT of --heavy-keys partitions with one IN, which makes
// one coordinator read them all. It reports each statement apart: the
// requests sent and their errors over the whole run (warm-up included, so
// that they can be compared with the proxy's statement statistics exactly),
// and latency percentiles over the measured window. It is what
// scripts/rules-demo.sh runs to show a rule (--rules-file) isolating the
// heavy statement.

// selectKVIn is the heavy statement: the values of many partitions.
const selectKVIn = `SELECT k, v FROM kv WHERE k IN ?`

// Statement names in the heavy scenario's report, in its order.
var heavyStatements = []struct{ name, text string }{
	{"read", selectKV},
	{"write", insertKV},
	{"heavy", selectKVIn},
}

// heavyReport is the JSON of the heavy scenario.
type heavyReport struct {
	Command    string            `json:"command"` // "heavy"
	Settings   heavySettings     `json:"settings"`
	Statements []heavyStatement  `json:"statements"` // read, write, heavy
	Samples    map[string]string `json:"error_samples"`
}

type heavySettings struct {
	Workers      int      `json:"workers"`
	HeavyWorkers int      `json:"heavy_workers"`
	HeavyKeys    int      `json:"heavy_keys"`
	ReadRatio    float64  `json:"read_ratio"`
	Rows         int64    `json:"rows"`
	ValueSize    int      `json:"value_size"`
	DurationS    float64  `json:"duration_s"`
	WarmupS      float64  `json:"warmup_s"`
	Consistency  string   `json:"consistency"`
	Hosts        []string `json:"hosts"`
	NumCPU       int      `json:"num_cpu"`
}

// heavyStatement is one statement's figures.
type heavyStatement struct {
	Name string `json:"name"`
	Text string `json:"text"`
	// Calls and Errors count every request sent and every failed one, over
	// the warm-up and the measured window.
	Calls        int64           `json:"calls"`
	Errors       int64           `json:"errors"`
	ErrorsByKind errclass.Counts `json:"errors_by_kind"`
	// Measured: the requests that started in the measured window; Latency
	// is that of the successful ones, in µs.
	Measured   int64             `json:"measured"`
	Throughput float64           `json:"ops_per_s"` // successful measured requests per second
	Latency    stepstats.Latency `json:"latency_us"`
}

// heavyTally is one worker's counts of one statement.
type heavyTally struct {
	calls, measured int64
	errs            errclass.Counts
	hist            *hdrhistogram.Histogram
	sample          string
}

func runHeavy(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	if cfg.Setup {
		if err := runSetup(ctx, cfg, stderr); err != nil {
			return false, err
		}
	}
	ep := Endpoint{Name: "heavy", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	n := cfg.Workers + cfg.HeavyWorkers
	tallies := make([][]heavyTally, n)
	var wg sync.WaitGroup
	for id := range n {
		t := make([]heavyTally, len(heavyStatements))
		for i := range t {
			t[i].hist = stepstats.NewHistogram()
		}
		tallies[id] = t
		wg.Go(func() {
			heavyWorker(ctx, s, cfg, id, id >= cfg.Workers, measureFrom, end, t)
		})
	}
	if !cfg.Quiet {
		fmt.Fprintf(stderr, "loadgen: heavy: %d workers, %d heavy workers (IN of %d keys), %s warm-up, %s measured\n",
			cfg.Workers, cfg.HeavyWorkers, cfg.HeavyKeys, cfg.Warmup, cfg.Duration)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false, fmt.Errorf("interrupted: %w", ctx.Err())
	}

	cl := cfg.Consistency
	rep := heavyReport{
		Command: cmdHeavy,
		Settings: heavySettings{
			Workers: cfg.Workers, HeavyWorkers: cfg.HeavyWorkers, HeavyKeys: cfg.HeavyKeys, ReadRatio: cfg.ReadRatio,
			Rows: cfg.Rows, ValueSize: cfg.ValueSize, DurationS: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(),
			Consistency: cl, Hosts: cfg.Hosts, NumCPU: runtime.NumCPU(),
		},
		Samples: map[string]string{},
	}
	for i, st := range heavyStatements {
		hs := heavyStatement{Name: st.name, Text: st.text}
		hist := stepstats.NewHistogram()
		for _, t := range tallies {
			hs.Calls += t[i].calls
			hs.Measured += t[i].measured
			hs.ErrorsByKind.Add(&t[i].errs)
			hist.Merge(t[i].hist)
			if t[i].sample != "" {
				rep.Samples[st.name] = t[i].sample
			}
		}
		hs.Errors = hs.ErrorsByKind.Total()
		hs.Latency = stepstats.LatencyOf(hist)
		hs.Throughput = stepstats.Goodput(hist.TotalCount(), cfg.Duration)
		errorsSeen = errorsSeen || hs.Errors > 0
		rep.Statements = append(rep.Statements, hs)
	}
	if cfg.JSON {
		return errorsSeen, writeJSON(stdout, rep)
	}
	return errorsSeen, writeHeavyTable(stdout, rep)
}

// heavyWorker sends requests one after another until end (or ctx is done):
// the heavy statement if heavy, else reads and writes of kv.
func heavyWorker(ctx context.Context, s *gocql.Session, cfg *Config, id int, heavy bool, measureFrom, end time.Time, t []heavyTally) {
	rng := rand.New(rand.NewPCG(uint64(id), 0x6865617679))
	value := make([]byte, cfg.ValueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	keys := make([]int64, cfg.HeavyKeys)
	var read []byte
	for ctx.Err() == nil {
		began := time.Now()
		if !began.Before(end) {
			return
		}
		var which int
		var err error
		switch {
		case heavy:
			which = 2
			for i := range keys {
				keys[i] = rng.Int64N(cfg.Rows)
			}
			iter := s.Query(selectKVIn, keys).Iter()
			var k int64
			for iter.Scan(&k, &read) {
			}
			err = iter.Close()
		case rng.Float64() < cfg.ReadRatio:
			which = 0
			err = readKV(ctx, s, rng.Int64N(cfg.Rows), &read)
		default:
			which = 1
			q := s.Query(insertKV, rng.Int64N(cfg.Rows), value)
			err = q.Exec()
			q.Release()
		}
		took := time.Since(began)
		tl := &t[which]
		tl.calls++
		measured := !began.Before(measureFrom)
		if measured {
			tl.measured++
		}
		if err != nil {
			tl.errs[errclass.Classify(err)]++
			if tl.sample == "" {
				tl.sample = err.Error()
			}
			continue
		}
		if measured {
			stepstats.Record(tl.hist, took)
		}
	}
}

func writeHeavyTable(w io.Writer, rep heavyReport) error {
	s := rep.Settings
	fmt.Fprintf(w, "%d workers (%.0f%% reads) and %d heavy workers (IN of %d keys) over %d rows, %.0fs measured after %.0fs\n\n",
		s.Workers, 100*s.ReadRatio, s.HeavyWorkers, s.HeavyKeys, s.Rows, s.DurationS, s.WarmupS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "statement\tcalls\terrors\toverloaded\tops/s\tp50 ms\tp99 ms\tmax ms\t")
	ms := func(us int64) string { return fmt.Sprintf("%.2f", float64(us)/1000) }
	for _, st := range rep.Statements {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t\n", st.Name, st.Calls, st.Errors,
			st.ErrorsByKind[errclass.Overloaded], st.Throughput, ms(st.Latency.P50), ms(st.Latency.P99), ms(st.Latency.Max))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, k := range sortedKeys(rep.Samples) {
		fmt.Fprintf(w, "  %s e.g. %q\n", k, rep.Samples[k])
	}
	return nil
}
