package artifact

import "strconv"

// exactPow10 holds the powers of ten that a float64 represents exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseJSONFloat converts num, a number of JSON's grammar (numberLen's extent), to the float64
// strconv.ParseFloat(num, 64) gives. A plain decimal — an optional minus, at most 15 digits
// in all, at most 22 of them after the point, no exponent — is converted directly: its
// digits are an integer m < 2^53 and 10^k is exact for k ≤ 22, so m / 10^k, one correctly
// rounded IEEE division of two exact values, is the correctly rounded value strconv gives.
// Anything else goes to strconv.ParseFloat; ok is false where it fails (out of range).
func parseJSONFloat(num []byte) (float64, bool) {
	i, neg := 0, false
	if i < len(num) && num[i] == '-' {
		neg = true
		i++
	}
	var m uint64
	digits, frac, point := 0, 0, false
	for ; i < len(num); i++ {
		c := num[i]
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if point {
				frac++
			}
		case c == '.' && !point:
			point = true
		default: // an exponent
			return parseFloatSlow(num)
		}
	}
	if digits == 0 || digits > 15 || frac >= len(exactPow10) {
		return parseFloatSlow(num)
	}
	f := float64(m) / exactPow10[frac]
	if neg {
		f = -f
	}
	return f, true
}

func parseFloatSlow(num []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(num), 64)
	return f, err == nil
}
