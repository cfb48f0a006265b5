package docgen

// Planned lists metric families that are announced but not exported yet,
// e.g. {Name: "cqlgate_x_total", Type: "counter", Labels: []string{"reason"},
// Help: "..."}. The dashboard and the alerting rules in deploy/ may use them
// before the proxy does, and docs/metrics.md shows them marked "planned"
// until the proxy registers them; from then on the proxy's own description
// replaces the entry here, which can then be deleted.
//
// Empty: every family the dashboard and the rules use is exported.
var Planned []Family
