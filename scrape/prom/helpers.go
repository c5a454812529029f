package prom

import "github.com/inferprobe/inferprobe/artifact"

// fptr returns a pointer to an artifact.Float.
func fptr(v float64) *artifact.Float { f := artifact.Float(v); return &f }
