package statuspage

import "strconv"

func trimFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
