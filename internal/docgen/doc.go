// Package docgen renders cqlgate's reference documentation (docs/settings.md,
// docs/metrics.md, docs/errors.md) from the code, so that the documents cannot
// drift from what the proxy does:
//
//   - settings from config.Fields(), the struct tags of config.Config;
//   - metrics from the collectors the proxy registers (their Desc help text and
//     label names) and from a live /metrics page, plus a short list of metrics
//     that are planned but not exported yet (Planned);
//   - the errors the proxy answers with itself, from the calls in its source
//     that pass a frame.ErrCode* constant with a message.
//
// Each document is a text/template under templates/ (the prose) into which
// the generated tables are inserted. The package is a library for the test
// in test/deploy that regenerates the documents with -update (`make docs`)
// and fails when a checked-in document differs; it is not a command.
// It must not describe anything by hand that the code can tell.
package docgen
