package main

import (
	"context"
	"errors"
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

// The multiget scenario reproduces the published comparison of four ways
// to fetch a batch of P partitions (100 partitions x 50 rows at RF 3 on 5
// nodes: 187, 72, 189 and 102 ms per batch), in which async single-partition
// reads won: one IN query makes one coordinator fetch every partition and
// assemble the result, while concurrent single-partition queries spread
// over the token-aware connections and overlap.
const (
	methodSequential = "sequential" // one SELECT per partition, one after another
	methodAsync      = "async"      // one SELECT per partition, all at once
	methodIn         = "in"         // SELECT ... WHERE p IN ?
	methodInLimit    = "in_limit"   // SELECT ... WHERE p IN ? LIMIT ?
)

func validMethod(m string) bool {
	switch m {
	case methodSequential, methodAsync, methodIn, methodInLimit:
		return true
	}
	return false
}

// mgTableDDL is the scenario's table; %s is the keyspace.
const mgTableDDL = `CREATE TABLE IF NOT EXISTS %s.mg (p bigint, c int, v blob, PRIMARY KEY (p, c))`

const (
	selectMGOne     = `SELECT c, v FROM mg WHERE p = ?`
	selectMGIn      = `SELECT p, c, v FROM mg WHERE p IN ?`
	selectMGInLimit = `SELECT p, c, v FROM mg WHERE p IN ? LIMIT ?`
)

// multigetReport is the JSON of the multiget scenario.
type multigetReport struct {
	Command  string            `json:"command"` // "multiget"
	Settings multigetSettings  `json:"settings"`
	Methods  []multigetMethod  `json:"methods"` // in --methods order
	Fastest  string            `json:"fastest"` // lowest mean batch time
	Samples  map[string]string `json:"error_samples"`
}

type multigetSettings struct {
	Partitions       int      `json:"partitions"` // per batch
	RowsPerPartition int      `json:"rows_per_partition"`
	TotalPartitions  int64    `json:"total_partitions"`
	Batches          int      `json:"batches"` // per method
	InLimit          int      `json:"in_limit"`
	RF               int      `json:"rf"`
	Replication      string   `json:"replication"`
	Consistency      string   `json:"consistency"`
	ValueSize        int      `json:"value_size"`
	Hosts            []string `json:"hosts"`
	NumCPU           int      `json:"num_cpu"`
}

// multigetMethod is one method's batches.
type multigetMethod struct {
	Name         string            `json:"name"`
	Batches      int64             `json:"batches"` // successful batches
	ErrorsTotal  int64             `json:"errors_total"`
	Errors       errclass.Counts   `json:"errors"`
	RowsPerBatch float64           `json:"rows_per_batch"` // mean rows fetched by a successful batch
	Latency      stepstats.Latency `json:"batch_latency_us"`
	Ratio        float64           `json:"ratio_to_fastest"` // mean batch time / the fastest method's
	Histogram    string            `json:"histogram"`        // HdrHistogram V2 compressed, base64, µs
}

func runMultiget(ctx context.Context, cfg *Config, stdout, stderr io.Writer) (errorsSeen bool, err error) {
	if cfg.Setup {
		if err := setupMultiget(ctx, cfg, stderr); err != nil {
			return false, err
		}
	}
	ep := Endpoint{Name: "multiget", Hosts: cfg.Hosts}
	s, err := ep.Session(sessionOptionsFrom(cfg, cfg.Keyspace, stderr))
	if err != nil {
		return false, err
	}
	defer s.Close()

	limit := cfg.InLimit
	if limit == 0 {
		limit = cfg.Partitions * cfg.RowsPerPartition
	}
	mg := &multigetter{s: s, rowsPerPartition: cfg.RowsPerPartition, limit: limit}
	rng := rand.New(rand.NewPCG(uint64(cfg.Partitions), 0x6d756c7469676574))

	type result struct {
		hist    *hdrhistogram.Histogram
		errs    errclass.Counts
		rows    int64
		samples map[string]string
	}
	results := make(map[string]*result, len(cfg.Methods))
	for _, m := range cfg.Methods {
		results[m] = &result{hist: stepstats.NewHistogram(), samples: map[string]string{}}
	}

	// One unmeasured round prepares every statement and fills the
	// connection pools; --warmup adds more.
	warmEnd := time.Now().Add(cfg.Warmup)
	for first := true; first || time.Now().Before(warmEnd); first = false {
		batch := pickPartitions(rng, cfg.TotalPartitions, cfg.Partitions)
		for _, m := range cfg.Methods {
			if _, err := mg.fetch(ctx, m, batch); err != nil && ctx.Err() != nil {
				return false, fmt.Errorf("interrupted: %w", ctx.Err())
			}
		}
	}

	// Each batch is fetched by every method, in an order rotated from
	// batch to batch, so no method always runs first (cold) or last.
	for b := range cfg.Batches {
		batch := pickPartitions(rng, cfg.TotalPartitions, cfg.Partitions)
		for i := range cfg.Methods {
			m := cfg.Methods[(i+b)%len(cfg.Methods)]
			r := results[m]
			start := time.Now()
			rows, err := mg.fetch(ctx, m, batch)
			took := time.Since(start)
			if ctx.Err() != nil {
				return false, fmt.Errorf("interrupted: %w", ctx.Err())
			}
			if err == nil && rows != mg.expectedRows(m, len(batch)) {
				err = fmt.Errorf("%s fetched %d rows; want %d (was the table loaded with --setup and the same sizes?)",
					m, rows, mg.expectedRows(m, len(batch)))
			}
			if err != nil {
				k := errclass.Classify(err)
				r.errs[k]++
				if r.samples[k.String()] == "" {
					r.samples[k.String()] = err.Error()
				}
				continue
			}
			stepstats.Record(r.hist, took)
			r.rows += int64(rows)
		}
		if !cfg.Quiet && (b+1)%max(1, cfg.Batches/10) == 0 {
			fmt.Fprintf(stderr, "loadgen: multiget %d/%d batches\n", b+1, cfg.Batches)
		}
	}

	rep := multigetReport{
		Command: cmdMultiget,
		Settings: multigetSettings{
			Partitions: cfg.Partitions, RowsPerPartition: cfg.RowsPerPartition, TotalPartitions: cfg.TotalPartitions,
			Batches: cfg.Batches, InLimit: limit, RF: cfg.RF, Replication: cfg.Replication,
			Consistency: cfg.Consistency, ValueSize: cfg.ValueSize, Hosts: cfg.Hosts, NumCPU: runtime.NumCPU(),
		},
		Samples: map[string]string{},
	}
	best := -1.0
	for _, m := range cfg.Methods {
		r := results[m]
		mm := multigetMethod{
			Name: m, Batches: r.hist.TotalCount(), ErrorsTotal: r.errs.Total(), Errors: r.errs,
			Latency: stepstats.LatencyOf(r.hist), Histogram: encode(r.hist),
		}
		if mm.Batches > 0 {
			mm.RowsPerBatch = float64(r.rows) / float64(mm.Batches)
			if best < 0 || mm.Latency.Mean < best {
				best, rep.Fastest = mm.Latency.Mean, m
			}
		}
		for k, v := range r.samples {
			rep.Samples[m+" "+k] = v
		}
		errorsSeen = errorsSeen || mm.ErrorsTotal > 0
		rep.Methods = append(rep.Methods, mm)
	}
	for i := range rep.Methods {
		if best > 0 && rep.Methods[i].Batches > 0 {
			rep.Methods[i].Ratio = rep.Methods[i].Latency.Mean / best
		}
	}
	if cfg.JSON {
		err = writeJSON(stdout, rep)
	} else {
		err = writeMultigetTable(stdout, rep)
	}
	return errorsSeen, err
}

// setupMultiget creates table mg and loads TotalPartitions partitions of
// RowsPerPartition rows.
func setupMultiget(ctx context.Context, cfg *Config, stderr io.Writer) error {
	s, err := schemaSession(cfg, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := createSchema(ctx, s, cfg, mgTableDDL); err != nil {
		return err
	}
	start := time.Now()
	insert := fmt.Sprintf(`INSERT INTO %s.mg (p, c, v) VALUES (?, ?, ?)`, cfg.Keyspace)
	rpp := int64(cfg.RowsPerPartition)
	n := cfg.TotalPartitions * rpp
	err = insertAll(ctx, s, n, cfg.SetupConcurrency, func(i int64) (string, []any) {
		return insert, []any{i / rpp, int(i % rpp), rowValue(i, cfg.ValueSize)}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "loadgen: setup: %d partitions x %d rows of %d bytes in %s.mg loaded in %s\n",
		cfg.TotalPartitions, cfg.RowsPerPartition, cfg.ValueSize, cfg.Keyspace, time.Since(start).Round(time.Millisecond))
	return nil
}

// pickPartitions draws n distinct partitions from [0, total).
func pickPartitions(rng *rand.Rand, total int64, n int) []int64 {
	seen := make(map[int64]bool, n)
	out := make([]int64, 0, n)
	for len(out) < n {
		p := rng.Int64N(total)
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// multigetter fetches batches of partitions of table mg.
type multigetter struct {
	s                *gocql.Session
	rowsPerPartition int
	limit            int
}

func (g *multigetter) expectedRows(method string, partitions int) int {
	rows := partitions * g.rowsPerPartition
	if method == methodInLimit {
		return min(rows, g.limit)
	}
	return rows
}

// fetch reads every row of the batch with method and returns how many
// rows came back.
func (g *multigetter) fetch(ctx context.Context, method string, batch []int64) (int, error) {
	switch method {
	case methodSequential:
		total := 0
		for _, p := range batch {
			n, err := g.scan(ctx, selectMGOne, p)
			if err != nil {
				return total, err
			}
			total += n
		}
		return total, nil
	case methodAsync:
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total int
			errs  []error
		)
		for _, p := range batch {
			wg.Go(func() {
				n, err := g.scan(ctx, selectMGOne, p)
				mu.Lock()
				defer mu.Unlock()
				total += n
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			// The first error names the kind; the count says how many
			// of the batch's queries failed.
			return total, fmt.Errorf("%d of %d queries failed: %w", len(errs), len(batch), errors.Join(errs...))
		}
		return total, nil
	case methodIn:
		return g.scan(ctx, selectMGIn, batch)
	case methodInLimit:
		return g.scan(ctx, selectMGInLimit, batch, g.limit)
	}
	return 0, fmt.Errorf("unknown multiget method %q", method)
}

// scan runs one query and reads every row of every page.
func (g *multigetter) scan(ctx context.Context, stmt string, values ...any) (int, error) {
	iter := g.s.Query(stmt, values...).WithContext(ctx).Iter()
	var (
		n int
		v []byte
		p int64
		c int
	)
	dest := []any{&c, &v}
	if stmt != selectMGOne {
		dest = []any{&p, &c, &v}
	}
	for iter.Scan(dest...) {
		n++
	}
	if err := iter.Close(); err != nil {
		return n, err
	}
	return n, nil
}

func writeMultigetTable(w io.Writer, rep multigetReport) error {
	s := rep.Settings
	repl := fmt.Sprintf("RF %d", s.RF)
	if s.Replication != "" {
		repl = s.Replication
	}
	fmt.Fprintf(w, "batches of %d partitions x %d rows (%d-byte values) out of %d, %s, consistency %s, %d batches per method\n\n",
		s.Partitions, s.RowsPerPartition, s.ValueSize, s.TotalPartitions, repl, orDefault(s.Consistency), s.Batches)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\tms/batch mean\tp50\tp99\tmax\tratio\trows/batch\terrors\t")
	for _, m := range rep.Methods {
		ms := func(us int64) string { return fmt.Sprintf("%.1f", float64(us)/1000) }
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%s\t%.2f\t%.0f\t%d\t\n", m.Name, m.Latency.Mean/1000,
			ms(m.Latency.P50), ms(m.Latency.P99), ms(m.Latency.Max), m.Ratio, m.RowsPerBatch, m.ErrorsTotal)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if rep.Fastest != "" {
		fmt.Fprintf(w, "\nfastest: %s\n", rep.Fastest)
	}
	for _, k := range sortedKeys(rep.Samples) {
		fmt.Fprintf(w, "  %s e.g. %q\n", k, rep.Samples[k])
	}
	return nil
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}
