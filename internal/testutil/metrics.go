// metrics.go: reading what a test checks in a /metrics page and in a
// UDP call's rates.
package testutil

import (
	"regexp"
	"strconv"
)

// LaneMetric is the value of metric{lane="ln"} in a /metrics page, -1 if
// it is not there.
func LaneMetric(page, metric, ln string) float64 {
	m := regexp.MustCompile(`(?m)^` + metric + `\{lane="` + ln + `"\} (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// AnsweredTwice says whether a rate down is about twice a rate up above 0,
// as a UDP call's whose every datagram is answered twice (1.3x to 3x: two
// readings' windows cut the flow a few datagrams apart).
func AnsweredTwice(up, down float64) bool {
	return up > 0 && down > 1.3*up && down < 3*up
}
