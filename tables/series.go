package tables

import (
	"slices"

	"github.com/inferprobe/inferprobe/artifact"
)

// Request time series (request_plots/<name>_time_series.csv).
const (
	SeriesArrival    = "request_arrival"
	SeriesCompletion = "request_completion"
)

// arrivalNS is a measured request's arrival: its intended (scheduled) time, else its send
// (a closed loop has no intended time); ok is false for a request with neither.
func arrivalNS(r *artifact.Request) (int64, bool) {
	switch {
	case r.IntendedAtNS != nil:
		return *r.IntendedAtNS, true
	case r.StartedAtNS != nil:
		return *r.StartedAtNS, true
	}
	return 0, false
}

// completionNS is a completed (status ok) request's end of response.
func completionNS(r *artifact.Request) (int64, bool) {
	if r.Status != artifact.RequestOK || r.EndedAtNS == nil {
		return 0, false
	}
	return *r.EndedAtNS, true
}

// eventTimes are the times (Unix ns, ascending) of the requests' arrivals or completions.
func eventTimes(reqs []*artifact.Request, at func(*artifact.Request) (int64, bool)) []int64 {
	var ts []int64
	for _, r := range reqs {
		if t, ok := at(r); ok {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// countSeriesCSV is a cumulative-count time series file: header "Time (s),<name>", one row
// per event in time order with the seconds since base in Repr and the count of events so far
// (1, 2, …) as an integer, downsampled to CDFRows rows (Downsample: the first and last
// events are kept).
func countSeriesCSV(name string, times []int64, base int64) []byte {
	var c CSV
	c.Row("Time (s)", name)
	for _, k := range Downsample(len(times), CDFRows) {
		c.Row(Repr(float64(times[k]-base)/1e9), IntFormat(float64(k+1)))
	}
	return c.Bytes()
}
