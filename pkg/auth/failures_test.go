package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cqlgate/cqlgate/pkg/frame"
)

// A source address past its failed-login burst is refused without a check
// at Cassandra; it gets a check again as tokens come back, other addresses
// are not affected, and credentials already verified pass from it all the
// time: a flood of wrong passwords does not lock out the application that
// shares its address.
func TestFailedLoginsLimitedPerAddress(t *testing.T) {
	ck := &checker{pass: "pw"}
	clk := &clock{now: time.Unix(1_000_000, 0)}
	p, _ := newTest(t, Config{Checker: ck, CacheTTL: time.Hour, FailuresPerSecond: 1, FailureBurst: 3, Now: clk.Now})
	ctx := context.Background()
	if err := p.LoginFrom(ctx, token("app", "pw"), "10.0.0.1"); err != nil {
		t.Fatalf("first right login: %v", err)
	}
	for i := range 3 {
		if err := p.LoginFrom(ctx, token("app", "wrong"), "10.0.0.1"); err == nil || strings.Contains(err.Message, "too many") {
			t.Fatalf("failure %d within the burst: %v; want Cassandra's refusal", i, err)
		}
	}
	checks := ck.calls.Load()
	err := p.LoginFrom(ctx, token("app", "wrong"), "10.0.0.1")
	if err == nil || err.Code != frame.ErrCodeBadCredentials || !strings.Contains(err.Message, "too many failed logins") {
		t.Fatalf("past the burst: %v; want the rate-limit refusal", err)
	}
	if got := ck.calls.Load(); got != checks {
		t.Errorf("%d checks at Cassandra past the burst; want none", got-checks)
	}
	if err := p.LoginFrom(ctx, token("app", "pw"), "10.0.0.1"); err != nil {
		t.Errorf("cached right credentials from the limited address: %v; want success", err)
	}
	if err := p.LoginFrom(ctx, token("other", "wrong"), "10.0.0.2"); err == nil || strings.Contains(err.Message, "too many") {
		t.Errorf("another address: %v; want Cassandra's refusal", err)
	}
	clk.Add(1100 * time.Millisecond)
	if err := p.LoginFrom(ctx, token("app", "wrong"), "10.0.0.1"); err == nil || strings.Contains(err.Message, "too many") {
		t.Errorf("a second later: %v; want a check again", err)
	}
	if got := value(p.metrics.logins.WithLabelValues(resultRateLimited)); got != 1 {
		t.Errorf("rate_limited logins = %v, want 1", got)
	}
}

func TestFailureLimiterBounded(t *testing.T) {
	clk := &clock{now: time.Unix(1_000_000, 0)}
	l := newFailureLimiter(1, 2, clk.Now)
	for i := range maxFailureSources + 100 {
		l.fail(strings.Repeat("x", i%7) + string(rune(i)))
	}
	if n := len(l.buckets); n > maxFailureSources {
		t.Errorf("%d addresses tracked; want at most %d", n, maxFailureSources)
	}
	unlimited := newFailureLimiter(0, 5, clk.Now)
	for range 10 {
		unlimited.fail("a")
	}
	if !unlimited.allow("a") {
		t.Error("rate 0 must mean no limit")
	}
}

// FailedRecently reports the addresses Cassandra refused a login from
// within RecentFailureWindow, with the failure limit on or off (0), not
// those of successes nor other addresses.
func TestFailedRecently(t *testing.T) {
	for _, rate := range []float64{1, 0} {
		ck := &checker{pass: "pw"}
		clk := &clock{now: time.Unix(1_000_000, 0)}
		p, _ := newTest(t, Config{Checker: ck, FailuresPerSecond: rate, FailureBurst: 3, Now: clk.Now})
		ctx := context.Background()
		if err := p.LoginFrom(ctx, token("app", "pw"), "10.0.0.1"); err != nil || p.FailedRecently("10.0.0.1") {
			t.Fatalf("rate %v: a right login: %v, failed recently %v", rate, err, p.FailedRecently("10.0.0.1"))
		}
		if err := p.LoginFrom(ctx, token("app", "wrong"), "10.0.0.1"); err == nil {
			t.Fatalf("rate %v: a wrong password passed", rate)
		}
		if !p.FailedRecently("10.0.0.1") || p.FailedRecently("10.0.0.2") {
			t.Errorf("rate %v: failed recently: %v for the address that failed, %v for another; want true, false",
				rate, p.FailedRecently("10.0.0.1"), p.FailedRecently("10.0.0.2"))
		}
		clk.Add(RecentFailureWindow - time.Second)
		if !p.FailedRecently("10.0.0.1") {
			t.Errorf("rate %v: forgotten within the window", rate)
		}
		clk.Add(2 * time.Second)
		if p.FailedRecently("10.0.0.1") {
			t.Errorf("rate %v: still reported after the window", rate)
		}
	}
}
