// Package auth authenticates cqlgate's clients in passthrough mode: the proxy
// answers STARTUP with AUTHENTICATE as Cassandra's PasswordAuthenticator
// does, takes the client's SASL PLAIN token and checks it by logging in to
// Cassandra with it (Checker, a short-lived connection, or the caller's own
// check with LoginVia, e.g. the login of a connection that is to stay open
// for the client's requests). A refused login gets
// the very AUTHENTICATION_ERROR Cassandra gave.
//
// Credentials that passed are remembered for CacheTTL, keyed by an HMAC of
// the username and password under a random per-process key, so the cache
// never holds a password and its keys are useless outside this process.
// Within the TTL a login costs no round trip to Cassandra; a password changed
// or a role dropped in Cassandra is therefore honoured by the proxy only once
// the TTL has passed. Refusals are never cached. Concurrent logins with the
// same credentials (a driver opening its pool) share one check.
//
// This is the gate only: what a logged-in client's requests run as is the
// proxy's business (pkg/proxy roles.go): its own role by default, over
// backend pools logged in with the same credentials, or the proxy's
// backend user with --passthrough-identity proxy.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/cqlgate/cqlgate/pkg/backend"
	"github.com/cqlgate/cqlgate/pkg/frame"
)

// PasswordAuthenticator is the authenticator class named in AUTHENTICATE,
// as Cassandra names it: drivers pick their SASL PLAIN authenticator by it.
const PasswordAuthenticator = "org.apache.cassandra.auth.PasswordAuthenticator"

// Checker checks a username and password against Cassandra. It returns nil
// when Cassandra accepts them, a *backend.ServerError carrying Cassandra's
// answer when it refuses them, and any other error when it could not ask.
// *backend.Cluster is one.
type Checker interface {
	CheckLogin(ctx context.Context, username, password string) error
}

// Config configures a Passthrough. Zero values take the defaults named.
type Config struct {
	// Checker checks credentials that are not in the cache. Required.
	Checker Checker
	// CacheTTL is how long credentials that passed a check are accepted
	// without another; 0 disables the cache.
	CacheTTL time.Duration
	// CacheEntries bounds the cache (default 10,000). When it is full, an
	// expired entry or else the entry that expires first makes room.
	CacheEntries int
	// MaxChecks bounds the checks in flight at Cassandra (default 8), so a
	// reconnect storm of clients cannot open hundreds of connections to it.
	MaxChecks int
	// Timeout bounds one login check, waiting for a slot included
	// (default 10s).
	Timeout time.Duration
	// Log receives warnings when Cassandra cannot be asked (default: none).
	Log *zap.Logger
	// FailuresPerSecond and FailureBurst limit failed logins per source
	// address: after FailureBurst failures, an address gets FailuresPerSecond
	// more checks a second, and its other logins are refused without asking
	// Cassandra, unless their credentials are in the cache. 0 (the default)
	// means no limit.
	FailuresPerSecond float64
	FailureBurst      int
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
}

// Error is a refused login: the AUTHENTICATION_ERROR (code 0x0100) the
// client is answered with.
type Error struct {
	Code    int32
	Message string
	// Cause is why the login could not be checked, nil when Cassandra
	// refused the credentials; it is for logs, never sent to the client.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("login refused: %s: %v", e.Message, e.Cause)
	}
	return "login refused: " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Passthrough checks client logins against Cassandra. Its methods are safe
// for concurrent use.
type Passthrough struct {
	cfg      Config
	key      [32]byte // HMAC key of the cache
	flight   singleflight.Group
	slots    chan struct{}
	metrics  *metrics
	failures *failureLimiter

	mu    sync.Mutex
	cache map[[sha256.Size]byte]time.Time // credential HMAC -> expiry
}

