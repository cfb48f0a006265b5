package frame

// RowsCount returns the number of rows in a RESULT body of kind Rows
// (spec section 4.2.5.2), reading only its metadata: the rows themselves
// are not decoded. ok is false for another kind of RESULT or a malformed
// body. It allocates nothing.
func RowsCount(body []byte) (n int32, ok bool) {
	kind, rest, ok := readInt(body)
	if !ok || kind != ResultRows {
		return 0, false
	}
	flags, rest, ok := readInt(rest)
	if !ok {
		return 0, false
	}
	count, rest, ok := readInt(rest)
	if !ok || count < 0 {
		return 0, false
	}
	if flags&metaHasMorePages != 0 {
		var err error
		if _, _, rest, err = readValue(rest); err != nil {
			return 0, false
		}
	}
	if flags&metaChanged != 0 {
		if _, rest, ok = readShortBytes(rest); !ok {
			return 0, false
		}
	}
	if flags&metaNoMetadata == 0 {
		global := flags&metaGlobalTableSpec != 0
		if global {
			for range 2 {
				if _, rest, ok = readShortBytes(rest); !ok {
					return 0, false
				}
			}
		}
		for range count {
			if !global {
				for range 2 {
					if _, rest, ok = readShortBytes(rest); !ok {
						return 0, false
					}
				}
			}
			if _, rest, ok = readShortBytes(rest); !ok {
				return 0, false
			}
			var err error
			if _, rest, err = skipOption(rest, 0); err != nil {
				return 0, false
			}
		}
	}
	n, _, ok = readInt(rest)
	if !ok || n < 0 {
		return 0, false
	}
	return n, true
}
