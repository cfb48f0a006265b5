package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// fleetProxy is one cmd/proxy process of a fleet run, on addresses of its
// own (BenchmarkFleet's CQLGATE_FLEET_HOST).
type fleetProxy struct {
	Addr, Admin string
	cmd         *exec.Cmd
	done        chan struct{}
	log         *os.File
}

// buildCqlgate builds ./cmd/proxy once into dir.
func buildCqlgate(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "cqlgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/proxy").CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/proxy: %v: %s", err, out)
	}
	return bin
}

// freeAddrsOn returns n distinct host:port addresses, each free just now
// on host. The listeners stay open until all n are taken: a port closed at
// once could be handed out again by the next pick, and two proxies of one
// fleet then raced for it ("bind: address already in use").
func freeAddrsOn(tb testing.TB, host string, n int) []string {
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			tb.Fatalf("listen on %s: %v", host, err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// startFleetProxies starts n proxies at once, each with args after its own
// --listen and --admin-listen, logging to dir, and waits until every one
// is ready. The caller stops them with stopFleetProxies.
func startFleetProxies(tb testing.TB, bin, dir, host string, n int, args []string) []*fleetProxy {
	tb.Helper()
	ps := make([]*fleetProxy, n)
	addrs := freeAddrsOn(tb, host, 2*n)
	for i := range ps {
		p := &fleetProxy{Addr: addrs[2*i], Admin: addrs[2*i+1], done: make(chan struct{})}
		p.cmd = exec.Command(bin, append([]string{"--listen", p.Addr, "--admin-listen", p.Admin}, args...)...)
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cqlgate-%d.log", i)))
		if err != nil {
			tb.Fatal(err)
		}
		p.log = f
		p.cmd.Stdout, p.cmd.Stderr = f, f
		if err := p.cmd.Start(); err != nil {
			stopFleetProxies(ps[:i])
			tb.Fatalf("start %s: %v", bin, err)
		}
		go func() { _ = p.cmd.Wait(); close(p.done) }()
		ps[i] = p
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, p := range ps {
		for {
			if ready(p) {
				break
			}
			select {
			case <-p.done:
				stopFleetProxies(ps)
				out, _ := os.ReadFile(p.log.Name())
				tb.Fatalf("proxy %d exited: %s", i, out)
			default:
			}
			if time.Now().After(deadline) {
				stopFleetProxies(ps)
				tb.Fatalf("proxy %d not ready after 60s (log %s)", i, p.log.Name())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return ps
}

func ready(p *fleetProxy) bool {
	resp, err := http.Get("http://" + p.Admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stopFleetProxies interrupts every proxy and waits for them (killing one
// that has not exited after 10 s).
func stopFleetProxies(ps []*fleetProxy) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p == nil {
			continue
		}
		wg.Go(func() {
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			p.log.Close()
		})
	}
	wg.Wait()
}

// gauges scrapes every proxy's gauge name and returns each proxy's sum of
// its series; a proxy that does not answer reads 0.
func gauges(ps []*fleetProxy, name string) []float64 {
	return sums(ps, name, func(*dto.Metric) bool { return true })
}

// decisions returns each proxy's count of the fleet law's limit changes
// of one kind (cqlgate_limiter_rate_decisions_total{decision}), over all
// nodes; 0 for a proxy that did not answer.
func decisions(ps []*fleetProxy, decision string) []float64 {
	return sums(ps, "cqlgate_limiter_rate_decisions_total", func(m *dto.Metric) bool {
		for _, l := range m.GetLabel() {
			if l.GetName() == "decision" {
				return l.GetValue() == decision
			}
		}
		return false
	})
}

// sums scrapes every proxy and returns each proxy's sum of the series of
// the gauge or counter name that match; a proxy that does not answer reads
// 0.
func sums(ps []*fleetProxy, name string, match func(*dto.Metric) bool) []float64 {
	v := make([]float64, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			mfs, err := scrape(ctx, "http://"+p.Admin+"/metrics")
			if err != nil {
				return
			}
			for _, mf := range mfs {
				if mf.GetName() != name {
					continue
				}
				for _, m := range mf.GetMetric() {
					if match(m) {
						v[i] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
					}
				}
			}
		})
	}
	wg.Wait()
	return v
}

// proxyArgs are a fleet run's proxy flags for mode, in front of the node
// at node reached through the emulator at emu: the simulator's limiter
// defaults for the queue (10,000 long, 1s max wait, 250ms CoDel target),
// so that its runs compare with these.
func proxyArgs(mode, node, emu string) []string {
	args := []string{"--contact-points", node, "--address-map", node + "=" + emu,
		"--queue-length", "10000", "--queue-max-wait", "1s", "--queue-target", "250ms",
		"--log-level", "warn"}
	switch {
	case mode == "fixed":
		args = append(args, "--limit-mode", "fixed")
	case strings.HasPrefix(mode, "fixed "):
		args = append(args, "--limit-mode", "fixed", "--node-limit", strings.TrimPrefix(mode, "fixed "))
	default:
		args = append(args, "--limit-mode", mode)
	}
	return args
}
