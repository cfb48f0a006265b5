package limiter

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Law is an adaptive limit's law.
type Law uint8

const (
	// LawGradient follows each node's mean latency against its own
	// baseline (adaptive.go).
	LawGradient Law = iota
	// LawFleet follows the node's standing queue, read from the minimum
	// latency, with limits that may go below one request (fleet.go).
	LawFleet
)

// Defaults of the zero Config fields.
const (
	DefaultNodeLimit       = 256
	DefaultMinLimit        = 16
	DefaultMaxLimit        = 4096
	DefaultTolerance       = 1.5
	DefaultBackoff         = 0.9
	DefaultWindow          = 100 * time.Millisecond
	DefaultMinSamples      = 100
	DefaultBaselineWindow  = 30 * time.Second
	DefaultQueueLength     = 10000
	DefaultMaxWait         = time.Second
	DefaultTickInterval    = 10 * time.Millisecond
	DefaultFloor           = 0.1
	DefaultFleetTolerance  = 1.2
	DefaultFleetMinSamples = 16
	DefaultNodePoll        = 200 * time.Millisecond
	maxClasses             = 64
	maxLimitValue          = 1 << 24 // node limits are int32 inside
	maxTolerance           = 10.0
	minBackoff, maxBackoff = 0.5, 0.99
)

// ErrConfig is wrapped by the errors New and Reconfigure return for a
// Config they refuse.
var ErrConfig = errors.New("limiter: invalid config")

// Config holds the limiter's settings. The zero value of every field means
// its default; negative values are errors unless a field says otherwise. A
// Config is copied by New and Reconfigure: changing it afterwards has no
// effect.
type Config struct {
	// GlobalLimit caps the requests in flight to the whole cluster. 0 means
	// no cap beyond the sum of the node limits.
	GlobalLimit int

	// NodeLimit is the per-node limit when Adaptive is false. Default 256.
	// With Adaptive it is unused. Node limits are at most 1<<24.
	NodeLimit int

	// Adaptive makes each node's limit follow its latency: a node starts at
	// MinLimit, doubles while its latency stays near its baseline, then grows
	// by about sqrt(limit) per sample window, and is cut when its latency
	// rises above Tolerance times its baseline or when Cassandra answers
	// OVERLOADED or a timeout (see adaptive.go).
	Adaptive bool
	// Law chooses the adaptive law: LawGradient (the zero value, see
	// adaptive.go) or LawFleet (see fleet.go), meant for many sidecars in
	// front of the same nodes.
	Law Law
	// Floor is the fleet law's lowest limit, and where a node's limit
	// starts; it may be below 1 (a fraction of one request in flight on
	// average, see node.pace). Default 0.1; in (0, MaxLimit]. The gradient
	// law uses MinLimit instead.
	Floor float64
	// MinLimit and MaxLimit bound an adaptive limit. Defaults 16 and 4096.
	// MaxLimit must not exceed the stream ids the proxy holds to a node
	// (32768 per connection); the caller checks that.
	MinLimit, MaxLimit int
	// Tolerance is how far a window's mean latency may rise above the
	// baseline before the limit is cut, as a ratio. Default 1.5; at most 10,
	// more than 1. For the fleet law it is the dead zone of the window's
	// minimum latency over the baseline: default 1.2.
	Tolerance float64
	// Backoff multiplies the limit after a window with an OVERLOADED or
	// timeout outcome. Default 0.9; between 0.5 and 0.99.
	Backoff float64
	// Window is the shortest sample window (it also lasts at least twice
	// the last window's mean latency). Default 100ms.
	Window time.Duration
	// MinSamples is the least number of latency samples a window needs
	// before it changes the limit. Default 100 (16 for the fleet law, whose
	// window statistic is a minimum).
	MinSamples int
	// BaselineWindow is how long the lowest window mean is remembered as
	// the node's baseline latency; the baseline is also probed (the limit
	// halved for two windows) every BaselineWindow/3. Default 30s.
	BaselineWindow time.Duration
	// NodePoll is how often the fleet law wants the node's own counts
	// (Limiter.NodeRead), at the most: a sidecar
	// with a small share of the node's answers wants it less often (see
	// noderate.go). Default 200ms; negative: never (the law then judges
	// by latencies alone).
	NodePoll time.Duration

	// QueueLength caps the requests waiting for a permit. Default 10000; a
	// negative value disables the queue, so requests beyond the limits are
	// rejected at once. Lowering it on Reconfigure drops nobody: new requests
	// are rejected until the queue is short enough.
	QueueLength int
	// MaxWait caps the time a request waits in the queue. Default 1s. The
	// caller's own deadline, when earlier, wins. Reconfigure applies it to
	// requests queued afterwards.
	MaxWait time.Duration
	// QueueTarget and QueueInterval are the CoDel policy against standing
	// queues, per flow: once every request of a flow leaving the queue for
	// QueueInterval had waited more than QueueTarget and the flow's backlog
	// grew by a quarter meanwhile, its requests that waited more than
	// QueueTarget are rejected (StandingQueue) until one leaves having
	// waited QueueTarget or less, or its queue empties. Bursts that drain
	// within QueueInterval are served in full, and so is a closed loop,
	// whose backlog stands without growing (see queue.codel).
	//
	// While any flow's queue stood within the last QueueInterval, arrivals
	// whose predicted wait (from their round-robin position and the rate
	// the queue drains at) is over QueueTarget/2 are turned away at once
	// (Shed) instead of queueing only to be dropped later: under sustained
	// overload the answers stay fast and the admitted requests wait at most
	// about the target.
	//
	// QueueTarget defaults to MaxWait/4 and QueueInterval to 20 times the
	// target (CoDel's ratio), at most MaxWait; a negative QueueTarget
	// disables the policy.
	QueueTarget, QueueInterval time.Duration

	// ClassWeights gives each priority class (the class argument of Acquire)
	// its guaranteed share of the permits handed out from the queue: class i
	// gets at least ClassWeights[i]/sum(ClassWeights) of them while it has
	// requests waiting, and classes with nothing waiting leave their share
	// to the others (deficit round robin). Nil means one class. Each weight
	// is at least 1; at most 64 classes. An Acquire class outside the range
	// is served as class 0.
	ClassWeights []int

	// TickInterval is how often the Limiter's goroutine expires queued
	// requests and closes sample windows, which bounds how late a
	// QueueTimeout is answered. Default 10ms. It is fixed by New:
	// Reconfigure ignores it.
	TickInterval time.Duration

	// DebugPermits makes a second Release of a Permit panic, and checks on
	// every admission that the node and global limits hold. Without it the
	// second Release is counted (cqlgate_limiter_double_releases_total) and
	// ignored. Meant for tests.
	DebugPermits bool
}