// NewPassthrough returns a Passthrough and registers its metrics with reg
// (if not nil).
func NewPassthrough(cfg Config, reg prometheus.Registerer) (*Passthrough, error) {
	if cfg.Checker == nil {
		return nil, errors.New("auth: a Checker is required")
	}
	if cfg.CacheTTL < 0 {
		return nil, fmt.Errorf("auth: negative cache TTL %v", cfg.CacheTTL)
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = 10000
	}
	if cfg.MaxChecks <= 0 {
		cfg.MaxChecks = 8
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Passthrough{
		cfg:     cfg,
		slots:   make(chan struct{}, cfg.MaxChecks),
		metrics: newMetrics(),
		cache:   map[[sha256.Size]byte]time.Time{},
	}
	p.failures = newFailureLimiter(cfg.FailuresPerSecond, cfg.FailureBurst, cfg.Now)
	if _, err := rand.Read(p.key[:]); err != nil {
		return nil, fmt.Errorf("auth: cache key: %w", err)
	}
	if reg != nil {
		if err := p.metrics.register(reg); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Login checks the SASL PLAIN token of a client's AUTH_RESPONSE. It returns
// nil when the client may proceed, and otherwise an *Error to answer with.
func (p *Passthrough) Login(ctx context.Context, token []byte) *Error {
	return p.LoginFrom(ctx, token, "")
}

// LoginFrom is Login for a client connecting from source address src, whose
// failed logins are limited (Config.FailuresPerSecond). Credentials in the
// cache pass even from an address over its limit: a flood of wrong
// passwords must not lock out the application that shares its address.
func (p *Passthrough) LoginFrom(ctx context.Context, token []byte, src string) *Error {
	return p.LoginVia(ctx, token, src, nil)
}

// FailedRecently reports whether Cassandra refused a login from source
// address src (bad credentials) within RecentFailureWindow, whatever the
// failure limit (Config.FailuresPerSecond, even 0). The proxy then checks
// a role's first login from src on one node rather than on all at once.
func (p *Passthrough) FailedRecently(src string) bool { return p.failures.failedRecently(src) }

// CheckFunc checks a username and password as Checker.CheckLogin does.
type CheckFunc func(ctx context.Context, username, password string) error

// LoginVia is LoginFrom with check asking Cassandra in place of
// Config.Checker (nil: the Checker), e.g. by logging in the connection
// that is to serve the client's requests. Everything else is as for
// LoginFrom: the cache, the failure limit, at most MaxChecks checks in
// flight, and concurrent logins with the same credentials sharing one
// check, whose check function is the first caller's: only its own check
// function ever runs for a caller, and a caller whose check did not run
// learns only the result.
func (p *Passthrough) LoginVia(ctx context.Context, token []byte, src string, check CheckFunc) *Error {
	if check == nil {
		check = p.cfg.Checker.CheckLogin
	}
	user, pass, msg := ParsePlain(token)
	if msg != "" {
		p.failures.fail(src)
		p.metrics.logins.WithLabelValues(resultBadCredentials).Inc()
		return &Error{Code: frame.ErrCodeBadCredentials, Message: msg}
	}
	key := p.cacheKey(user, pass)
	if p.cached(key) {
		p.metrics.cacheHits.Inc()
		p.metrics.logins.WithLabelValues(resultSuccess).Inc()
		return nil
	}
	if !p.failures.allow(src) {
		p.metrics.logins.WithLabelValues(resultRateLimited).Inc()
		return &Error{Code: frame.ErrCodeBadCredentials, Message: "cqlgate: too many failed logins from this address; try again later"}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	// Callers that join a check under way share its result, each waiting
	// under its own deadline. The check has a deadline of its own, so that
	// the first caller going away does not fail the others.
	ch := p.flight.DoChan(string(key[:]), func() (any, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Timeout)
		defer cancel()
		return nil, p.check(cctx, key, user, pass, check)
	})
	var err error
	select {
	case r := <-ch:
		err = r.Err
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		p.metrics.logins.WithLabelValues(resultSuccess).Inc()
		return nil
	}
	var se *backend.ServerError
	if errors.As(err, &se) && se.Code == frame.ErrCodeBadCredentials {
		p.failures.fail(src)
		p.metrics.logins.WithLabelValues(resultBadCredentials).Inc()
		return &Error{Code: se.Code, Message: se.Message}
	}
	p.metrics.logins.WithLabelValues(resultError).Inc()
	p.cfg.Log.Warn("client login could not be checked with Cassandra", zap.String("username", user), zap.Error(err))
	// What Cassandra itself answers when it cannot read its roles table.
	return &Error{
		Code:    frame.ErrCodeBadCredentials,
		Message: "Unable to perform authentication: cqlgate could not check the credentials with Cassandra",
		Cause:   err,
	}
}

// check asks Cassandra, at most MaxChecks at a time, and caches a success.
func (p *Passthrough) check(ctx context.Context, key [sha256.Size]byte, user, pass string, check CheckFunc) error {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.slots }()
	err := check(ctx, user, pass)
	var se *backend.ServerError
	switch {
	case err == nil:
		p.metrics.checks.WithLabelValues(resultSuccess).Inc()
		p.remember(key)
	case errors.As(err, &se) && se.Code == frame.ErrCodeBadCredentials:
		p.metrics.checks.WithLabelValues(resultBadCredentials).Inc()
	default:
		p.metrics.checks.WithLabelValues(resultError).Inc()
	}
	return err
}

func (p *Passthrough) cacheKey(user, pass string) [sha256.Size]byte {
	m := hmac.New(sha256.New, p.key[:])
	m.Write([]byte(user))
	m.Write([]byte{0}) // a NUL cannot occur in either part of a PLAIN token
	m.Write([]byte(pass))
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

func (p *Passthrough) cached(key [sha256.Size]byte) bool {
	if p.cfg.CacheTTL == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	exp, ok := p.cache[key]
	if !ok {
		return false
	}
	if !p.cfg.Now().Before(exp) {
		delete(p.cache, key)
		return false
	}
	return true
}

func (p *Passthrough) remember(key [sha256.Size]byte) {
	if p.cfg.CacheTTL == 0 {
		return
	}
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.cache[key]; !ok && len(p.cache) >= p.cfg.CacheEntries {
		p.evictLocked(now)
	}
	p.cache[key] = now.Add(p.cfg.CacheTTL)
}

// evictLocked makes room for one entry: it drops every expired entry, or
// if none has expired, the one closest to expiry. A full cache means many
// distinct logins within one TTL, where a scan per insertion is small next
// to the login check that precedes it.
func (p *Passthrough) evictLocked(now time.Time) {
	var oldest [sha256.Size]byte
	var oldestExp time.Time
	dropped := false
	for k, exp := range p.cache {
		if !now.Before(exp) {
			delete(p.cache, k)
			dropped = true
			continue
		}
		if oldestExp.IsZero() || exp.Before(oldestExp) {
			oldest, oldestExp = k, exp
		}
	}
	if !dropped && !oldestExp.IsZero() {
		delete(p.cache, oldest)
	}
}

// Outcome labels of the metrics.
const (
	resultSuccess        = "success"
	resultBadCredentials = "bad_credentials"
	resultError          = "error"
	resultRateLimited    = "rate_limited"
)

type metrics struct {
	logins    *prometheus.CounterVec
	checks    *prometheus.CounterVec
	cacheHits prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlgate_auth_logins_total",
			Help: "Client logins (passthrough), by result: success, bad_credentials, error when Cassandra could not be asked, or rate_limited when the client's address failed too many logins (--login-failures-per-second).",
		}, []string{"result"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cqlgate_auth_verifications_total",
			Help: "Client credentials checked by logging in to Cassandra (logins not answered from the cache), by result.",
		}, []string{"result"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cqlgate_auth_cache_hits_total",
			Help: "Client logins accepted from the cache of verified credentials, without asking Cassandra.",
		}),
	}
	for _, r := range []string{resultSuccess, resultBadCredentials, resultError} {
		m.logins.WithLabelValues(r)
		m.checks.WithLabelValues(r)
	}
	m.logins.WithLabelValues(resultRateLimited)
	return m
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.logins, m.checks, m.cacheHits} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("auth: register metrics: %w", err)
		}
	}
	return nil
}
