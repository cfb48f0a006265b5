package idempotency

import "bytes"

// Cassandra 5.0's native functions, by determinism. A write that calls a
// non-deterministic one stores a different value each time it runs, so it
// is not idempotent; one that calls a function not listed here (a
// user-defined function, or a native one this list does not know) is
// treated the same way, since nothing says it is deterministic. Reads are
// idempotent whatever functions they call.

// nonDeterministic lists the native functions whose result changes from
// one call to the next (snake_case names are the 5.0 aliases).
var nonDeterministic = map[string]bool{
	"now":               true,
	"uuid":              true,
	"currenttimestamp":  true,
	"current_timestamp": true,
	"currentdate":       true,
	"current_date":      true,
	"currenttime":       true,
	"current_time":      true,
	"currenttimeuuid":   true,
	"current_timeuuid":  true,
}

// deterministic lists the other native functions. minTimeuuid and
// maxTimeuuid build a timeuuid from their argument only.
var deterministic = map[string]bool{
	"token": true, "cast": true,
	"mintimeuuid": true, "min_timeuuid": true, "maxtimeuuid": true, "max_timeuuid": true,
	"dateof": true, "unixtimestampof": true,
	"todate": true, "to_date": true, "totimestamp": true, "to_timestamp": true,
	"tounixtimestamp": true, "to_unix_timestamp": true, "floor": true,
	"tojson": true, "to_json": true, "fromjson": true, "from_json": true,
	"abs": true, "exp": true, "log": true, "log10": true, "round": true,
	"map_keys": true, "map_values": true, "collection_count": true, "collection_min": true,
	"collection_max": true, "collection_sum": true, "collection_avg": true,
	"mask_null": true, "mask_default": true, "mask_replace": true, "mask_inner": true,
	"mask_outer": true, "mask_hash": true,
	"similarity_cosine": true, "similarity_euclidean": true, "similarity_dot_product": true,
	"count": true, "min": true, "max": true, "sum": true, "avg": true,
	"writetime": true, "maxwritetime": true, "ttl": true,
}

// funcDeterminism classifies a call of the function named name (as
// written: quoted names are exact, others case-insensitive), qualified by
// keyspace ks when the call names one. It returns ReasonNone for a known
// deterministic function.
func funcDeterminism(ks, name string, quoted bool) Reason {
	if ks != "" && ks != "system" {
		return ReasonUnknownFunction // a user-defined function
	}
	// Lower-case into a buffer on the stack: map lookups with string(b)
	// do not allocate.
	var buf [64]byte
	if len(name) > len(buf) {
		return ReasonUnknownFunction
	}
	b := buf[:copy(buf[:], name)]
	if !quoted {
		for i, c := range b {
			if c >= 'A' && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
	}
	switch {
	case nonDeterministic[string(b)]:
		return ReasonNonDeterministic
	case deterministic[string(b)], isBlobConversion(b):
		return ReasonNone
	}
	return ReasonUnknownFunction
}

// isBlobConversion matches typeAsBlob, blobAsType and their 5.0
// snake_case forms (type_as_blob, blob_as_type).
func isBlobConversion(name []byte) bool {
	return len(name) > len("blobas") &&
		(bytes.HasPrefix(name, []byte("blobas")) || bytes.HasPrefix(name, []byte("blob_as_")) ||
			bytes.HasSuffix(name, []byte("asblob")) || bytes.HasSuffix(name, []byte("_as_blob")))
}

// asciiLower lower-cases ASCII letters. It allocates only when s has an
// upper-case letter (identifiers are ASCII in CQL).
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
