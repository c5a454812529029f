//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package artifact

// lockFile does nothing where flock is not available: two Writers may then open the same
// path, and the last to write wins.
func lockFile(uintptr) error { return nil }
