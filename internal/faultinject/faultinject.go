// Package faultinject puts a real fault injector (toxiproxy, used as a Go
// library) between the proxy and a Cassandra node on loopback, for tests
// that need a slow, reset or black-holed node. The proxy reaches the
// injector through its address map (--address-map NODE=INJECTOR).
// It listens on loopback only and must never point at anything but the
// test's own nodes.
package faultinject

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Fault is one injector in front of one upstream address.
type Fault struct {
	// Addr is where the injector listens (host:port); dial it instead of
	// the upstream.
	Addr     string
	Upstream string

	proxy *toxiproxy.Proxy
	seq   atomic.Int64
}

// New starts an injector on listen (host:port; port 0 picks one) in front
// of upstream, and stops it when the test ends. It passes traffic through
// untouched until a fault is added.
func New(tb testing.TB, listen, upstream string) *Fault {
	tb.Helper()
	logger := zerolog.Nop()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	name := "fault-" + strings.NewReplacer(":", "-", ".", "-").Replace(upstream)
	p := toxiproxy.NewProxy(srv, name, listen, upstream)
	p.Logger = &logger
	if err := p.Start(); err != nil {
		tb.Fatalf("faultinject: start injector for %s: %v", upstream, err)
	}
	f := &Fault{Addr: p.Listen, Upstream: upstream, proxy: p}
	tb.Cleanup(f.Stop)
	return f
}

// Stop closes the injector and every connection through it.
func (f *Fault) Stop() { f.proxy.Stop() }

// add adds a toxic given its type and attributes (toxiproxy's JSON API).
func (f *Fault) add(kind, stream string, attrs string) (string, error) {
	name := fmt.Sprintf("%s_%s_%d", kind, stream, f.seq.Add(1))
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, kind, stream, attrs)
	if _, err := f.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return "", fmt.Errorf("faultinject: add %s toxic: %w", kind, err)
	}
	return name, nil
}

// Latency delays every chunk of data from the node by d (plus up to jitter),
// as a slow network path or a slow replica would.
func (f *Fault) Latency(d, jitter time.Duration) error {
	_, err := f.add("latency", "downstream", fmt.Sprintf(`"latency":%d,"jitter":%d`, d.Milliseconds(), jitter.Milliseconds()))
	return err
}

// Blackhole stops all data in both directions while keeping the
// connections open: a node that hangs without closing anything.
func (f *Fault) Blackhole() error {
	for _, dir := range []string{"upstream", "downstream"} {
		if _, err := f.add("timeout", dir, `"timeout":0`); err != nil {
			return err
		}
	}
	return nil
}

// Reset makes every connection, current and new, end with a TCP reset as
// soon as data arrives.
func (f *Fault) Reset() error {
	_, err := f.add("reset_peer", "upstream", `"timeout":0`)
	return err
}

// Clear removes every fault: data flows normally again.
func (f *Fault) Clear() {
	f.proxy.Toxics.ResetToxics(context.Background())
}
