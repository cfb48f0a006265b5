package auth

import (
	"sync"
	"time"
)

// maxFailureSources bounds the addresses whose failed logins are tracked,
// so that a flood from many addresses cannot grow the table without end.
const maxFailureSources = 10000

// RecentFailureWindow is how long after a failed login from a source
// address FailedRecently reports it: while it does, a role's first login
// from that address is checked on one node rather than on every node at
// once (pkg/backend rolelogin.go), so a flood of wrong passwords costs
// Cassandra one check per attempt after its first failure.
const RecentFailureWindow = time.Minute

// failureLimiter tracks failed logins per source address and limits them
// with a token bucket: each failure takes a token, tokens come back at rate
// per second up to burst, and an address without a token is refused before
// anything is asked of Cassandra. A brute-force attempt then costs
// Cassandra at most rate checks a second per address, and an application
// with a wrong password is told why at once. With rate 0 nothing is
// limited, but failures are still tracked for failedRecently.
type failureLimiter struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens   float64
	at       time.Time // when tokens was last brought up to date
	lastFail time.Time
}

func newFailureLimiter(rate float64, burst int, now func() time.Time) *failureLimiter {
	return &failureLimiter{rate: max(rate, 0), burst: float64(max(burst, 1)), now: now, buckets: map[string]*bucket{}}
}

// allow reports whether src may have a login checked now; with rate 0,
// always.
func (l *failureLimiter) allow(src string) bool {
	if l.rate == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[src]
	if !ok {
		return true
	}
	l.refillLocked(b, l.now())
	return b.tokens >= 1
}

// failedRecently reports whether a login from src failed within
// RecentFailureWindow.
func (l *failureLimiter) failedRecently(src string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[src]
	return ok && now.Sub(b.lastFail) < RecentFailureWindow
}

// fail takes a token from src for a failed login.
func (l *failureLimiter) fail(src string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[src]
	if !ok {
		if len(l.buckets) >= maxFailureSources {
			l.pruneLocked(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[src] = b
	}
	l.refillLocked(b, now)
	b.tokens = max(b.tokens-1, 0)
	b.lastFail = now
}

func (l *failureLimiter) refillLocked(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(l.burst, b.tokens+d.Seconds()*l.rate)
		b.at = now
	}
}

// pruneLocked drops the buckets that have refilled and whose last failure
// is older than RecentFailureWindow (they hold nothing a new bucket would
// not), or if none has, the one that failed longest ago.
func (l *failureLimiter) pruneLocked(now time.Time) {
	var oldest string
	var oldestAt time.Time
	dropped := false
	for src, b := range l.buckets {
		l.refillLocked(b, now)
		if (l.rate == 0 || b.tokens >= l.burst) && now.Sub(b.lastFail) >= RecentFailureWindow {
			delete(l.buckets, src)
			dropped = true
			continue
		}
		if oldestAt.IsZero() || b.lastFail.Before(oldestAt) {
			oldest, oldestAt = src, b.lastFail
		}
	}
	if !dropped && oldest != "" {
		delete(l.buckets, oldest)
	}
}
