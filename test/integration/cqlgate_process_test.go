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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// cqlgateProcess is cmd/proxy run as a process of its own, as in
// production, where the proxy's goroutines do not share a Go scheduler with
// the application's.
type cqlgateProcess struct {
	Addr     string
	Gatherer prometheus.Gatherer // scrapes its /metrics
	cmd      *exec.Cmd
}

// startCqlgate builds ./cmd/proxy and runs it in front of
// contactPoints with args added to --listen, --admin-listen and
// --contact-points; it is stopped (SIGTERM, then killed) when tb ends.
func startCqlgate(tb testing.TB, contactPoints []string, args ...string) *cqlgateProcess {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "cqlgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/proxy").CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/proxy: %v: %s", err, out)
	}
	addr, admin := freeLoopbackAddr(tb), freeLoopbackAddr(tb)
	cmd := exec.Command(bin, append([]string{"--listen", addr, "--admin-listen", admin,
		"--contact-points", strings.Join(contactPoints, ",")}, args...)...)
	logf, err := os.Create(filepath.Join(tb.TempDir(), "cqlgate.log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	})
	url := "http://" + admin + "/readyz"
	waitFor(tb, 30*time.Second, "the proxy process to be ready", func() (bool, string) {
		select {
		case <-done:
			out, _ := os.ReadFile(logf.Name())
			tb.Fatalf("the proxy process exited: %s", out)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "GET /readyz: " + resp.Status
	})
	return &cqlgateProcess{Addr: addr, cmd: cmd, Gatherer: prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return scrape(context.Background(), "http://"+admin+"/metrics")
	})}
}

// Pid is the process id, for pinning it to CPUs.
func (p *cqlgateProcess) Pid() int { return p.cmd.Process.Pid }

func scrape(ctx context.Context, url string) ([]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	return out, nil
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port free just now.
func freeLoopbackAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
