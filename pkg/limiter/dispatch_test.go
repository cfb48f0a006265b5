package limiter

import (
	"testing"
	"time"
)

// viaRec is a ViaWaiter that records which of its methods admitted it.
type viaRec struct {
	rec
	via any // what AdmittedVia got; nil when Admitted ran
}

func (r *viaRec) AdmittedVia(p Permit, now time.Time, via any) {
	r.via = via
	r.Admitted(p, now)
}

// A release that names its goroutine passes it to the ViaWaiter it admits,
// and only to it: plain Waiters, and admissions by any other path (a plain
// Release, a raised limit), get Admitted.
func TestReleaseViaReachesOnlyTheWaitersItAdmits(t *testing.T) {
	l, _ := newTestLimiter(t, Config{NodeLimit: 1}, 1)
	hold := &rec{t: t}
	l.Acquire(hold, 1, 0, nil, time.Time{})
	a := &viaRec{rec: rec{t: t}}
	b := &rec{t: t}
	c := &viaRec{rec: rec{t: t}}
	d := &viaRec{rec: rec{t: t}}
	l.Acquire(a, 2, 0, nil, time.Time{})
	l.Acquire(b, 3, 0, nil, time.Time{})
	l.Acquire(c, 4, 0, nil, time.Time{})
	l.Acquire(d, 5, 0, nil, time.Time{})

	loop := "read loop"
	hold.permit.ReleaseVia(Success, time.Millisecond, loop)
	if !a.ok || a.via != loop {
		t.Fatalf("a admitted %v via %v; want via %q", a.ok, a.via, loop)
	}
	a.permit.ReleaseVia(Success, time.Millisecond, loop)
	if !b.ok {
		t.Fatal("b, a plain Waiter, was not admitted by ReleaseVia")
	}
	b.permit.Release(Success, time.Millisecond)
	if !c.ok || c.via != nil {
		t.Fatalf("c admitted %v via %v; want Admitted, by a plain Release", c.ok, c.via)
	}
	if err := l.Reconfigure(Config{NodeLimit: 2, DebugPermits: true}); err != nil {
		t.Fatal(err)
	}
	if !d.ok || d.via != nil {
		t.Fatalf("d admitted %v via %v; want Admitted, by the raised limit", d.ok, d.via)
	}
	c.permit.Release(Success, 0)
	d.permit.Release(Success, 0)
}
