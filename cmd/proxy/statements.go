package main

// cqlgate statements: the statement statistics of a running proxy as a
// terminal table, like pg_stat_statements viewed with psql.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/cqlgate/cqlgate/pkg/rules"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// runStatements runs "cqlgate statements" with args (after the word) and
// returns the exit code.
func runStatements(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cqlgate statements", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "http://127.0.0.1:9180", "the proxy's admin address (--admin-listen), as a URL or HOST:PORT")
	sortBy := fs.String("sort", "total", "order, highest first: "+strings.Join(stmtstats.Sorts, ", "))
	limit := fs.Int("limit", 20, "statements shown (0: all)")
	watch := fs.Duration("watch", 0, "refresh every interval (e.g. 2s) until interrupted; 0 shows once")
	width := fs.Int("width", 60, "characters of statement text shown")
	reset := fs.Bool("reset", false, "reset the statistics (POST /statements/reset) and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: cqlgate statements [--admin URL] [--sort KEY] [--limit N] [--watch 2s] [--reset]")
		fmt.Fprintln(stderr, "Shows the statement statistics of a running cqlgate (GET /statements on its admin address).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	base := *admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	base = strings.TrimRight(base, "/")
	client := &http.Client{Timeout: 10 * time.Second}
	if *reset {
		resp, err := client.Post(base+"/statements/reset", "", nil)
		if err != nil {
			fmt.Fprintf(stderr, "cqlgate statements: %v\n", err)
			return exitRuntime
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintf(stderr, "cqlgate statements: reset: %s\n", resp.Status)
			return exitRuntime
		}
		fmt.Fprintln(stdout, "statement statistics reset")
		return exitOK
	}
	for {
		r, err := fetchStatements(ctx, client, base, *sortBy, *limit)
		if err != nil {
			fmt.Fprintf(stderr, "cqlgate statements: %v\n", err)
			if *watch == 0 {
				return exitRuntime
			}
		} else {
			if *watch > 0 {
				fmt.Fprint(stdout, "\033[H\033[2J") // clear the screen
			}
			printStatements(stdout, r, *width)
		}
		if *watch <= 0 {
			return exitOK
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-time.After(*watch):
		}
	}
}

// report is GET /statements: the statements and the rules' state.
type report struct {
	stmtstats.Report
	Rules []rules.Stat `json:"rules"`
}

func fetchStatements(ctx context.Context, client *http.Client, base, sortBy string, limit int) (report, error) {
	var r report
	u := fmt.Sprintf("%s/statements?sort=%s&limit=%d", base, url.QueryEscape(sortBy), limit)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return r, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return r, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("GET %s: %w", u, err)
	}
	return r, nil
}

// printStatements writes the report as a psql-like table.
func printStatements(w io.Writer, r report, width int) {
	fmt.Fprintf(w, "%d statements (at most %d, %d evicted) since %s, by %s\n\n",
		r.Entries, r.MaxEntries, r.Evictions, r.Since.Local().Format(time.DateTime), r.Sort)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, " calls\t errors\t rejected\t rows\t mean ms\t p50 ms\t p99 ms\t max ms\t queued ms\t hedges/won\t table\t id\t statement\t")
	fmt.Fprintln(tw, "------\t-------\t---------\t-----\t--------\t-------\t-------\t-------\t----------\t-----------\t------\t---\t----------\t")
	for _, s := range r.Statements {
		id := s.ID
		if len(id) > 8 {
			id = id[:8]
		}
		fmt.Fprintf(tw, "%d\t %d\t %d\t %d\t %.2f\t %.2f\t %.2f\t %.2f\t %.1f\t %d/%d\t %s\t %s\t %s\t\n",
			s.Calls, s.Errors, s.Rejected, s.Rows, s.MeanMs, s.P50Ms, s.P99Ms, s.MaxMs, s.QueuedMs,
			s.Hedges, s.HedgeWins, tableOf(s), id, clip(s.Text, width))
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d rows)\n", len(r.Statements))
	if len(r.Rules) > 0 {
		printRules(w, r.Rules)
	}
}

// printRules writes the rules' state (--rules-file) below the statements.
func printRules(w io.Writer, rs []rules.Stat) {
	fmt.Fprintf(w, "\nrules\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, " in flight\t limit\t queued\t queue\t max wait ms\t admitted\t waited\t rejected\t full\t timeout\t rule\t matches\t")
	fmt.Fprintln(tw, "----------\t------\t-------\t------\t------------\t---------\t-------\t---------\t-----\t--------\t-----\t--------\t")
	for _, s := range rs {
		fmt.Fprintf(tw, "%d\t %d\t %d\t %d\t %.0f\t %d\t %d\t %d\t %d\t %d\t %s\t %s\t\n",
			s.InFlight, s.Limit, s.Queued, s.QueueLength, s.MaxQueueWaitMs, s.Admitted, s.Waited,
			s.Rejected, s.RejectedQueueFull, s.RejectedQueueTimeout, s.Name, s.Match)
	}
	tw.Flush()
}

func tableOf(s stmtstats.Stat) string {
	if s.Table == "" {
		return s.Keyspace
	}
	return s.Keyspace + "." + s.Table
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
