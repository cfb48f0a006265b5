package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cpuMetric is the standard Prometheus process collector's counter.
const cpuMetric = "process_cpu_seconds_total"

// promCPU reads a process's CPU time from its Prometheus endpoint.
type promCPU struct {
	url    string
	client *http.Client
}

func newPromCPU(url string) promCPU {
	// A short timeout: the scrape sits between two measured rounds, and a
	// hung endpoint must not stall the benchmark.
	return promCPU{url: url, client: &http.Client{Timeout: 5 * time.Second}}
}

func (p promCPU) String() string { return p.url }

func (p promCPU) CPU(ctx context.Context) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	// Ask for the text format explicitly; the line parser below reads
	// nothing else.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: status %s", p.url, resp.Status)
	}
	secs, err := parseMetric(resp.Body, cpuMetric)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", p.url, err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// parseMetric returns the value of the first sample of metric name in a
// Prometheus text exposition: a line "name value [timestamp]" or
// "name{labels} value [timestamp]". Comments and other metrics are skipped.
func parseMetric(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" {
			continue
		}
		switch rest[0] {
		case ' ', '\t':
		case '{':
			// Label values may hold spaces but not an unescaped '}'.
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return 0, fmt.Errorf("malformed sample %q", line)
			}
			rest = rest[end+1:]
		default:
			continue // a longer name with the same prefix
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("sample %q: %w", line, err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	return 0, fmt.Errorf("no %s sample", name)
}