// normalized returns c with defaults filled in, or an error wrapping
// ErrConfig.
func (c Config) normalized() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if c.GlobalLimit < 0 {
		return bad("global limit %d is negative", c.GlobalLimit)
	}
	if c.NodeLimit < 0 {
		return bad("node limit %d is negative", c.NodeLimit)
	}
	if c.NodeLimit == 0 {
		c.NodeLimit = DefaultNodeLimit
	}
	if c.MinLimit < 0 || c.MaxLimit < 0 {
		return bad("adaptive limits %d..%d are negative", c.MinLimit, c.MaxLimit)
	}
	if c.MinLimit == 0 {
		c.MinLimit = DefaultMinLimit
	}
	if c.MaxLimit == 0 {
		c.MaxLimit = max(DefaultMaxLimit, c.MinLimit)
	}
	if c.NodeLimit > maxLimitValue || c.MaxLimit > maxLimitValue {
		return bad("node limits above %d", maxLimitValue)
	}
	if c.MinLimit > c.MaxLimit {
		return bad("min limit %d is above max limit %d", c.MinLimit, c.MaxLimit)
	}
	if c.Law != LawGradient && c.Law != LawFleet {
		return bad("unknown law %d", c.Law)
	}
	if c.Floor < 0 || math.IsNaN(c.Floor) {
		return bad("floor %g is negative", c.Floor)
	}
	if c.Floor == 0 {
		c.Floor = DefaultFloor
	}
	if c.Floor > float64(c.MaxLimit) {
		return bad("floor %g is above max limit %d", c.Floor, c.MaxLimit)
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
		if c.Law == LawFleet {
			c.Tolerance = DefaultFleetTolerance
		}
	}
	if !(c.Tolerance > 1 && c.Tolerance <= maxTolerance) {
		return bad("tolerance %g is not in (1, %g]", c.Tolerance, maxTolerance)
	}
	if c.Backoff == 0 {
		c.Backoff = DefaultBackoff
	}
	if !(c.Backoff >= minBackoff && c.Backoff <= maxBackoff) {
		return bad("backoff %g is not in [%g, %g]", c.Backoff, minBackoff, maxBackoff)
	}
	if c.Window < 0 || c.BaselineWindow < 0 || c.MaxWait < 0 || c.QueueInterval < 0 || c.TickInterval < 0 {
		return bad("negative duration")
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.MinSamples < 0 {
		return bad("min samples %d is negative", c.MinSamples)
	}
	if c.MinSamples == 0 {
		c.MinSamples = DefaultMinSamples
		if c.Law == LawFleet {
			c.MinSamples = DefaultFleetMinSamples
		}
	}
	if c.BaselineWindow == 0 {
		c.BaselineWindow = DefaultBaselineWindow
	}
	if c.NodePoll == 0 {
		c.NodePoll = DefaultNodePoll
	}
	if c.BaselineWindow < c.Window {
		return bad("baseline window %s is shorter than the sample window %s", c.BaselineWindow, c.Window)
	}
	if c.QueueLength == 0 {
		c.QueueLength = DefaultQueueLength
	}
	if c.QueueLength < 0 {
		c.QueueLength = -1
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.QueueTarget == 0 {
		c.QueueTarget = c.MaxWait / 4
	}
	if c.QueueTarget < 0 {
		c.QueueTarget = -1
	}
	if c.QueueInterval == 0 {
		// CoDel's own ratio (5ms target, 100ms interval), within MaxWait.
		c.QueueInterval = c.MaxWait
		if c.QueueTarget > 0 {
			c.QueueInterval = min(c.MaxWait, 20*c.QueueTarget)
		}
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if len(c.ClassWeights) > maxClasses {
		return bad("%d priority classes, at most %d", len(c.ClassWeights), maxClasses)
	}
	for i, w := range c.ClassWeights {
		if w < 1 {
			return bad("weight %d of class %d is below 1", w, i)
		}
	}
	if len(c.ClassWeights) == 0 {
		c.ClassWeights = []int{1}
	} else {
		c.ClassWeights = append([]int(nil), c.ClassWeights...)
	}
	return c, nil
}
