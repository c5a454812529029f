//go:build linux

package client

import "unsafe"

func unsafePointer(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }

// unsafeBytes views the first n bytes of an 8-byte-aligned buffer (tests).
func unsafeBytes(buf []uint64, n int) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), n)
}
