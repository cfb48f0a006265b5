package proxy

// Rules (pkg/rules, --rules-file): caps on the requests in flight of a
// statement or a table. A request is matched once, in forward, after its
// statement is known and before the node limiter: a request waiting for a
// rule's permit holds no node permit, so a capped statement cannot fill
// the limiter's queue either. The rule permit is the request's, not an
// attempt's: hedges and sends to another node share it, and finishAt, the
// one exit of every request, gives it back (rules.Permit.Release zeroes it,
// so it goes back once).

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/config"
	"github.com/cqlgate/cqlgate/pkg/frame"
	"github.com/cqlgate/cqlgate/pkg/rules"
	"github.com/cqlgate/cqlgate/pkg/stmtstats"
)

// ruleSweepInterval is how often queued waits are checked for expiry: the
// precision of max_queue_wait.
const ruleSweepInterval = 5 * time.Millisecond

// loadRules reads cfg's rules file (none: no rules).
func loadRules(cfg config.Config) ([]rules.Def, error) {
	if cfg.RulesFile == "" {
		return nil, nil
	}
	return rules.Load(cfg.RulesFile)
}

// applyRules makes defs the rules and logs what changed.
func (p *Proxy) applyRules(defs []rules.Def) {
	ch := p.rules.Apply(defs, time.Now())
	if len(ch.Added)+len(ch.Changed)+len(ch.Removed) > 0 {
		p.log.Info("rules applied", zap.Strings("added", ch.Added), zap.Strings("changed", ch.Changed),
			zap.Strings("removed", ch.Removed), zap.Strings("unchanged", ch.Kept))
	}
}

// sweepRules expires rule queue waits until ctx is done.
func (p *Proxy) sweepRules(ctx context.Context) {
	t := time.NewTicker(ruleSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			p.rules.Sweep(now)
		}
	}
}

// admitRule matches req against the rules and takes the permit of the rule
// it matches. It reports false when req is no longer the caller's: queued
// in the rule's queue (RuleAdmitted or RuleRejected comes later) or
// refused already.
func (c *client) admitRule(req *request) bool {
	rs := c.p.rules.Current()
	if rs == nil || req.stmt == nil {
		return true
	}
	rl := rs.Match(req.stmt.ID(), req.stmt.Keyspace(), req.stmt.Table())
	if rl == nil {
		return true
	}
	p, res, msg := rl.Acquire(req, c.flow, time.Now(), req.deadline)
	switch res {
	case rules.Granted:
		req.rule = p
		return true
	case rules.Rejected:
		req.RuleRejected(msg)
	}
	return false
}

// RuleAdmitted goes on with a request that waited in a rule's queue: to the
// node limiter, as forward does. It runs on the goroutine that released
// the permit (or a reload's).
func (r *request) RuleAdmitted(p rules.Permit, now time.Time) {
	r.rule = p
	c := r.c
	if lp, ok := c.p.limiter.TryAcquire(r.cands); ok {
		r.Admitted(lp, now)
		return
	}
	c.p.limiter.AcquireAt(r, c.flow, c.p.priorityClass(r), r.cands, time.Unix(0, r.deadline), now)
}

// RuleRejected answers a request a rule refused with OVERLOADED naming the
// rule, or only finishes it when its client is gone (msg "").
func (r *request) RuleRejected(msg string) {
	if msg == "" {
		r.finish()
		return
	}
	now := time.Now()
	r.c.who.overloaded()
	r.rejected = true
	r.queued = now.Sub(r.start)
	r.failAt(frame.ErrCodeOverloaded, msg, now)
}

// statementsReport is GET /statements: the statement statistics and the
// rules' state.
type statementsReport struct {
	stmtstats.Report
	Rules []rules.Stat `json:"rules"`
}

// Rules returns the state of every rule, in file order.
func (p *Proxy) Rules() []rules.Stat { return p.rules.Stats() }

func (p *Proxy) statementsJSON(w http.ResponseWriter, r *http.Request) {
	if p.stmts == nil {
		http.Error(w, "statement statistics are off (--statement-stats-entries 0)", http.StatusNotFound)
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	rep := statementsReport{Report: p.stmts.Snapshot(r.URL.Query().Get("sort"), limit), Rules: p.rules.Stats()}
	if rep.Rules == nil {
		rep.Rules = []rules.Stat{}
	}
	writeJSON(w, rep)
}

// ReloadRules reads the rules file of the running configuration again and
// applies it; a file that does not load is refused and the rules stay.
// SIGHUP does the same through Reload.
func (p *Proxy) ReloadRules() error {
	p.reloadMu.Lock()
	defer p.reloadMu.Unlock()
	defs, err := loadRules(p.live)
	if err != nil {
		return fmt.Errorf("--rules-file: %w", err)
	}
	p.applyRules(defs)
	return nil
}
