package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// checker accepts one password and counts the checks; gate, when not nil,
// holds every check until closed.
type checker struct {
	pass    string
	calls   atomic.Int32
	gate    chan struct{}
	err     error // returned instead, when set
	running atomic.Int32
	maxRun  atomic.Int32
}

func (c *checker) CheckLogin(ctx context.Context, user, pass string) error {
	c.calls.Add(1)
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		m := c.maxRun.Load()
		if n <= m || c.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	if c.gate != nil {
		select {
		case <-c.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if c.err != nil {
		return c.err
	}
	if pass != c.pass {
		return &backend.ServerError{Code: frame.ErrCodeBadCredentials, Message: "Provided username " + user + " and/or password are incorrect"}
	}
	return nil
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func token(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

func newTest(t *testing.T, cfg Config) (*Passthrough, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := NewPassthrough(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

func TestCacheWithinTTL(t *testing.T) {
	ck := &checker{pass: "pw"}
	clk := &clock{now: time.Unix(1000, 0)}
	p, _ := newTest(t, Config{Checker: ck, CacheTTL: time.Minute, Now: clk.Now})
	ctx := context.Background()
	for i := range 3 {
		if err := p.Login(ctx, token("u", "pw")); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
	}
	if got := ck.calls.Load(); got != 1 {
		t.Errorf("checks within the TTL = %d, want 1", got)
	}
	if got := value(p.metrics.cacheHits); got != 2 {
		t.Errorf("cache hits = %v, want 2", got)
	}
	clk.Add(time.Minute)
	if err := p.Login(ctx, token("u", "pw")); err != nil {
		t.Fatal(err)
	}
	if got := ck.calls.Load(); got != 2 {
		t.Errorf("checks after the TTL = %d, want 2", got)
	}
}

func TestWrongPasswordNotCachedAndNotConfusedWithRight(t *testing.T) {
	ck := &checker{pass: "pw"}
	p, _ := newTest(t, Config{Checker: ck, CacheTTL: time.Minute})
	ctx := context.Background()
	if err := p.Login(ctx, token("u", "pw")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := p.Login(ctx, token("u", "pw2"))
		if err == nil || err.Code != frame.ErrCodeBadCredentials || err.Message != "Provided username u and/or password are incorrect" || err.Cause != nil {
			t.Fatalf("wrong password: %#v", err)
		}
	}
	if got := ck.calls.Load(); got != 3 {
		t.Errorf("checks = %d, want 3 (refusals are not cached)", got)
	}
	if got := value(p.metrics.logins.WithLabelValues(resultBadCredentials)); got != 2 {
		t.Errorf("bad_credentials logins = %v, want 2", got)
	}
}

func TestCacheDisabled(t *testing.T) {
	ck := &checker{pass: "pw"}
	p, _ := newTest(t, Config{Checker: ck})
	for range 3 {
		if err := p.Login(context.Background(), token("u", "pw")); err != nil {
			t.Fatal(err)
		}
	}
	if got := ck.calls.Load(); got != 3 {
		t.Errorf("checks with TTL 0 = %d, want 3", got)
	}
}

func TestConcurrentLoginsShareOneCheck(t *testing.T) {
	ck := &checker{pass: "pw", gate: make(chan struct{})}
	p, _ := newTest(t, Config{Checker: ck})
	const n = 20
	errs := make(chan *Error, n)
	for range n {
		go func() { errs <- p.Login(context.Background(), token("u", "pw")) }()
	}
	// Wait until the check is under way, then let it finish.
	for ck.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others join it meanwhile
	close(ck.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ck.calls.Load(); got >= n {
		t.Errorf("checks = %d for %d concurrent identical logins, want them shared", got, n)
	}
}

func TestChecksBounded(t *testing.T) {
	ck := &checker{pass: "pw", gate: make(chan struct{})}
	p, _ := newTest(t, Config{Checker: ck, MaxChecks: 3})
	const n = 10
	errs := make(chan *Error, n)
	for i := range n {
		go func() { errs <- p.Login(context.Background(), token(string(rune('a'+i)), "pw")) }()
	}
	for ck.calls.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(ck.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := ck.maxRun.Load(); got > 3 {
		t.Errorf("%d checks ran at once, want at most 3", got)
	}
}

func TestCassandraUnreachable(t *testing.T) {
	cause := errors.New("backend: no Cassandra node is up to check the login")
	p, _ := newTest(t, Config{Checker: &checker{err: cause}, CacheTTL: time.Minute})
	err := p.Login(context.Background(), token("u", "pw"))
	if err == nil || err.Code != frame.ErrCodeBadCredentials || !errors.Is(err, cause) {
		t.Fatalf("got %#v, want an AUTHENTICATION_ERROR caused by %v", err, cause)
	}
	if got := value(p.metrics.logins.WithLabelValues(resultError)); got != 1 {
		t.Errorf("error logins = %v, want 1", got)
	}
}

func TestLoginTimeout(t *testing.T) {
	ck := &checker{pass: "pw", gate: make(chan struct{})}
	defer close(ck.gate)
	p, _ := newTest(t, Config{Checker: ck, Timeout: 50 * time.Millisecond})
	start := time.Now()
	err := p.Login(context.Background(), token("u", "pw"))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("login took %v with a 50ms timeout", d)
	}
}

func TestCacheBounded(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	p, _ := newTest(t, Config{Checker: &checker{pass: "pw"}, CacheTTL: time.Minute, CacheEntries: 4, Now: clk.Now})
	for i := range 10 {
		clk.Add(time.Second)
		if err := p.Login(context.Background(), token(string(rune('a'+i)), "pw")); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.cache); n > 4 {
		t.Errorf("cache holds %d entries, want at most 4", n)
	}
	// The newest entries survive.
	if !p.cached(p.cacheKey("j", "pw")) || p.cached(p.cacheKey("a", "pw")) {
		t.Error("eviction kept an old entry or dropped the newest")
	}
}

func TestCacheKeyHoldsNoPassword(t *testing.T) {
	p, _ := newTest(t, Config{Checker: &checker{pass: "pw"}})
	q, _ := newTest(t, Config{Checker: &checker{pass: "pw"}})
	if p.cacheKey("u", "pw") == q.cacheKey("u", "pw") {
		t.Error("two processes' keys for the same credentials are equal: the key is not salted")
	}
	if p.cacheKey("u", "pw") == p.cacheKey("u", "pw2") || p.cacheKey("ab", "c") == p.cacheKey("a", "bc") {
		t.Error("distinct credentials share a key")
	}
}

func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		in, user, pass, msg string
	}{
		{"\x00u\x00p", "u", "p", ""},
		{"authz\x00u\x00p", "u", "p", ""},
		{"\x00u\x00", "", "", "Password must not be null"},
		{"up", "", "", "Password must not be null"},
		{"", "", "", "Password must not be null"},
		{"u\x00p", "", "", "Authentication ID must not be null"},
		{"\x00\x00p", "", "", "Authentication ID must not be null"},
		{"\x00\x00\x00p", "", "", `Credential format error: username or password is empty or contains NUL(\0) character`},
	} {
		u, p, msg := ParsePlain([]byte(tc.in))
		if u != tc.user || p != tc.pass || msg != tc.msg {
			t.Errorf("ParsePlain(%q) = %q, %q, %q; want %q, %q, %q", tc.in, u, p, msg, tc.user, tc.pass, tc.msg)
		}
	}
}

func TestAuthWire(t *testing.T) {
	f := AppendAuthenticate(nil, frame.V4, 3, PasswordAuthenticator)
	h := frame.ParseHeader(f)
	if h.Opcode != frame.OpAuthenticate || !h.Response || h.Stream != 3 || string(frame.Body(f)[2:]) != PasswordAuthenticator {
		t.Errorf("AUTHENTICATE %+v %q", h, frame.Body(f))
	}
	f = AppendAuthSuccess(nil, frame.V5, 1)
	if tok, err := ParseAuthResponse(frame.Body(f)); err != nil || tok != nil || frame.Opcode(f) != frame.OpAuthSuccess {
		t.Errorf("AUTH_SUCCESS token %q, %v", tok, err)
	}
	if tok, err := ParseAuthResponse([]byte{0, 0, 0, 2, 'a', 'b'}); err != nil || string(tok) != "ab" {
		t.Errorf("token %q, %v", tok, err)
	}
	if _, err := ParseAuthResponse([]byte{0, 0, 0, 3, 'a'}); !errors.Is(err, ErrShortToken) {
		t.Errorf("short token: %v", err)
	}
	if _, err := ParseAuthResponse([]byte{0, 0}); !errors.Is(err, ErrShortToken) {
		t.Errorf("short body: %v", err)
	}
}

// value reads a counter.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// LoginVia asks its own check function in place of the Checker, with the
// cache, the failure limit and the sharing of concurrent checks as for
// LoginFrom: only the first caller's function runs.
func TestLoginVia(t *testing.T) {
	c := &checker{pass: "right"}
	p, err := NewPassthrough(Config{Checker: c, CacheTTL: time.Minute, FailuresPerSecond: 1, FailureBurst: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var ran atomic.Int32
	via := &checker{pass: "right", gate: gate}
	check := func(ctx context.Context, user, pass string) error {
		ran.Add(1)
		return via.CheckLogin(ctx, user, pass)
	}
	ctx := context.Background()
	errs := make(chan *Error, 3)
	for range 3 {
		go func() { errs <- p.LoginVia(ctx, token("u", "right"), "10.0.0.1", check) }()
	}
	time.Sleep(100 * time.Millisecond) // all three wait on the one check
	close(gate)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("LoginVia: %v", err)
		}
	}
	if ran.Load() != 1 || c.calls.Load() != 0 {
		t.Errorf("check ran %d times and the Checker %d, want 1 and 0", ran.Load(), c.calls.Load())
	}
	// Cached now: no check at all.
	if err := p.LoginVia(ctx, token("u", "right"), "10.0.0.1", check); err != nil || ran.Load() != 1 {
		t.Errorf("cached login: %v, check ran %d times, want nil and 1", err, ran.Load())
	}
	// A refusal is Cassandra's answer, and counts against the address.
	err1 := p.LoginVia(ctx, token("u", "wrong"), "10.0.0.2", check)
	if err1 == nil || err1.Code != frame.ErrCodeBadCredentials || err1.Message != "Provided username u and/or password are incorrect" {
		t.Fatalf("wrong password: %v, want Cassandra's answer", err1)
	}
	err2 := p.LoginVia(ctx, token("u", "wrong2"), "10.0.0.2", check)
	if err2 == nil || ran.Load() != 2 {
		t.Errorf("second wrong password from the address: %v, check ran %d times, want a refusal without a check (2)", err2, ran.Load())
	}
}
