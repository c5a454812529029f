package loadgen

import (
	"crypto/sha256"
	"encoding/binary"
)

// RunSeed is the seed a run draws its prompts, nonces and Poisson gaps from when its
// workload gives none and its prompts must not repeat another run's (each probe run of
// `inferprobe serve`): the first 8 bytes of SHA-256("inferprobe.seed/v1\x00" + runID),
// big-endian, as an int64. The same run id always gives the same seed, so a run's traffic
// can be rebuilt from its artifact (the workload record holds the seed, the header the run
// id).
func RunSeed(runID string) int64 {
	sum := sha256.Sum256(append([]byte("inferprobe.seed/v1\x00"), runID...))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// UseRunSeed gives the run its own seed, RunSeed(c.RunID), and sets RunSeeded. Call it once
// RunID is final.
func (c *Config) UseRunSeed() {
	c.Seed, c.RunSeeded = RunSeed(c.RunID), true
}
